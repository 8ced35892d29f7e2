//! `ppo` end to end: the real binary, briefly, on CartPole-v1.

mod common;
use common::run;

const BIN: &str = env!("CARGO_BIN_EXE_ppo");

/// About 20 updates of 512 steps.
const SHORT: &[&str] = &["--total-timesteps", "10240"];

/// 20 updates of 512 steps: ratio == 1 (|ratio − 1| within 1e-5) and nothing clipped at every update's first minibatch,
/// approx_kl below 0.02 at each, TensorBoard holding the CSVs' values, and a progress line per update with the time
/// left.
#[test]
fn ratio_is_one_at_first_minibatch_and_kl_stays_small() {
    let r = run(BIN, SHORT);
    let updates = r.assert_ok().csv("updates.csv");
    assert_eq!(updates.rows.len(), 20);
    common::assert_ratio_one(&updates, 50);
    common::assert_tensorboard_matches_csvs(&r);
    // off a terminal: a plain line per update here (20 updates, every 2% of the run), with the time left
    let stdout = String::from_utf8_lossy(&r.output.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("update ")).collect();
    assert_eq!(lines.len(), 20, "{stdout}");
    assert!(lines[0].starts_with("update 1/20, global_step 512, ") && lines[0].contains(" left, SPS "), "{stdout}");
    assert!(lines[19].contains(", 00:00:00 left, "), "nothing left after the last update: {stdout}");
}

/// Two runs of seed 5 log the same updates.csv and episodes.csv, timing columns aside (one computation, compared
/// exactly); seed 6 logs other updates.
#[test]
fn same_seed_same_metrics_on_cpu() {
    let a = run(BIN, &[SHORT, &["--seed", "5"]].concat());
    let b = run(BIN, &[SHORT, &["--seed", "5"]].concat());
    let c = run(BIN, &[SHORT, &["--seed", "6"]].concat());
    common::assert_same_metrics(&a, &b, &c);
}

/// `--save-model` writes `<exp-name>.safetensors`, no temporary file left; eval.csv holds 10 episodes of returns in [1,
/// 500]; args.json records the run's flags.
#[test]
fn save_model_writes_weights_and_evaluates_them() {
    let r = run(BIN, &[SHORT, &["--save-model", "--exp-name", "saved"]].concat());
    r.assert_ok();
    assert!(r.dir().join("saved.safetensors").is_file());
    assert!(!r.dir().join("saved.tmp.safetensors").exists(), "temporary file left behind");
    let returns = r.csv("eval.csv").col("eval/episodic_return");
    assert_eq!(returns.len(), 10);
    assert!(returns.iter().all(|r| (1.0..=500.0).contains(r)), "{returns:?}");
    assert_eq!((&r.args()["exp_name"], &r.args()["total_timesteps"]), (&"saved".into(), &10240.into()));
}

/// Bad input: one line, exit code 2, no run directory. Every shared flag at its edge (`common::SHARED_FLAG_EDGES`), an
/// indivisible batch, fewer steps than one batch, an id Gymnasium does not know, and ids another binary runs.
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    common::assert_bad_input(BIN, common::SHARED_FLAG_EDGES);
    common::assert_bad_input(
        BIN,
        &[
            (&["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"], &[], "divisible"),
            (&["--total-timesteps", "100"], &[], "below one batch"),
            (&["--env-id", "NoSuchEnv-v9"], &[], "gymnasium.make('NoSuchEnv-v9') failed: NameNotFound"),
            (&["--env-id", "BreakoutNoFrameskip-v4"], &[], "ppo_atari"),
            (&["--env-id", "Pendulum-v1"], &[], "ppo_continuous"),
        ],
    );
}

/// A run whose loss stops being finite (a legal but absurd value-loss coefficient) ends with one
/// line naming the loss terms and exit code 1, and keeps the metrics it logged.
#[test]
fn a_non_finite_loss_is_one_line_and_exit_code_1_with_metrics_kept() {
    let r = run(BIN, &["--vf-coef", "1e308", "--total-timesteps", "2048"]);
    let stderr = common::assert_one_line(&r.output, 1, "non-finite at update 1", "--vf-coef 1e308");
    assert!(stderr.contains("losses/value_loss"), "{stderr}");
    assert_eq!(r.csv("updates.csv").rows.len(), 1, "the failing update's metrics are kept");
}

