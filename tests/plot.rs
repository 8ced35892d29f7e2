//! The `plot` helper draws a PNG from real run directories, fabricated ones and the scripts' tables.

mod common;
use std::path::{Path, PathBuf};
use std::process::Output;

/// `plot ARGS --out OUT`, the PNG removed first.
fn plot(args: &[&str], out: &Path) -> Output {
    let _ = std::fs::remove_file(out);
    let plot = std::process::Command::new(env!("CARGO_BIN_EXE_plot")).args(args).arg("--out").arg(out).output();
    plot.expect("plot starts")
}

/// [`plot`], which must succeed and write a PNG: its stdout.
fn plot_ok(args: &[&str], out: &Path) -> String {
    let r = plot(args, out);
    assert!(r.status.success(), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
    assert!(std::fs::read(out).expect("PNG written").starts_with(b"\x89PNG\r\n\x1a\n"), "{args:?}: a PNG");
    String::from_utf8_lossy(&r.stdout).into_owned()
}

/// A path as one of `plot`'s arguments.
fn s(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}

/// Two runs drawn, their returns and a column of updates.csv; bad input is one line, exit code 2, no PNG.
#[test]
fn plot_draws_png_from_runs() {
    let a = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "4096", "--seed", "1"]);
    let b = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "4096", "--seed", "2"]);
    let (dir, out) = (a.assert_ok().dir(), a.workdir.path().join("curves.png"));
    plot_ok(&[s(&dir), s(&b.assert_ok().dir())], &out);
    assert!(std::fs::read(&out).expect("PNG written").len() > 10_000, "a blank PNG");
    plot_ok(&[s(&dir), "--metric", "charts/learning_rate"], &a.workdir.path().join("lr.png"));
    let (run, nope) = (s(&dir), a.workdir.path().join("nope"));
    let bad: &[(&[&str], &str)] = &[
        (&[s(&nope)], "args.json"),
        (&[run, "--window", "0"], "'0' for '--window"),
        (&[run, "--points", "1"], "'1' for '--points"),
        (&[run, "--x-axis", "minutes"], "'minutes' for '--x-axis"),
        (&[run, "--metric", "charts/no_such_column"], "no column charts/no_such_column"),
        (&[run, "--no-such-flag"], "--no-such-flag"),
        (&[], "<RUNS>"),
    ];
    for (args, needle) in bad {
        let out = a.workdir.path().join("bad.png");
        common::assert_one_line(&plot(args, &out), 2, needle, &format!("{args:?}"));
        assert!(!out.exists(), "{args:?}: a PNG was written");
    }
}

/// Runs of different lengths: each point of the mean is drawn from the runs that reach it, up to the
/// longest, and the legend (and a printed line) says how many runs are of each length.
#[test]
fn runs_of_different_lengths_are_drawn_to_the_longest() {
    let short = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "2048", "--seed", "1"]);
    let long = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "8192", "--seed", "2"]);
    let end = |r: &common::Run| *r.assert_ok().csv("updates.csv").col("global_step").last().expect("an update");
    assert_eq!((end(&short), end(&long)), (2048.0, 8192.0));
    let stdout = plot_ok(&[s(&short.dir()), s(&long.dir())], &short.workdir.path().join("curves.png"));
    for want in [
        "CartPole-v1, ppo (2 runs: 1 of 2,048 steps, 1 of 8,192): the line ends at ",
        " (8,192 steps)\n",
        "band: min–max over the runs; past a run's end, mean and band are of the runs that go on\n",
    ] {
        assert!(stdout.contains(want), "expected '{want}' in: {stdout}");
    }
}

/// A fabricated run directory `<root>/<name>/`: args.json, episodes.csv (an episode of each return, at
/// each step) and updates.csv (an update every 512 steps up to `steps`), with a real run's column names.
fn fake_run(root: &Path, name: &str, episodes: &[(u64, f64)], steps: u64) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).expect("run dir");
    let args = r#"{"binary": "ppo_atari", "env_id": "BreakoutNoFrameskip-v4", "exp_name": "ppo_atari", "seed": 1}"#;
    std::fs::write(dir.join("args.json"), args).expect("args.json");
    let mut csv = String::from("global_step,charts/episodic_return,charts/episodic_length\n");
    for (step, ret) in episodes {
        csv += &format!("{step},{ret},100\n");
    }
    std::fs::write(dir.join("episodes.csv"), csv).expect("episodes.csv");
    let mut csv =
        String::from("iteration,global_step,charts/learning_rate,timing/collection_seconds,timing/learning_seconds\n");
    for i in 1..=steps / 512 {
        csv += &format!("{i},{},0.00025,0.5,0.25\n", i * 512);
    }
    std::fs::write(dir.join("updates.csv"), csv).expect("updates.csv");
    dir
}

