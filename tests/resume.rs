//! Checkpoints and `--resume`, end to end: a run killed midway continues from its checkpoint with no row lost or
//! repeated; two resumes from one checkpoint agree; bad resumes are one line, exit code 2, nothing written.

mod common;
use common::{assert_success as ok, run_dir, run_in, Table, TIMING_COLUMNS};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const PPO: &str = env!("CARGO_BIN_EXE_ppo");

/// A binary with a configuration of short updates.
struct Variant {
    bin: &'static str,
    args: &'static [&'static str],
    /// the flag of the run's length, and its values for two updates and for four
    length: (&'static str, &'static str, &'static str),
}

/// The binaries that resume in their own test files: `ppo_seeds` (`a_resume_continues_every_seed`) and
/// `ppo_lstm_workers` under `mpirun` (`a_killed_worker_stops_the_job_and_resume_continues`).
const RESUMED_ELSEWHERE: [&str; 2] = ["ppo_seeds", "ppo_lstm_workers"];

const VARIANTS: &[Variant] = &[
    Variant { bin: PPO, args: &["--num-steps", "32"], length: ("--total-timesteps", "256", "512") },
    Variant {
        bin: env!("CARGO_BIN_EXE_ppo_noisy"),
        args: &["--num-steps", "32"],
        length: ("--total-timesteps", "256", "512"),
    },
    Variant {
        bin: env!("CARGO_BIN_EXE_ppo_atari"),
        args: &["--num-envs", "2", "--num-steps", "32", "--torch-threads", "1", "--env-threads", "1"],
        length: ("--total-timesteps", "128", "256"),
    },
    Variant {
        bin: env!("CARGO_BIN_EXE_ppo_atari_multigpu"),
        args: &["--local-num-envs", "2", "--num-steps", "32", "--torch-threads", "1", "--env-threads", "1"],
        length: ("--total-timesteps", "128", "256"),
    },
    Variant {
        bin: env!("CARGO_BIN_EXE_ppo_continuous"),
        args: &["--env-id", "Pendulum-v1", "--num-steps", "64"],
        length: ("--total-timesteps", "128", "256"),
    },
    Variant {
        bin: env!("CARGO_BIN_EXE_ppo_lstm"),
        args: &["--env-id", "CartPoleNoVel-v1", "--num-envs", "4", "--num-steps", "32", "--torch-threads", "1"],
        length: ("--total-timesteps", "256", "512"),
    },
    Variant {
        bin: env!("CARGO_BIN_EXE_ppo_multidiscrete_mask"),
        args: &["--env-id", "GridHarvest-v0", "--num-envs", "4", "--num-steps", "32", "--torch-threads", "1"],
        length: ("--total-timesteps", "256", "512"),
    },
    Variant {
        bin: env!("CARGO_BIN_EXE_ppo_multilevel"),
        args: &[
            "--env-id",
            "ResSim-case1",
            "--num-envs",
            "10",
            "--levels",
            "15,30,61",
            "--level-steps",
            "20,5,5",
            "--level-minibatch-size",
            "40,10,10",
        ],
        length: ("--num-iterations", "2", "4"),
    },
    Variant {
        bin: env!("CARGO_BIN_EXE_ppo_ressim"),
        args: &["--env-id", "ResSim-case1", "--num-envs", "10", "--num-steps", "10", "--num-minibatches", "5"],
        length: ("--total-timesteps", "200", "400"),
    },
];

/// updates.csv without the columns that measure time, and episodes.csv: two resumes from one checkpoint compare
/// exactly.
fn metrics(run: &Path) -> (Table, Table) {
    let updates = Table::read(&run.join("updates.csv"));
    let timing: Vec<&str> = updates.header.iter().map(String::as_str).filter(|h| h.starts_with("timing/")).collect();
    (updates.without(&[TIMING_COLUMNS, &timing].concat()), Table::read(&run.join("episodes.csv")))
}