/// CleanRL's defaults solve CartPole-v1 (a last-20 mean >= 475 within 500k steps) for 2 of seeds 1, 2, 3, with
/// ratio == 1 on every update and approx_kl < 0.02 over the first 50.
#[test]
fn learns_cartpole_with_defaults() {
    let runs = std::thread::scope(|s| {
        ["1", "2", "3"].map(|seed| s.spawn(move || run(BIN, &["--seed", seed]))).map(|h| h.join().expect("run thread"))
    });
    let mut means = Vec::new();
    for r in &runs {
        common::assert_ratio_one(&r.assert_ok().csv("updates.csv"), 50);
        let episodes = r.csv("episodes.csv");
        assert!(episodes.col("global_step").iter().all(|&s| s <= 500_000.0));
        means.push(episodes.col("charts/episodic_return").iter().rev().take(20).sum::<f64>() / 20.0);
    }
    assert!(means.iter().filter(|&&m| m >= 475.0).count() >= 2, "mean of the last 20 returns, seeds 1-3: {means:?}");
}

/// Runs started at the same moment with the same run name (a sweep over another flag) each get a complete
/// directory of their own (`<run-name>`, `<run-name>-2`), never one shared directory.
#[test]
fn runs_started_together_never_share_a_directory() {
    let workdir = tempfile::tempdir().expect("temp dir");
    let start = |lr: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ppo"))
            .args(["--cuda", "false", "--total-timesteps", "2048", "--learning-rate", lr])
            .current_dir(workdir.path())
            .spawn()
            .expect("binary starts")
    };
    // several pairs, so that at least one starts within the same second
    let children: Vec<_> = ["1e-4", "2e-4", "3e-4", "4e-4", "5e-4", "6e-4"].map(start).into();
    for mut child in children {
        assert!(child.wait().expect("the run ends").success());
    }
    let dirs: Vec<_> =
        std::fs::read_dir(workdir.path().join("runs")).expect("runs/").map(|e| e.expect("entry").path()).collect();
    assert_eq!(dirs.len(), 6, "one directory per run: {dirs:?}");
    let mut rates: Vec<String> = Vec::new();
    for dir in &dirs {
        assert_eq!(
            common::Table::read(&dir.join("updates.csv")).rows.len(),
            4,
            "{}: 4 updates, each once",
            dir.display()
        );
        rates.push(common::args_json(dir)["learning_rate"].to_string());
    }
    rates.sort();
    rates.dedup();
    assert_eq!(rates.len(), 6, "every run's own args.json: {rates:?}");
    let suffixed = dirs.iter().filter(|d| d.to_string_lossy().ends_with("-2")).count();
    let names: std::collections::HashSet<_> =
        dirs.iter().map(|d| d.to_string_lossy().trim_end_matches("-2").to_string()).collect();
    assert!(suffixed == 0 || names.len() < dirs.len(), "a -2 suffix only where names collided");
}

/// Aux 1: with `--anneal-clip` `charts/clip_coef` decays linearly, 0.2 x (1 - (i - 1) / N); without it, it stays
/// 0.2; ratio == 1 either way.
#[test]
fn anneal_clip_decays_the_clip_coefficient_linearly() {
    for (flags, annealed) in [(&["--anneal-clip"][..], true), (&[][..], false)] {
        let r = run(BIN, &[SHORT, flags].concat());
        let updates = r.assert_ok().csv("updates.csv");
        let n = updates.rows.len() as f64;
        for (i, clip) in updates.col("charts/clip_coef").into_iter().enumerate() {
            let want = if annealed { 0.2 * (1.0 - i as f64 / n) } else { 0.2 };
            assert!((clip - want).abs() < 1e-12, "update {}: clip_coef {clip}, expected {want}", i + 1);
        }
        common::assert_ratio_one(&updates, 50);
    }
}

/// `--capture-video`: env 0's episodes on CleanRL's schedule (0, 1, 8, ...), one GIF each in videos/<run-name>/;
/// the metrics are those of a run without it.
#[test]
fn capture_video_writes_env_0s_episodes_as_gifs() {
    let r = run(BIN, &["--total-timesteps", "2048", "--capture-video"]);
    r.assert_ok();
    let dir = common::assert_video_folder(&r, "CartPole-v1__ppo__1__", 10_000);
    let mut gifs: Vec<String> = std::fs::read_dir(&dir)
        .expect("the video folder")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .collect();
    gifs.sort();
    assert_eq!(&gifs[..3], ["episode-0.gif", "episode-1.gif", "episode-8.gif"], "{gifs:?}");
    let plain = run(BIN, &["--total-timesteps", "2048"]);
    let metrics = |r: &common::Run| r.csv("updates.csv").without(common::TIMING_COLUMNS);
    assert_eq!(metrics(&r), metrics(plain.assert_ok()));
}