/// What a reader needs beside the curves, printed as the PNG states it: how many runs (two seeds of one length are
/// "2 runs"), that the line is the mean of each run's return averaged over its last `--window` episodes, that the
/// band is the min–max over the runs; values in plain numbers (`1.8`, not `1.800`).
#[test]
fn legend_says_runs_smoothing_and_band_in_plain_numbers() {
    let work = tempfile::tempdir().expect("temp dir");
    // 20 episodes of return 1, then 20 of 1.8 (so each run's average of its last 20 is 1.8)
    let episodes = |last: u64| -> Vec<(u64, f64)> {
        (0..40).map(|i| (100 + i * (last - 100) / 39, if i < 20 { 1.0 } else { 1.8 })).collect()
    };
    let a = fake_run(work.path(), "a", &episodes(9_500), 10_240);
    let b = fake_run(work.path(), "b", &episodes(9_800), 10_240);
    let c = fake_run(work.path(), "c", &episodes(4_000), 5_120);
    let out = work.path().join("curves.png");
    let lines = |args: &[&str]| plot_ok(args, &out).lines().take(2).map(String::from).collect::<Vec<_>>();
    assert_eq!(
        lines(&[s(&a), s(&b)]),
        [
            "BreakoutNoFrameskip-v4: line: mean over the runs of each run's episodic return averaged over its last \
             20 episodes; band: min–max over the runs",
            "BreakoutNoFrameskip-v4, ppo_atari (2 runs): the line ends at 1.8 (10,240 steps)",
        ]
    );
    // one run, --window 5: no band, the window named
    assert_eq!(
        lines(&[s(&a), "--window", "5"]),
        [
            "BreakoutNoFrameskip-v4: line: the run's episodic return averaged over its last 5 episodes",
            "BreakoutNoFrameskip-v4, ppo_atari (1 run): the line ends at 1.8 (10,240 steps)",
        ]
    );
    // a shorter third run: how many runs are of each length
    let stdout = plot_ok(&[s(&a), s(&b), s(&c)], &out);
    let want = "BreakoutNoFrameskip-v4, ppo_atari (3 runs: 1 of 5,120 steps, 2 of 10,240): the line ends at 1.8 \
                (10,240 steps)";
    assert!(stdout.contains(want), "expected '{want}' in: {stdout}");
}

/// The two tables the scripts write: scripts/bench_workers' (miniDRL's three scaling figures) and
/// scripts/study_cartpole's runs (the solved fraction against episodes); a table without its columns is
/// one line, exit code 2.
#[test]
fn plot_draws_the_scripts_tables() {
    let work = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        let path = work.path().join(name);
        std::fs::write(&path, text).expect("table written");
        path
    };
    let workers = write(
        "workers.csv",
        "series,workers,envs_per_worker,batch,sps,experience_sps,learning_sps,rounds\n\
         ppo_lstm_fixed_envs,1,4,512,2600,9400,4000,3\nfixed_envs,1,4,512,3300,15000,4300,3\n\
         ppo_lstm_fixed_envs,2,4,1024,4100,17700,5300,3\nfixed_envs,2,4,1024,3800,22000,4400,3\n\
         ppo_lstm_one_worker,1,8,1024,4200,18000,5500,3\none_worker,1,8,1024,5300,28900,6400,3\n",
    );
    let runs = write(
        "runs.csv",
        "table,setting,seed,solved,episodes,steps\n\
         lr,0.01,1,1,200,30000\nlr,0.01,2,0,,900000\nnoise,both,1,1,900,99000\n",
    );
    let (bad, out) = (write("bad.csv", "a,b\n1,2\n"), work.path().join("out.png"));
    for flag in ["--workers-table", "--solved-table"] {
        plot_ok(&[flag, s(if flag == "--workers-table" { &workers } else { &runs })], &out);
        common::assert_one_line(&plot(&[flag, s(&bad)], &out), 2, "no column", flag);
    }
}

/// A run of several seeds (`ppo_seeds`) is drawn as that many runs: three seeds in one directory give the
/// mean and band of three runs, each curve from its seed's rows alone.
#[test]
fn a_run_of_seeds_is_drawn_as_its_seeds() {
    let r = common::run(env!("CARGO_BIN_EXE_ppo_seeds"), &["--num-seeds", "3", "--total-timesteps", "2048"]);
    let stdout = plot_ok(&[s(&r.assert_ok().dir())], &r.workdir.path().join("seeds.png"));
    assert!(stdout.contains("CartPole-v1, ppo_seeds (3 runs)"), "{stdout}");
    assert!(stdout.contains("band: min–max over the runs"), "{stdout}");
}
