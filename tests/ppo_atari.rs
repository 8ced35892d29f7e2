//! `ppo_atari` end to end: the real binary, briefly, on Breakout through native ALE.

mod common;
use common::{assert_bad_input, run};

const BIN: &str = env!("CARGO_BIN_EXE_ppo_atari");

/// 16 updates of 8 envs x 128 steps, default hyperparameters otherwise.
#[test]
fn ratio_is_one_at_first_minibatch_and_kl_stays_small() {
    let r = run(BIN, &["--total-timesteps", "16384"]);
    let updates = r.assert_ok().csv("updates.csv");
    assert_eq!(updates.rows.len(), 16);
    common::assert_ratio_one(&updates, 50);
    common::assert_tensorboard_matches_csvs(&r);
    // episodes are logged with their raw game score and length in frames
    let episodes = r.csv("episodes.csv");
    assert!(!episodes.rows.is_empty(), "no Breakout game finished in 16k steps");
    assert!(episodes.col("charts/episodic_length").iter().all(|&l| l > 100.0));
}

/// Seed 3 on 1 and on 2 env threads logs the same updates.csv and episodes.csv, timing columns aside; seed 4 logs other
/// updates.
#[test]
fn same_seed_same_metrics_with_one_or_two_env_threads() {
    let args = ["--total-timesteps", "2048", "--seed", "3"];
    let a = run(BIN, &[&args[..], &["--env-threads", "1"]].concat());
    let b = run(BIN, &[&args[..], &["--env-threads", "2"]].concat());
    let c = run(BIN, &["--total-timesteps", "2048", "--seed", "4"]);
    common::assert_same_metrics(&a, &b, &c);
}

/// Native Seaquest and Gymnasium's (ale-py in Python processes) are the same run: the same seed gives the same
/// metrics and episodes. Seaquest's emulator draws random numbers: with another emulator seed natively, the runs part
/// at update 3. So each env plays 4,096 frames here.
#[test]
fn native_and_gymnasiums_seaquest_are_the_same_run() {
    let args = ["--total-timesteps", "2048", "--num-envs", "2"];
    let native = run(BIN, &[&args[..], &["--seed", "3", "--env-id", "SeaquestNoFrameskip-v4"]].concat());
    let gymnasium = run(BIN, &[&args[..], &["--seed", "3", "--env-id", "gymnasium:SeaquestNoFrameskip-v4"]].concat());
    let other_seed = run(BIN, &[&args[..], &["--seed", "4", "--env-id", "SeaquestNoFrameskip-v4"]].concat());
    common::assert_same_metrics(&native, &gymnasium, &other_seed);
}

/// Bad input: one line, exit code 2, no run directory. Every shared flag at its edge (`common::SHARED_FLAG_EDGES`), ids
/// that are no v4 game, an id another binary runs, a ROM directory that is missing or lacks the game, and an
/// indivisible batch.
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    assert_bad_input(BIN, common::SHARED_FLAG_EDGES);
    assert_bad_input(
        BIN,
        &[
            (&["--env-id", "NoSuchGameNoFrameskip-v4"], &[], "NoSuchGameNoFrameskip-v4"),
            (&["--env-id", "BasicMathNoFrameskip-v4"], &[], "unknown env id"),
            (&["--env-id", "Breakout-v5"], &[], "unknown env id"),
            (&["--env-id", "CartPole-v1"], &[], "ppo or ppo_noisy or ppo_seeds or ppo_lstm or ppo_lstm_workers;"),
            (&[], &[("ALE_ROM_DIR", "/nonexistent/roms")], "scripts/setup"),
            (&[], &[("ALE_ROM_DIR", "/")], "breakout.bin is missing"),
            (&["--num-envs", "3", "--num-minibatches", "4", "--num-steps", "7"], &[], "divisible"),
        ],
    );
}

/// `--capture-video`: one folder in `videos/` named after the run, holding env 0's first game as a whole GIF.
#[test]
fn capture_video_writes_env_0s_games_as_gifs() {
    let r = run(BIN, &["--total-timesteps", "2048", "--capture-video"]);
    r.assert_ok();
    // 2048 steps of 8 envs is 256 agent steps (1024 frames) of env 0: its first game is over
    common::assert_video_folder(&r, "BreakoutNoFrameskip-v4__ppo_atari__1__", 100_000);
}
