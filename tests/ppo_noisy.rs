//! `ppo_noisy` end to end: the real binary on CartPole-v1 with each of the report's four noise
//! settings, both kinds of noise, the report's KL-adaptive learning rate, and bad input.

mod common;
use common::{assert_bad_input, run, Run, Table, TIMING_COLUMNS};

const BIN: &str = env!("CARGO_BIN_EXE_ppo_noisy");

fn metrics(r: &Run) -> (Table, Table) {
    (r.csv("updates.csv").without(&[TIMING_COLUMNS, &["debug/adaptive_kl"]].concat()), r.csv("episodes.csv"))
}

/// Every noise setting, factorised and independent, keeps ratio == 1 and a small KL (each sample is evaluated
/// under the noise that chose its action; noise drawn at every forward pass would move the ratio), changes the
/// run from `--noisy none`'s, and repeats with the same seed.
#[test]
fn every_noise_setting_keeps_ratio_one_and_repeats() {
    let args = ["--total-timesteps", "4096"];
    let none = run(BIN, &[&args[..], &["--noisy", "none"]].concat());
    for noisy in ["policy", "value", "both"] {
        for kind in [&[][..], &["--independent-noise"]] {
            let given = [&args[..], &["--noisy", noisy], kind].concat();
            let r = run(BIN, &given);
            let updates = r.assert_ok().csv("updates.csv");
            assert_eq!(updates.rows.len(), 8, "{given:?}");
            common::assert_ratio_one(&updates, 0);
            // the noise moves the policy more than ppo's updates do: up to 0.022 at seed 1
            let kl = updates.col("losses/approx_kl");
            assert!(kl.iter().all(|&kl| kl.is_finite() && kl < 0.03), "{given:?}: approx_kl {kl:?}");
            assert_ne!(metrics(&r).0, metrics(none.assert_ok()).0, "{given:?}: the noise changes nothing");
            if noisy == "both" {
                assert_eq!(metrics(&r), metrics(&run(BIN, &given)), "{given:?}: same seed, other metrics");
            }
        }
    }
}

/// `--noisy none` is `ppo.rs`: the same layers, draws and update. The same counts and episodes, every other value
/// within rounding (`common::assert_close`): two binaries are two computations.
#[test]
fn without_noise_it_is_ppo() {
    let args = ["--total-timesteps", "2048", "--seed", "3"];
    let noisy = run(BIN, &[&args[..], &["--noisy", "none"]].concat());
    let ppo = run(env!("CARGO_BIN_EXE_ppo"), &args);
    let ((a, a_episodes), (b, b_episodes)) = (metrics(noisy.assert_ok()), metrics(ppo.assert_ok()));
    assert_eq!(a_episodes, b_episodes, "the episodes");
    eprintln!("largest difference {:.1e} of a column's scale", common::assert_close(&a, &b, 1e-3, "--noisy none"));
}

/// Extra 2: `--reward-scale` scales what PPO learns from, not the episodes it logs (the first rollout's are the
/// same), the value loss shrinks with it, ratio == 1 holds; `--reward-scale 1` is the default's run.
#[test]
fn reward_scale_scales_what_is_learned_not_what_is_logged() {
    let args = ["--total-timesteps", "1024", "--noisy", "none", "--seed", "3"];
    let plain = run(BIN, &args);
    let one = run(BIN, &[&args[..], &["--reward-scale", "1"]].concat());
    let scaled = run(BIN, &[&args[..], &["--reward-scale", "0.005"]].concat());
    assert_eq!(metrics(plain.assert_ok()), metrics(one.assert_ok()));
    common::assert_ratio_one(&scaled.assert_ok().csv("updates.csv"), 50);
    let first_update = |r: &Run| -> Vec<Vec<String>> {
        let episodes = r.csv("episodes.csv");
        episodes.rows.into_iter().filter(|row| row[0].parse::<f64>().is_ok_and(|step| step <= 512.0)).collect()
    };
    assert!(!first_update(&plain).is_empty());
    assert_eq!(first_update(&plain), first_update(&scaled), "the first rollout's episodes, unscaled");
    let value_loss = |r: &Run| r.csv("updates.csv").col("losses/value_loss")[0];
    let ratio = value_loss(&scaled) / value_loss(&plain);
    assert!(ratio < 0.05, "the value loss with rewards x 0.005: {ratio} of the unscaled one");
}

/// Each setting learns at a learning rate of 1e-3: a 61,440-step run's last 20 episodes on CartPole-v1 average above
/// 100, where a random policy's average 22.
#[test]
fn every_noise_setting_learns_cartpole() {
    for noisy in ["none", "policy", "value", "both"] {
        let r = run(BIN, &["--total-timesteps", "61440", "--noisy", noisy, "--learning-rate", "1e-3"]);
        let returns = r.assert_ok().csv("episodes.csv").col("charts/episodic_return");
        let last: f64 = returns.iter().rev().take(20).sum::<f64>() / 20.0;
        assert!(last > 100.0, "--noisy {noisy}: last 20 episodes' mean return {last}");
    }
}

