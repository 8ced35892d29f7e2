//! `ppo_continuous` end to end: the real binary, briefly, on Pendulum-v1 (native) and
//! HalfCheetah-v4 / InvertedPendulum-v4 (MuJoCo, needs scripts/setup's `.mujoco` links).

mod common;
use common::{run, Run};

const BIN: &str = env!("CARGO_BIN_EXE_ppo_continuous");

/// 5 updates of 2048 steps (10 epochs x 32 minibatches each, CleanRL's defaults).
const PENDULUM: &[&str] = &["--env-id", "Pendulum-v1", "--total-timesteps", "10240"];

fn assert_sane(r: &Run, updates: usize) {
    let u = r.assert_ok().csv("updates.csv");
    assert_eq!(u.rows.len(), updates);
    common::assert_ratio_one(&u, 50);
}

/// On Pendulum-v1 (native) and HalfCheetah-v4 (MuJoCo): ratio == 1 and a small KL, the same seed the same metrics.
#[test]
fn same_seed_same_metrics_on_cpu() {
    for (args, updates) in [(PENDULUM, 5), (&["--total-timesteps", "4096"][..], 2)] {
        let a = run(BIN, &[args, &["--seed", "5"]].concat());
        let b = run(BIN, &[args, &["--seed", "5"]].concat());
        let c = run(BIN, &[args, &["--seed", "6"]].concat());
        eprintln!("{args:?}"); // names the case of a failure below
        assert_sane(&a, updates);
        common::assert_same_metrics(&a, &b, &c);
    }
}

/// Pendulum's episodes all end by truncation at 200 steps: bootstrapping them changes the value
/// targets (so the metrics), stays deterministic, and keeps the ratio/KL checks.
#[test]
fn bootstrap_truncation_changes_the_targets_and_stays_deterministic() {
    let on = [PENDULUM, &["--bootstrap-truncation"]].concat();
    let (a, b) = (run(BIN, &on), run(BIN, &on));
    assert_sane(&a, 5);
    let metrics = |r: &Run| r.csv("updates.csv").without(common::TIMING_COLUMNS);
    assert_eq!(metrics(&a), metrics(&b));
    let off = run(BIN, PENDULUM);
    let v = |r: &Run| metrics(r).col("losses/value_loss");
    assert_ne!(v(&a), v(&off), "--bootstrap-truncation had no effect");
    assert_eq!(a.args()["bootstrap_truncation"], true);
}

/// Reads one float64 tensor from a safetensors file (8-byte header size, JSON header, data).
fn read_f64_tensor(path: &std::path::Path, name: &str) -> Vec<f64> {
    let bytes = std::fs::read(path).expect("the model file");
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).expect("a JSON header");
    let entry = &header[name];
    assert_eq!(entry["dtype"], "F64", "{name}: {entry}");
    let [start, end] = [0, 1].map(|i| entry["data_offsets"][i].as_u64().expect("an offset") as usize + 8 + n);
    bytes[start..end].chunks(8).map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

/// HalfCheetah-v4: the model file carries the observation statistics (cleanrl#425), the count of observations seen
/// included, and evaluation runs on them; episodes end at the 1000-step limit; TensorBoard holds the CSVs' values.
#[test]
fn save_model_keeps_observation_statistics_and_evaluates() {
    let r = run(BIN, &["--total-timesteps", "4096", "--save-model", "--exp-name", "saved"]);
    let stats = read_f64_tensor(&r.assert_ok().dir().join("saved.safetensors"), "obs_rms");
    assert_eq!(stats.len(), 2 * 17 + 1, "HalfCheetah: 17 means, 17 variances, 1 count");
    let (count, mean, var) = (stats[34], &stats[..17], &stats[17..34]);
    let steps = 4096.0 + 1.0 + 4.0 + 1e-4; // every step, the first reset, 4 after time limits; the count starts at 1e-4
    assert!((count - steps).abs() < 1e-6, "{count} observations counted, not {steps}");
    let moved = mean.iter().any(|m| m.abs() > 1e-3) && var.iter().all(|v| v.is_finite() && *v > 0.0 && *v != 1.0);
    assert!(moved, "{stats:?}");
    let returns = r.csv("eval.csv").col("eval/episodic_return");
    assert_eq!(returns.len(), 10);
    assert!(returns.iter().all(|r| r.is_finite()), "{returns:?}");
    let lengths = r.csv("episodes.csv").col("charts/episodic_length");
    assert_eq!(lengths, vec![1000.0; 4], "HalfCheetah episodes end at the 1000-step limit");
    common::assert_tensorboard_matches_csvs(&r);
}

