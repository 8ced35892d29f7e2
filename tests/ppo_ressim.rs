//! `ppo_ressim` end to end: the real binary, briefly, on the reference's 61x61 test case (ResSim-case1).

mod common;
use common::run;

const BIN: &str = env!("CARGO_BIN_EXE_ppo_ressim");
const PARENT: &str = env!("CARGO_BIN_EXE_ppo_continuous");

/// 10 envs x 10 steps, 5 minibatches of 20, 4 updates.
const SMALL: &[&str] = &["--env-id", "ResSim-case1", "--num-envs", "10", "--num-steps", "10", "--num-minibatches", "5"];
const SHORT: &[&str] = &["--total-timesteps", "400"];

/// At epoch 0 / minibatch 0 the policy has not moved: ratio 1, nothing clipped, approx_kl small; the returns are
/// recovery factors; the TensorBoard events hold the CSVs' values.
#[test]
fn ratio_is_one_at_the_first_minibatch_and_returns_are_recovery_factors() {
    let r = run(BIN, &[SMALL, SHORT].concat());
    let u = r.assert_ok().csv("updates.csv");
    assert_eq!(u.rows.len(), 4);
    common::assert_ratio_one(&u, 0); // the paper's narrow policy moves fast: approx_kl allowed up to 0.5
    assert!(u.col("losses/approx_kl").iter().all(|&kl| kl.is_finite() && (-1e-6..0.5).contains(&kl)));
    let returns = r.csv("episodes.csv").col("charts/episodic_return");
    assert!(!returns.is_empty() && returns.iter().all(|&rf| (0.0..1.0).contains(&rf)), "{returns:?}");
    common::assert_tensorboard_matches_csvs(&r);
}

/// Given ppo_continuous's settings (two separate 64-64 networks, log std 0, its normalization, CleanRL's stop)
/// ppo_ressim runs ppo_continuous's run on the same env and seed, within rounding (`common::assert_close`).
#[test]
fn with_the_parents_settings_it_is_the_parent() {
    let common = ["--env-id", "ResSim-case1", "--num-envs", "4", "--update-epochs", "3", "--seed", "3"];
    let common = [&common[..], &["--num-steps", "10", "--num-minibatches", "2", "--total-timesteps", "200"]].concat();
    let parent = run(PARENT, &common);
    // ppo_continuous's defaults where ppo_ressim's are the paper's
    let settings =
        ["--anneal-lr", "--learning-rate", "3e-4", "--clip-coef", "0.2", "--ent-coef", "0", "--vf-coef", "0.5"];
    let stop = ["--clip-vloss", "--target-kl", "inf", "--kl-rule", "cleanrl", "--normalize"];
    let network = ["--hidden-sizes", "64,64", "--shared-trunk", "false", "--log-std-init", "0"];
    let ours = run(BIN, &[&common[..], &settings, &stop, &network].concat());
    common::assert_runs_its_parent(&parent, &ours, 5, "ppo_continuous's settings");
}

/// Ressim 3, SB3's rule (the default): the update stops at the first minibatch whose approx_kl is above 1.5 x
/// target_kl, before its step (`common::assert_early_stops`); CleanRL's rule finishes the epoch.
#[test]
fn target_kl_stops_the_epochs() {
    let (kls, minibatches) = (["losses/approx_kl"], 5.0);
    let sb3 = run(BIN, &[SMALL, SHORT, &["--target-kl", "0.002"]].concat());
    common::assert_early_stops(&sb3.assert_ok().csv("updates.csv"), false, &kls, 0.002, minibatches);
    let cleanrl = run(BIN, &[SMALL, SHORT, &["--target-kl", "0.002", "--kl-rule", "cleanrl"]].concat());
    common::assert_early_stops(&cleanrl.assert_ok().csv("updates.csv"), true, &kls, 0.002, minibatches);
}

/// Seed 5 on 1 and on 2 env threads logs the same updates.csv and episodes.csv, timing columns aside; seed 6 logs other
/// updates.
#[test]
fn same_seed_same_metrics() {
    let a = run(BIN, &[SMALL, SHORT, &["--seed", "5", "--env-threads", "1"]].concat());
    let b = run(BIN, &[SMALL, SHORT, &["--seed", "5", "--env-threads", "2"]].concat());
    common::assert_same_metrics(&a, &b, &run(BIN, &[SMALL, SHORT, &["--seed", "6"]].concat()));
}

/// Bad input: one line, exit code 2, no run directory. Every shared flag at its edge (`common::SHARED_FLAG_EDGES`),
/// bad values of flags of its own, the env ids of another binary or of none, a permeability file that cannot be
/// read, an indivisible batch, fewer steps than one batch, and `--capture-video`.
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    common::assert_bad_input(BIN, common::SHARED_FLAG_EDGES);
    common::assert_bad_input(
        BIN,
        &[
            (&["--env-id", "HalfCheetah-v4"], &[], "run it with ppo_continuous;"),
            (&["--env-id", "ResSim-v9"], &[], "unknown env id 'ResSim-v9'"),
            (&["--perm-file", "/nonexistent/field.csv"], &[], "permeability file /nonexistent/field.csv"),
            (&["--num-steps", "3", "--num-minibatches", "2", "--num-envs", "5"], &[], "divisible by --num-minibatches"),
            (&["--total-timesteps", "100"], &[], "below one batch"),
            (&["--capture-video"], &[], "this binary's envs draw no frames"),
        ],
    );
    let edges: &[(&str, &str, &str)] = &[
        ("--hidden-sizes", "64,0", "0"),
        ("--log-std-init", "nan", "nan"),
        ("--perm-seed", "-1", "-1"),
        ("--shared-trunk", "maybe", "maybe"),
        ("--kl-rule", "maybe", "maybe"),
        ("--target-kl", "-0.05", "-0.05"),
        ("--num-steps", "0", "0"),
    ];
    for (flag, value, bad) in edges {
        common::assert_bad_input(BIN, &[(&[*flag, *value], &[], &format!("'{bad}' for '{flag}"))]);
    }
}