/// Noisy 4: the saved weights reload and play 10 episodes with the mean weights (no noise); the model
/// file holds σ beside μ.
#[test]
fn save_model_evaluates_the_mean_weights() {
    let r = run(BIN, &["--total-timesteps", "2048", "--save-model"]);
    r.assert_ok();
    let model = tch::Tensor::read_safetensors(r.dir().join("ppo_noisy.safetensors")).expect("the model");
    let names: Vec<&str> = model.iter().map(|(n, _)| n.as_str()).collect();
    for name in ["actor.0.weight", "actor.0.sigma_weight", "critic.4.sigma_bias"] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    assert_eq!(r.csv("eval.csv").col("eval/episodic_return").len(), 10);
}

/// The report's rule (3.6) on the values each update logged: the rate logged with an update is the rule applied
/// to the one before and the update's KL; a large rate with many epochs and a small one move it both ways;
/// ratio == 1 holds.
#[test]
fn adaptive_lr_follows_the_reports_rule() {
    // the reference that ppo_continuous's and ppo_multilevel's `--adaptive-lr-rule tum` runs are held to too
    let rule = |lr: f64, kl: f64, desired: f64| common::adapt_lr("tum", lr, kl, desired);
    let mut directions = std::collections::BTreeSet::new();
    for (lr, epochs) in [("1e-2", "10"), ("1e-5", "1")] {
        let args = ["--adaptive-lr", "--learning-rate", lr, "--update-epochs", epochs, "--total-timesteps", "8192"];
        let u = run(BIN, &args).assert_ok().csv("updates.csv");
        common::assert_ratio_one(&u, 0); // the large rate's KL is meant to pass the band: not checked small
        let (rates, kls) = (u.col("charts/learning_rate"), u.col("debug/adaptive_kl"));
        assert!(kls.iter().all(|k| k.is_finite() && *k >= 0.0), "{kls:?}");
        let before = [&[lr.parse::<f64>().expect("a rate")][..], &rates].concat();
        for (i, (&after, &before)) in rates.iter().zip(&before).enumerate() {
            assert_eq!(after, rule(before, kls[i], 0.01), "update {}: KL {}, rate before {before}", i + 1, kls[i]);
            directions.insert(after.partial_cmp(&before).expect("finite rates"));
        }
    }
    assert!(directions.contains(&std::cmp::Ordering::Greater), "the rate never went up");
    assert!(directions.contains(&std::cmp::Ordering::Less), "the rate never went down");
}

/// The reference every binary's Extra 1 is held to (`common::adapt_lr`): the TUM rule on the hand-worked cases
/// `tests/unit/ppo_noisy.rs` holds ppo_noisy's own rule to, and rsl_rl's on its edges, floor and cap.
#[test]
fn the_rules_hand_worked_cases() {
    let tum = |lr, kl| common::adapt_lr("tum", lr, kl, 0.01);
    let cases: [(f64, f64, f64); 8] = include!("unit/adapt_lr_cases.rs");
    for (lr, kl, want) in cases {
        assert_eq!(tum(lr, kl), want, "tum: lr {lr}, KL {kl}");
    }
    let rsl = |lr, kl| common::adapt_lr("rsl-rl", lr, kl, 0.01);
    assert_eq!(
        (rsl(1e-3, 0.021), rsl(1e-3, 0.02), rsl(1e-3, 0.0049), rsl(1e-3, 0.0)),
        (1e-3 / 1.5, 1e-3, 1.5e-3, 1e-3)
    );
    assert_eq!((rsl(0.05, 0.01), rsl(9e-3, 0.001), rsl(1.2e-5, 1.0)), (0.05, 1e-2, 1e-5));
}

/// Bad input: one line, exit code 2, no run directory. Every shared flag at its edge (`common::SHARED_FLAG_EDGES`), bad
/// `--noisy`, `--desired-kl` and `--reward-scale` values, and an id another binary runs.
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    assert_bad_input(BIN, common::SHARED_FLAG_EDGES);
    assert_bad_input(
        BIN,
        &[
            (&["--noisy", "all"], &[], "'all' for '--noisy"),
            (&["--desired-kl", "0"], &[], "'0' for '--desired-kl"),
            (&["--reward-scale", "0"], &[], "'0' for '--reward-scale"),
            (&["--env-id", "HalfCheetah-v4"], &[], "run it with ppo_continuous;"),
        ],
    );
}