/// Extra 1: `--adaptive-lr` sets every rate, so `--anneal-lr` has no effect with it, true or false (the docs say
/// so); without `--adaptive-lr` the two values differ (so the check can fail).
#[test]
fn adaptive_lr_replaces_anneal_lr() {
    let short = ["--env-id", "Pendulum-v1", "--total-timesteps", "1024", "--num-steps", "256"];
    let with = |flags: &[&str]| run(BIN, &[&short[..], flags].concat());
    let adaptive_annealed = with(&["--adaptive-lr", "--anneal-lr", "true"]);
    let adaptive_constant = with(&["--adaptive-lr", "--anneal-lr", "false"]);
    common::assert_runs_its_parent(&adaptive_annealed, &adaptive_constant, 4, "--adaptive-lr --anneal-lr");
    let (annealed, constant) = (with(&["--anneal-lr", "true"]), with(&["--anneal-lr", "false"]));
    let rates = |r: &Run| r.assert_ok().csv("updates.csv").col("charts/learning_rate");
    assert_ne!(rates(&annealed), rates(&constant), "without --adaptive-lr, --anneal-lr changes the rate");
}

/// Extra 1 with each `--adaptive-lr-rule`: with one minibatch and two epochs (KL 0, then the logged one) every rate is
/// the rule applied to the one before; with a large rate and more epochs too, it moves both ways within [1e-5, 1e-2].
#[test]
fn adaptive_lr_follows_the_rule_from_the_logged_kl() {
    let mut directions = std::collections::BTreeSet::new();
    for (rule, epochs, lr) in
        [("rsl-rl", "2", "3e-4"), ("rsl-rl", "4", "5e-3"), ("tum", "2", "1e-5"), ("tum", "10", "1e-2")]
    {
        let args = ["--env-id", "Pendulum-v1", "--total-timesteps", "5120", "--num-steps", "256", "--num-minibatches"];
        let flags =
            ["1", "--adaptive-lr", "--adaptive-lr-rule", rule, "--update-epochs", epochs, "--learning-rate", lr];
        let u = run(BIN, &[&args[..], &flags].concat()).assert_ok().csv("updates.csv");
        let (rates, kls) = (u.col("charts/learning_rate"), u.col("debug/adaptive_kl"));
        assert!(kls.iter().all(|k| k.is_finite() && *k >= 0.0), "{rule}: {kls:?}");
        let mut prev: f64 = lr.parse().expect("a number");
        for (i, (&rate, &kl)) in rates.iter().zip(&kls).enumerate() {
            if epochs == "2" {
                let want = common::adapt_lr(rule, common::adapt_lr(rule, prev, 0.0, 0.01), kl, 0.01);
                assert_eq!(rate, want, "{rule}, update {}: KL {kl}, previous rate {prev}", i + 1);
            }
            directions.insert((rule, rate.partial_cmp(&prev).expect("finite rates")));
            prev = rate;
        }
        assert!(rates.iter().all(|&r| (1e-5..=1e-2).contains(&r)), "{rule}: {rates:?}");
        let dev = u.col("debug/first_mb_max_ratio_dev");
        assert!(dev.iter().all(|&d| d <= 1e-5), "{rule}: {dev:?}");
    }
    for rule in ["rsl-rl", "tum"] {
        for way in [std::cmp::Ordering::Greater, std::cmp::Ordering::Less] {
            assert!(directions.contains(&(rule, way)), "{rule}: the rate never went {way:?}");
        }
    }
}

/// Extra 1's closed-form Gaussian KL agrees with `losses/approx_kl`, Core 12's unbiased estimate of it, within 15%
/// on HalfCheetah (3% measured; a KL averaged over the 6 components, or a variance for a std, lands far outside).
#[test]
fn the_closed_form_kl_agrees_with_the_sampled_estimate() {
    let args = ["--adaptive-lr", "--env-id", "HalfCheetah-v4", "--num-steps", "4096", "--num-minibatches", "2"];
    let r = run(BIN, &[&args[..], &["--update-epochs", "4", "--total-timesteps", "16384"]].concat());
    let u = r.assert_ok().csv("updates.csv");
    let (closed, sampled) = (u.col("debug/adaptive_kl"), u.col("losses/approx_kl"));
    assert_eq!(closed.len(), 4);
    for (c, s) in closed.iter().zip(&sampled) {
        assert!(*s > 1e-4 && (c / s - 1.0).abs() < 0.15, "closed form {closed:?} against sampled {sampled:?}");
    }
}

