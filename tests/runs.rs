//! What a user sees of a run: where it is and where its results are, what Ctrl-C or SIGTERM says (and that the
//! command it names resumes the run), the evaluation in TensorBoard, no column a run does not have, the progress.

mod common;
use common::{read_scalars, run, Table};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const PPO: &str = env!("CARGO_BIN_EXE_ppo");

/// The second line names the run's directory, the last where its results are and how to draw them.
#[test]
fn a_run_says_where_it_is_and_where_its_results_are() {
    let r = run(PPO, &["--total-timesteps", "1024"]);
    let stdout = String::from_utf8_lossy(&r.assert_ok().output.stdout).into_owned();
    let lines: Vec<&str> = stdout.lines().collect();
    let dir = r.dir();
    let name = format!("runs/{}", dir.file_name().expect("a name").to_string_lossy());
    assert!(lines[0].starts_with("device: "), "{stdout}");
    assert_eq!(lines[1], format!("run directory: {name}"), "{stdout}");
    let last = lines.last().expect("output");
    assert!(last.starts_with(&format!("results: {name} (`cargo run --release --bin plot -- {name}`")), "{stdout}");
}

/// Starts `ppo` in `work` with `args`, waits until its updates.csv holds `rows` rows, sends `signal`
/// and returns (exit code, stderr, run directory).
fn stop_after(work: &Path, args: &[&str], rows: usize, signal: &str) -> (Option<i32>, String, std::path::PathBuf) {
    let mut child = Command::new(PPO)
        .args(["--cuda", "false"])
        .args(args)
        .current_dir(work)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ppo starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    while !line.starts_with("run directory: ") {
        line.clear();
        assert!(stdout.read_line(&mut line).expect("stdout") > 0, "no run directory line");
    }
    let dir = work.join(line.trim_end().trim_start_matches("run directory: "));
    common::wait_for(120, &format!("{rows} updates"), || common::rows(&dir) >= rows);
    let killed = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status();
    assert!(killed.expect("kill runs").success());
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink())); // drain what is left
    let out = child.wait_with_output().expect("ppo ends");
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned(), dir)
}

/// Ctrl-C ends the run at once with one line naming the command that resumes it and the iteration it continues
/// from, the last checkpoint's; that command goes on from there to the run's end, every iteration logged once.
#[test]
fn ctrl_c_says_how_to_resume_and_the_command_resumes() {
    let work = tempfile::tempdir().expect("temp dir");
    let args = ["--num-envs", "1", "--num-steps", "32", "--total-timesteps", "16000", "--checkpoint-interval", "3"];
    let (code, stderr, dir) = stop_after(work.path(), &args, 7, "INT");
    assert_eq!(code, Some(130), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    let name = format!("runs/{}", dir.file_name().expect("a name").to_string_lossy());
    let command = format!("`cargo run --release --bin ppo -- --resume {name}`");
    assert!(stderr.starts_with("SIGINT: stopped after update ") && stderr.contains(&command), "{stderr}");
    let from: usize = stderr.trim_end().rsplit(' ').next().and_then(|n| n.parse().ok()).expect("an iteration");
    let logged = Table::read(&dir.join("updates.csv")).rows.len();
    assert!(from >= 6 && from % 3 == 0 && from <= logged, "continues from {from}, {logged} updates logged");
    let resumed = Command::new(PPO).args(["--resume", &name]).current_dir(work.path()).output().expect("ppo starts");
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let iterations = Table::read(&dir.join("updates.csv")).col("iteration");
    assert_eq!(iterations, (1..=500).map(|i| i as f64).collect::<Vec<_>>());
}

/// SIGTERM before the first checkpoint: the line says there is nothing to resume, and where the metrics are; exit
/// code 143.
#[test]
fn sigterm_before_the_first_checkpoint_says_there_is_nothing_to_resume() {
    let work = tempfile::tempdir().expect("temp dir");
    let args = ["--num-envs", "1", "--num-steps", "32", "--total-timesteps", "16000", "--checkpoint-interval", "400"];
    let (code, stderr, dir) = stop_after(work.path(), &args, 2, "TERM");
    assert_eq!(code, Some(143), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("SIGTERM: stopped after update "), "{stderr}");
    assert!(stderr.contains("before the first checkpoint (update 400): nothing to resume"), "{stderr}");
    let name = dir.file_name().expect("a name").to_string_lossy().into_owned();
    assert!(stderr.contains(&format!("the metrics so far are in runs/{name}")), "{stderr}");
}

/// `--save-model`'s evaluation is in the TensorBoard events as CleanRL writes it: one `eval/episodic_return` per
/// episode, at step = the episode's index, the values of eval.csv.
#[test]
fn evaluation_returns_are_in_tensorboard() {
    let r = run(PPO, &["--total-timesteps", "512", "--save-model"]);
    let eval = r.assert_ok().csv("eval.csv").col("eval/episodic_return");
    let events: Vec<(i64, f64)> = read_scalars(&r.dir())
        .into_iter()
        .filter(|(t, _, _)| t == "eval/episodic_return")
        .map(|(_, s, v)| (s, v))
        .collect();
    assert_eq!(events, eval.iter().enumerate().map(|(i, v)| (i as i64, *v as f32 as f64)).collect::<Vec<_>>());
    assert_eq!(events.len(), 10);
}

/// A column a run does not have is not written: `debug/adaptive_kl` only with `--adaptive-lr`.
#[test]
fn adaptive_kl_is_a_column_only_with_adaptive_lr() {
    let bin = env!("CARGO_BIN_EXE_ppo_noisy");
    for (args, has) in
        [(&["--total-timesteps", "1024"][..], false), (&["--total-timesteps", "1024", "--adaptive-lr"][..], true)]
    {
        let r = run(bin, args);
        let header = r.assert_ok().csv("updates.csv").header;
        assert_eq!(header.iter().any(|h| h == "debug/adaptive_kl"), has, "{args:?}: {header:?}");
        let tags = read_scalars(&r.dir());
        assert_eq!(tags.iter().any(|(t, _, _)| t == "debug/adaptive_kl"), has, "{args:?}");
    }
}

/// Before any episode ended the progress line says so, instead of a NaN mean.
#[test]
fn the_first_progress_line_before_any_episode_says_none_yet() {
    let r = run(env!("CARGO_BIN_EXE_ppo_atari"), &["--num-steps", "16", "--total-timesteps", "256"]);
    let stdout = String::from_utf8_lossy(&r.assert_ok().output.stdout).into_owned();
    let first = stdout.lines().find(|l| l.starts_with("update 1/2")).expect("a progress line");
    assert!(first.ends_with("return (last 20) none yet") && !stdout.contains("NaN"), "{stdout}");
}