/// Every file of a directory and its contents, to show that nothing was written.
fn contents(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = walk(dir).into_iter().map(|p| (p.clone(), std::fs::read(&p).expect("file"))).collect();
    files.sort();
    files
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flat_map(|e| {
                    let p = e.expect("entry").path();
                    if p.is_dir() {
                        walk(&p)
                    } else {
                        vec![p]
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Each binary but those of `RESUMED_ELSEWHERE`: two updates, then `--resume` to four: ratio == 1 at the resumed
/// updates, one row per iteration in order, TensorBoard matching the CSVs; a second resume from a copy of the
/// checkpoint gives the same metrics.
#[test]
fn every_binary_resumes_from_its_checkpoint() {
    let listed: Vec<&str> = VARIANTS.iter().map(|v| v.bin.rsplit('/').next().expect("a file name")).collect();
    for bin in common::family().into_iter().flat_map(|(parent, child)| [parent, child]) {
        let here = listed.contains(&bin.as_str()) || RESUMED_ELSEWHERE.contains(&bin.as_str());
        assert!(here, "{bin} (diffs/family.txt) is neither in VARIANTS nor in RESUMED_ELSEWHERE");
    }
    for v in VARIANTS {
        let work = tempfile::tempdir().expect("temp dir");
        let (flag, two, four) = v.length;
        ok(&run_in(work.path(), v.bin, &[v.args, &[flag, two]].concat()));
        let dir = run_dir(work.path());
        assert!(dir.join("checkpoint.safetensors").is_file(), "{}: no checkpoint after the last update", v.bin);
        let copy = tempfile::tempdir().expect("temp dir");
        let copied = copy.path().join("run");
        common::copy_dir(&dir, &copied);

        let resume = |dir: &Path| run_in(work.path(), v.bin, &["--resume", dir.to_str().expect("utf-8"), flag, four]);
        ok(&resume(&dir));
        ok(&resume(&copied));
        let updates = Table::read(&dir.join("updates.csv"));
        assert_eq!(updates.col("iteration"), vec![1.0, 2.0, 3.0, 4.0], "{}", v.bin);
        assert_ratio_one(&updates, v.bin);
        assert_eq!(metrics(&dir), metrics(&copied), "{}: two resumes from one checkpoint differ", v.bin);
        common::assert_tensorboard_matches_dir(&dir);
    }
}

/// `ppo` with CleanRL's defaults, killed with SIGKILL at about 40%, then resumed: each iteration once, in order,
/// episodes' steps never going back, TensorBoard matching; it still solves CartPole (last-20 mean >= 475). While it
/// trains, a resume of it is refused.
#[test]
fn a_killed_run_resumes_without_losing_or_repeating_a_row() {
    let work = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(PPO)
        .args(["--cuda", "false", "--seed", "1"])
        .current_dir(work.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ppo starts");
    let run = || std::fs::read_dir(work.path().join("runs")).ok()?.next()?.ok().map(|e| e.path());
    let ready = |d: &PathBuf| common::rows(d) >= 400 && d.join("checkpoint.safetensors").exists();
    common::wait_for(300, "400th update", || run().is_some_and(|d| ready(&d)));
    let dir = run().expect("the run directory");
    let refused = run_in(work.path(), PPO, &["--resume", dir.to_str().expect("utf-8")]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("is in use by process {} (ppo)", child.id())), "{stderr}");
    child.kill().expect("SIGKILL");
    child.wait().expect("killed");
    let logged = common::rows(&dir);
    assert!(logged < 976, "the run ended before it was killed");

    ok(&run_in(work.path(), PPO, &["--resume", dir.to_str().expect("utf-8")]));
    let updates = Table::read(&dir.join("updates.csv"));
    assert_eq!(updates.col("iteration"), (1..=976).map(|i| i as f64).collect::<Vec<_>>(), "one row per iteration");
    assert_eq!(updates.col("global_step"), (1..=976).map(|i| 512.0 * i as f64).collect::<Vec<_>>());
    let episodes = Table::read(&dir.join("episodes.csv"));
    let steps = episodes.col("global_step");
    assert!(steps.windows(2).all(|w| w[0] <= w[1]) && steps.iter().all(|&s| s <= 499_712.0), "episode steps in order");
    let returns = episodes.col("charts/episodic_return");
    let last_20 = returns.iter().rev().take(20).sum::<f64>() / 20.0;
    assert!(last_20 >= 475.0, "last-20 mean {last_20} after resuming at update ~{logged}");
    common::assert_tensorboard_matches_dir(&dir);
}

/// Ratio == 1 and nothing clipped at the first minibatch of every update, in every batch's columns (ppo_multilevel
/// has one per level): the loaded weights are the ones that collected the rollout.
fn assert_ratio_one(updates: &Table, bin: &str) {
    let columns = |suffix: &str| updates.header.iter().filter(|h| h.ends_with(suffix)).cloned().collect::<Vec<_>>();
    let (ratio, clip) = (columns("first_mb_max_ratio_dev"), columns("first_mb_clipfrac"));
    assert!(!ratio.is_empty() && ratio.len() == clip.len(), "{bin}: {:?}", updates.header);
    for (r, c) in ratio.iter().zip(&clip) {
        assert!(updates.col(r).iter().all(|&dev| dev <= 1e-5), "{bin}: {r} {:?}", updates.col(r));
        assert!(updates.col(c).iter().all(|&f| f == 0.0), "{bin}: {c} {:?}", updates.col(c));
    }
}

/// A crash while a checkpoint is written leaves a half-written temporary file beside the previous checkpoint: the
/// run resumes from the previous one, and the half-written file goes, but not a model saved as `a.tmp.b`.
#[test]
fn a_checkpoint_write_cut_short_leaves_the_previous_one_loadable() {
    let work = tempfile::tempdir().expect("temp dir");
    let args = ["--num-steps", "32", "--total-timesteps", "256", "--exp-name", "a.tmp.b", "--save-model"];
    ok(&run_in(work.path(), PPO, &args));
    let dir = run_dir(work.path());
    let (model, checkpoint) = (dir.join("a.tmp.b.safetensors"), std::fs::read(dir.join("checkpoint.safetensors")));
    assert!(model.exists(), "the model was saved");
    let checkpoint = checkpoint.expect("checkpoint");
    // the temporary file of a process that died (its id in the name: no two processes write one file)
    let half = dir.join("checkpoint.tmp.4242.safetensors");
    std::fs::write(&half, &checkpoint[..checkpoint.len() / 2]).expect("write");
    let resume = ["--resume", dir.to_str().expect("utf-8"), "--total-timesteps", "512", "--save-model", "false"];
    ok(&run_in(work.path(), PPO, &resume));
    assert_eq!(Table::read(&dir.join("updates.csv")).col("iteration"), vec![1.0, 2.0, 3.0, 4.0]);
    assert!(!half.exists(), "the half-written file is left behind");
    assert!(model.exists(), "the resume deleted the user's model");
}

/// Two `--resume` of one run started at once: one writes the run, the other is refused (in use, or complete), and
/// the logs hold one row per iteration.
#[test]
fn two_resumes_at_once_leave_one_writer() {
    let work = tempfile::tempdir().expect("temp dir");
    ok(&run_in(work.path(), PPO, &["--num-steps", "32", "--total-timesteps", "256"]));
    let dir = run_dir(work.path());
    let resume = || {
        let args = ["--cuda", "false", "--resume", dir.to_str().expect("utf-8"), "--total-timesteps", "8192"];
        Command::new(PPO).args(args).current_dir(work.path()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()
    };
    let (first, second) = (resume().expect("starts"), resume().expect("starts"));
    let outputs = [first.wait_with_output().expect("ends"), second.wait_with_output().expect("ends")];
    let codes: Vec<_> = outputs.iter().map(|o| o.status.code()).collect();
    let stderrs: Vec<_> = outputs.iter().map(|o| String::from_utf8_lossy(&o.stderr).to_string()).collect();
    assert!(codes.contains(&Some(0)) && codes.contains(&Some(2)), "{codes:?}: {stderrs:?}");
    let refused = &stderrs[codes.iter().position(|c| *c == Some(2)).expect("one refused")];
    assert!(refused.contains("is in use by process") || refused.contains("is complete"), "{refused}");
    let updates = Table::read(&dir.join("updates.csv"));
    assert_eq!(updates.col("iteration"), (1..=64).map(|i| i as f64).collect::<Vec<_>>(), "one row per iteration");
    common::assert_tensorboard_matches_dir(&dir);
}

/// The run directory is checked before anything starts. In each binary of `VARIANTS`, an `--exp-name` too long for a
/// file name is one line, exit code 2, nothing written. In `ppo`, a `runs` that is a file is one line, exit code 2.
#[test]
fn the_run_directory_is_checked_before_anything_starts() {
    let long = "x".repeat(300);
    for v in VARIANTS {
        let work = tempfile::tempdir().expect("temp dir");
        let output = run_in(work.path(), v.bin, &[v.args, &["--exp-name", &long]].concat());
        common::assert_one_line(&output, 2, "--exp-name is 300 bytes", v.bin);
        assert!(std::fs::read_dir(work.path()).expect("dir").next().is_none(), "{}: something was written", v.bin);
    }
    let work = tempfile::tempdir().expect("temp dir");
    std::fs::write(work.path().join("runs"), b"").expect("write");
    let output = run_in(work.path(), PPO, &["--num-steps", "32", "--total-timesteps", "256"]);
    common::assert_one_line(&output, 2, "runs is not a directory", "runs, a file");
}

/// Bad `--resume`s of a `ppo` run: no run or no checkpoint there, a damaged checkpoint, another env's or binary's run,
/// a flag given another value, a complete run, an args.json with a bad value, an unknown key or a missing flag, logs
/// cut short, a run in use. Each is one line naming the problem, exit code 2, no panic, every file byte for byte the
/// same. The run's own values, the flags that may change and a missing flag that changes nothing are accepted.
#[test]
fn bad_resumes_are_one_line_exit_2_and_write_nothing() {
    let work = tempfile::tempdir().expect("temp dir");
    ok(&run_in(work.path(), PPO, &["--num-steps", "32", "--total-timesteps", "1024"]));
    let run = run_dir(work.path());
    let variant = |name: &str, change: &dyn Fn(&Path)| {
        let dir = work.path().join(name);
        common::copy_dir(&run, &dir);
        change(&dir);
        dir
    };
    let checkpoint = |dir: &Path| dir.join("checkpoint.safetensors");
    let bytes = std::fs::read(checkpoint(&run)).expect("checkpoint");
    let empty = work.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    let no_checkpoint = variant("no-checkpoint", &|d| std::fs::remove_file(checkpoint(d)).expect("rm"));
    let garbage = variant("garbage", &|d| std::fs::write(checkpoint(d), b"not a checkpoint").expect("write"));
    let truncated = variant("truncated", &|d| std::fs::write(checkpoint(d), &bytes[..bytes.len() - 100]).expect("w"));
    let flipped = variant("flipped", &|d| {
        let mut b = bytes.clone();
        let last = b.len() - 1000; // in the tensors' data, past the header
        b[last] ^= 1;
        std::fs::write(checkpoint(d), b).expect("write");
    });
    let edit_args = |d: &Path, from: &str, to: &str| {
        let args = std::fs::read_to_string(d.join("args.json")).expect("args.json");
        assert!(args.contains(from), "{from} in {args}");
        std::fs::write(d.join("args.json"), args.replace(from, to)).expect("write");
    };
    let other_env = variant("other-env", &|d| edit_args(d, "CartPole-v1", "Acrobot-v1"));
    let gamma = variant("gamma", &|d| edit_args(d, "\"gamma\": 0.99", "\"gamma\": 7.5"));
    let minibatches = variant("minibatches", &|d| edit_args(d, "\"num_minibatches\": 4", "\"num_minibatches\": 7"));
    let unknown = variant("unknown", &|d| edit_args(d, "\"gamma\": 0.99", "\"gama\": 0.99"));
    // a run of an earlier build, whose args.json lacks a flag added since: gamma changes the training
    let no_gamma = variant("no-gamma", &|d| edit_args(d, "\"gamma\": 0.99,", ""));
    // the logs' last rows lost: the checkpoint stands at update 8, the logs must reach it
    let cut = |name: &str, keep: usize| {
        variant(&format!("cut-{name}"), &|d| {
            let text = std::fs::read_to_string(d.join(name)).expect("csv");
            let kept: Vec<&str> = text.lines().take(1 + keep).collect();
            std::fs::write(d.join(name), kept.join("\n") + "\n").expect("write");
        })
    };
    let (cut_updates, cut_episodes) = (cut("updates.csv", 5), cut("episodes.csv", 3));
    // episodes.csv damaged to its first column (global_step): an earlier build panicked reading the returns
    let one_column = variant("one-column", &|d| {
        let text = std::fs::read_to_string(d.join("episodes.csv")).expect("csv");
        let first: Vec<&str> = text.lines().map(|l| l.split(',').next().unwrap_or_default()).collect();
        std::fs::write(d.join("episodes.csv"), first.join("\n") + "\n").expect("write");
    });
    // a process (this test) holds the run's lock, as a live run does
    let held = variant("held", &|_| {});
    let lock = std::fs::File::options().read(true).write(true).open(held.join("lock")).expect("the run's lock file");
    lock.try_lock().expect("free");
    std::fs::write(held.join("lock"), format!("process {} (the test)\n", std::process::id())).expect("write");
    let s = |p: &Path| p.to_str().expect("utf-8").to_string();
    let (run_s, atari) = (s(&run), env!("CARGO_BIN_EXE_ppo_atari"));
    let holder = format!("in use by process {} (the test)", std::process::id());
    let resume = |dir: &Path, more: &[&str]| {
        [vec!["--resume".to_string(), s(dir)], more.iter().map(|w| w.to_string()).collect()].concat()
    };
    let longer = |dir: &Path| resume(dir, &["--total-timesteps", "2048"]);
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        (PPO, resume(Path::new("/nonexistent/run"), &[]), "no args.json there"),
        (PPO, resume(&empty, &[]), "no args.json there"),
        (PPO, longer(&no_checkpoint), "no checkpoint"),
        (PPO, longer(&garbage), "damaged or truncated"),
        (PPO, longer(&truncated), "damaged or truncated"),
        (PPO, longer(&flipped), "checksum"),
        (PPO, longer(&other_env), "on CartPole-v1, not"),
        (atari, resume(&run, &[]), "it is a run of ppo, not of ppo_atari"),
        (PPO, resume(&run, &["--learning-rate", "0.1"]), "--learning-rate 0.1"),
        (PPO, resume(&run, &["--num-envs", "8"]), "--num-envs 8 is not the run's 4"),
        (PPO, resume(&run, &[]), "is complete (8 of 8 iterations)"),
        (PPO, longer(&gamma), "its args.json has invalid value '7.5' for '--gamma"),
        (PPO, longer(&minibatches), "(128) must be divisible by --num-minibatches (7)"),
        (PPO, longer(&unknown), "its args.json has \"gama\", which is no flag of ppo"),
        (PPO, longer(&no_gamma), "lacks \"gamma\" (--gamma): the run comes from an earlier build of ppo; start a new"),
        (PPO, longer(&cut_updates), "its updates.csv has 5 rows up to the checkpoint's iteration 8, 3 fewer"),
        (PPO, longer(&cut_episodes), "its episodes.csv has 3 episodes up to the checkpoint's global_step 1024"),
        (PPO, longer(&one_column), "its episodes.csv has no charts/episodic_return column"),
        (PPO, longer(&held), &holder),
    ];
    let before = contents(work.path());
    for (bin, args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        common::assert_one_line(&run_in(work.path(), bin, &args), 2, needle, &format!("{args:?}"));
        assert!(contents(work.path()) == before, "{args:?}: something was written");
    }
    // the run's own values and the flags that may change are accepted
    ok(&run_in(work.path(), PPO, &["--resume", &run_s, "--learning-rate", "2.5e-4", "--total-timesteps", "2048"]));
    // a longer wait for a Gymnasium env's answer changes nothing in training
    ok(&run_in(work.path(), PPO, &["--resume", &run_s, "--env-timeout", "600", "--total-timesteps", "2560"]));
    // an earlier build's run without a flag that changes nothing in training (capture_video): its default
    let old = variant("no-capture-video", &|d| edit_args(d, "\"capture_video\": false,", ""));
    ok(&run_in(work.path(), PPO, &["--resume", &s(&old), "--total-timesteps", "3072"]));
    drop(lock);
}

/// `ppo_atari_multigpu` under `mpirun -np 2`: rank 0 writes the checkpoint, every rank loads it; the resumed
/// updates keep ratio == 1 and the ranks' weights identical; one process cannot continue the run.
#[test]
fn two_ranks_resume_from_rank_0s_checkpoint() {
    let bin = env!("CARGO_BIN_EXE_ppo_atari_multigpu");
    let work = tempfile::tempdir().expect("temp dir");
    let mpirun = |args: &[&str]| {
        let output = common::mpirun(work.path(), bin, &["--quiet"], args).output();
        output.expect("mpirun starts (scripts/setup installs openmpi-bin)")
    };
    let small = ["--local-num-envs", "2", "--num-steps", "32", "--torch-threads", "1", "--env-threads", "1"];
    ok(&mpirun(&[&small[..], &["--total-timesteps", "256"]].concat()));
    let dir = run_dir(work.path());
    let dir_s = dir.to_str().expect("utf-8");
    ok(&mpirun(&["--resume", dir_s, "--total-timesteps", "512"]));
    let updates = Table::read(&dir.join("updates.csv"));
    assert_eq!(updates.col("iteration"), vec![1.0, 2.0, 3.0, 4.0]);
    assert_eq!(updates.col("global_step"), vec![128.0, 256.0, 384.0, 512.0]);
    assert_ratio_one(&updates, bin);
    // one process cannot continue a run of two
    let alone = run_in(work.path(), bin, &["--resume", dir_s, "--total-timesteps", "1024"]);
    assert_eq!(alone.status.code(), Some(2), "{}", String::from_utf8_lossy(&alone.stderr));
}

/// `ppo_noisy --adaptive-lr`: the checkpoint keeps the rate the last KL gave, so the resumed updates go on from it.
#[test]
fn ppo_noisys_adaptive_learning_rate_survives_a_resume() {
    let (rates, kls) = resumed_rates("ppo_noisy", &["--adaptive-lr", "--total-timesteps", "1024"], "2048");
    for i in 1..4 {
        let want = common::adapt_lr("tum", rates[i - 1], kls[i], 0.01);
        assert_eq!(rates[i], want, "update {}: {rates:?}, KL {kls:?}", i + 1);
    }
    assert_ne!(rates[1], 2.5e-4, "(the check can tell the checkpoint's rate from --learning-rate)");
}

/// `ppo_continuous --adaptive-lr`: the first resumed update applies the rule to the checkpoint's rate (one
/// minibatch, two epochs: the first adaptation sees KL 0 and changes nothing, the second the logged KL).
#[test]
fn the_adaptive_learning_rate_survives_a_resume() {
    let args = ["--env-id", "Pendulum-v1", "--adaptive-lr", "--num-steps", "64", "--num-minibatches", "1"];
    let args = [&args[..], &["--update-epochs", "2", "--total-timesteps", "128"]].concat();
    let (rates, kls) = resumed_rates("ppo_continuous", &args, "256");
    let rule = |lr: f64, kl: f64| common::adapt_lr("rsl-rl", lr, kl, 0.01);
    assert_eq!(rates[2], rule(rates[1], kls[2]), "the resumed update starts from the checkpoint's rate: {rates:?}");
    assert_ne!(rates[2], rule(3e-4, kls[2]), "(the check can tell the checkpoint's rate from --learning-rate)");
}

/// `binary ARGS` resumed to `--total-timesteps STEPS`: its four updates' learning rates and adaptive KLs.
fn resumed_rates(binary: &str, args: &[&str], steps: &str) -> (Vec<f64>, Vec<f64>) {
    let (bin, work) = (common::bin(binary), tempfile::tempdir().expect("temp dir"));
    ok(&run_in(work.path(), &bin, args));
    let dir = run_dir(work.path());
    ok(&run_in(work.path(), &bin, &["--resume", dir.to_str().expect("utf-8"), "--total-timesteps", steps]));
    let updates = Table::read(&dir.join("updates.csv"));
    assert_eq!(updates.rows.len(), 4, "{binary}: four updates");
    (updates.col("charts/learning_rate"), updates.col("debug/adaptive_kl"))
}

/// A run of an earlier build resumes with today's: each run of two updates in `tests/earlier_runs/<binary>/`
/// (`scripts/earlier-runs`) continues for one more, ratio == 1; a flag added since reads as that build did
/// (`--adaptive-lr-rule` of ppo_continuous and ppo_multilevel).
#[test]
fn runs_of_an_earlier_build_resume() {
    let earlier = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/earlier_runs");
    let bins = ["ppo", "ppo_noisy", "ppo_atari", "ppo_atari_multigpu", "ppo_continuous", "ppo_lstm"];
    for name in bins.into_iter().chain(["ppo_lstm_workers", "ppo_multidiscrete_mask", "ppo_multilevel"]) {
        let bin = &common::bin(name);
        let made = run_dir(&earlier.join(name));
        let work = tempfile::tempdir().expect("temp dir");
        let dir = work.path().join("runs").join(made.file_name().expect("a run's name"));
        common::copy_dir(&made, &dir);
        let args = common::args_json(&dir);
        let updates = Table::read(&dir.join("updates.csv"));
        assert_eq!(updates.col("iteration"), [1.0, 2.0], "{name}: the earlier run has two updates");
        // one more update: ppo_multilevel counts iterations, the others steps (a batch per update)
        let (flag, longer) = match args["num_iterations"].as_u64() {
            Some(n) => ("--num-iterations", n + 1),
            None => ("--total-timesteps", args["total_timesteps"].as_u64().expect("steps") * 3 / 2),
        };
        ok(&run_in(work.path(), bin, &["--resume", dir.to_str().expect("utf-8"), flag, &longer.to_string()]));
        let updates = Table::read(&dir.join("updates.csv"));
        assert_eq!(updates.col("iteration"), [1.0, 2.0, 3.0], "{name}: one row per iteration");
        assert_ratio_one(&updates, name);
    }
}