/// Aux 1 with value clipping: `--anneal-clip` logs a linearly decaying clip coefficient here too.
#[test]
fn anneal_clip_decays_the_clip_coefficient() {
    let r = run(BIN, &[PENDULUM, &["--anneal-clip"]].concat());
    let clip = r.assert_ok().csv("updates.csv").col("charts/clip_coef");
    let want = [0.2, 0.16, 0.12, 0.08, 0.04];
    assert!(clip.len() == 5 && clip.iter().zip(want).all(|(c, w)| (c - w).abs() < 1e-12), "{clip:?}");
}

/// Bad input: one line, exit code 2, no run directory. Every shared flag at its edge (`common::SHARED_FLAG_EDGES`), an
/// unknown id, an id another binary runs, an indivisible batch, bad `--adaptive-lr-rule` and `--desired-kl` values,
/// `--capture-video` on its MuJoCo default, and a missing MuJoCo library or assets. A native env runs without MuJoCo.
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    common::assert_bad_input(BIN, common::SHARED_FLAG_EDGES);
    let no_mujoco = "MuJoCo library /nonexistent/libmujoco.so.3.17.0 not found: run scripts/setup";
    let no_assets = "hopper.xml not found: run scripts/setup";
    common::assert_bad_input(
        BIN,
        &[
            (&["--env-id", "NoSuchEnv-v9"], &[], "NoSuchEnv-v9"),
            (&["--env-id", "CartPole-v1"], &[], "ppo or ppo_noisy or ppo_seeds or ppo_lstm or ppo_lstm_workers;"),
            (&["--num-steps", "100", "--num-minibatches", "32"], &[], "divisible"),
            (&["--adaptive-lr-rule", "rsl"], &[], "'rsl' for '--adaptive-lr-rule"),
            (&["--capture-video"], &[], "cannot draw itself"),
            (&["--desired-kl", "0"], &[], "'0' for '--desired-kl"),
            (&["--desired-kl", "nan"], &[], "'nan' for '--desired-kl"),
            (&[], &[("MUJOCO_DIR", "/nonexistent")], no_mujoco),
            (&["--env-id", "Hopper-v4"], &[("MUJOCO_ASSETS_DIR", "/nonexistent")], no_assets),
        ],
    );
    // the native envs need no MuJoCo at all
    let native = ["--env-id", "Pendulum-v1", "--total-timesteps", "2048"];
    common::run_with_env(BIN, &native, &[("MUJOCO_DIR", "/nonexistent")]).assert_ok();
}

/// CleanRL's defaults balance InvertedPendulum-v4 (a last-20 mean >= 900 within 80k steps) for 2 of seeds 1, 2, 3,
/// with ratio == 1 on every update; the KL bound is 0.05: the first updates, on episodes of a few steps, move more.
#[test]
fn learns_inverted_pendulum_with_defaults() {
    let args = |seed| ["--env-id", "InvertedPendulum-v4", "--total-timesteps", "81920", "--seed", seed];
    let runs = std::thread::scope(|s| {
        ["1", "2", "3"].map(|seed| s.spawn(move || run(BIN, &args(seed)))).map(|h| h.join().expect("run thread"))
    });
    let mut means = Vec::new();
    for r in &runs {
        let updates = r.assert_ok().csv("updates.csv");
        assert_eq!(updates.rows.len(), 40);
        common::assert_ratio_one(&updates, 0);
        assert!(updates.col("losses/approx_kl").iter().all(|&kl| kl < 0.05), "{:?}", updates.col("losses/approx_kl"));
        means.push(r.csv("episodes.csv").col("charts/episodic_return").iter().rev().take(20).sum::<f64>() / 20.0);
    }
    assert!(means.iter().filter(|&&m| m >= 900.0).count() >= 2, "mean of the last 20 returns per seed: {means:?}");
}

/// MuJoCo's failures, forced (PPO_MUJOCO_FAIL): an error on an env thread ends the run with one line and exit
/// code 1, not a signal; mj_makeData's NULL is one line and exit code 2, never a NULL stepped.
#[test]
fn mujocos_failures_end_the_run_with_one_line() {
    for (fail, code, line) in [
        ("error", 1, "error: MuJoCo: mj_stateSize: invalid state signature"),
        ("make_data", 2, "error: HalfCheetah-v4: MuJoCo cannot allocate its simulation data"),
    ] {
        let args = ["--num-envs", "2", "--env-threads", "2", "--total-timesteps", "4096"];
        let r = common::run_with_env(&common::hooked(BIN), &args, &[("PPO_MUJOCO_FAIL", fail)]);
        let stderr = common::assert_one_line(&r.output, code, line, fail);
        assert!(stderr.starts_with(line), "{fail}: {stderr}");
    }
}
