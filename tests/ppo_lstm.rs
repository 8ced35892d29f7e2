//! `ppo_lstm` end to end: the real binary, briefly, on the velocity-masked CartPoleNoVel-v1 (the
//! MLP encoder) and on Breakout (the CNN).

mod common;
use common::{assert_bad_input, assert_ratio_one_and_small_kl, run};

const BIN: &str = env!("CARGO_BIN_EXE_ppo_lstm");
const NO_VEL: &[&str] = &["--env-id", "CartPoleNoVel-v1", "--torch-threads", "1"];

/// At epoch 0 / minibatch 0 the ratio is 1: this is what checks LSTM 5, since a replayed state
/// that differs from the rollout's (wrong initial state, resets, order) moves the ratio off 1.
#[test]
fn ratio_is_one_at_first_minibatch_and_kl_stays_small() {
    let r = run(BIN, &[NO_VEL, &["--total-timesteps", "8192"]].concat());
    r.assert_ok();
    let updates = r.csv("updates.csv");
    assert_eq!(updates.rows.len(), 8);
    assert_ratio_one_and_small_kl(&updates, "debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl", 50);
    common::assert_tensorboard_matches_csvs(&r);
    assert!(!r.csv("episodes.csv").rows.is_empty(), "no CartPole episode finished");

    let breakout = run(BIN, &["--total-timesteps", "2048"]);
    breakout.assert_ok();
    let updates = breakout.csv("updates.csv");
    assert_eq!(updates.rows.len(), 2);
    assert_ratio_one_and_small_kl(&updates, "debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl", 50);
}

#[test]
fn same_seed_same_metrics_with_one_or_two_env_threads() {
    let args = [NO_VEL, &["--total-timesteps", "2048", "--seed", "3"]].concat();
    let a = run(BIN, &[&args[..], &["--env-threads", "1"]].concat());
    let b = run(BIN, &[&args[..], &["--env-threads", "2"]].concat());
    let c = run(BIN, &[NO_VEL, &["--total-timesteps", "2048", "--seed", "4"]].concat());
    common::assert_same_metrics(&a, &b, &c);
}

/// The saved weights reload and play 10 episodes, the LSTM state carried from step to step.
#[test]
fn save_model_writes_weights_and_evaluates_them() {
    let r = run(BIN, &[NO_VEL, &["--total-timesteps", "2048", "--save-model"]].concat());
    r.assert_ok();
    assert!(r.dir().join("ppo_lstm.safetensors").is_file());
    let returns = r.csv("eval.csv").col("eval/episodic_return");
    assert_eq!(returns.len(), 10);
    assert!(returns.iter().all(|r| (1.0..=500.0).contains(r)), "{returns:?}");
}

#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    // the shared edges, but for the one whose --num-envs 1 cannot be split into 8 minibatches here
    let shared: Vec<common::BadInput> = common::SHARED_FLAG_EDGES.iter().filter(|c| !c.2.contains("--norm-adv")).copied().collect();
    assert_bad_input(BIN, &shared);
    assert_bad_input(
        BIN,
        &[
            (&["--num-envs", "6", "--num-minibatches", "4"], &[], "minibatches are whole envs"),
            (&["--num-envs", "4", "--num-minibatches", "4", "--num-steps", "1"], &[], "--norm-adv"),
            (&["--env-id", "HalfCheetah-v4"], &[], "run it with ppo_continuous;"),
            (&["--env-id", "NoSuchGameNoFrameskip-v4"], &[], "unknown env id 'NoSuchGameNoFrameskip-v4'"),
        ],
    );
}
