//! `ppo_multilevel` end to end: the real binary, briefly, on the small configuration
//! (ResSim-case1: the reference's 61x61 test case, levels 15², 30², 61²).

mod common;
use common::{run, Run, Table};

const BIN: &str = env!("CARGO_BIN_EXE_ppo_multilevel");
const PARENT: &str = env!("CARGO_BIN_EXE_ppo_ressim");

/// 10 envs, 4 iterations; with [`SMALL_LEVELS`], the small configuration.
const SMALL_ENVS: &[&str] = &["--env-id", "ResSim-case1", "--num-envs", "10", "--num-iterations", "4"];
/// 3 levels, T = 20, 5, 5 and M = 40, 10, 10 (5 minibatches on every level).
const SMALL_LEVELS: [&str; 6] = levels("15,30,61", "20,5,5", "40,10,10");

/// The level lists: grids, steps and minibatch sizes.
const fn levels<'a>(grids: &'a str, steps: &'a str, minibatches: &'a str) -> [&'a str; 6] {
    ["--levels", grids, "--level-steps", steps, "--level-minibatch-size", minibatches]
}

/// The small configuration with `more` flags.
fn small<'a>(more: &[&'a str]) -> Vec<&'a str> {
    [SMALL_ENVS, &SMALL_LEVELS, more].concat()
}

fn kl_and_ratio_columns(u: &Table) -> (Vec<String>, Vec<String>) {
    let cols = |suffix: &str| {
        u.header.iter().filter(|h| h.ends_with(suffix) && !h.contains("old_")).cloned().collect::<Vec<_>>()
    };
    (cols("approx_kl"), cols("first_mb_max_ratio_dev"))
}

/// Ratio 1 and nothing clipped at the first minibatch, for the main batches of every level and the sync batches;
/// every KL estimate finite and modest; recovery factors; each level's loss with its spread.
#[test]
fn ratio_is_one_for_main_and_sync_batches_and_kl_is_sane() {
    let r = run(BIN, &small(&[]));
    let u = r.assert_ok().csv("updates.csv");
    assert_eq!(u.rows.len(), 4);
    let (kls, devs) = kl_and_ratio_columns(&u);
    for level in ["l1", "l2", "l2_sync", "l3", "l3_sync"] {
        assert!(
            devs.iter().any(|c| c == &format!("debug/{level}_first_mb_max_ratio_dev")),
            "no ratio column for {level}: {devs:?}"
        );
    }
    for col in &devs {
        assert!(u.col(col).iter().all(|&d| d <= 1e-5), "{col}: {:?}", u.col(col));
        let clip = col.replace("max_ratio_dev", "clipfrac");
        assert!(u.col(&clip).iter().all(|&c| c == 0.0), "{clip}: {:?}", u.col(&clip));
    }
    for col in &kls {
        // (r - 1) - log r >= 0; the paper's narrow policy (log std -2.9, 62 action dimensions)
        // moves fast, and a sync batch's KL is not checked, so allow some overshoot
        assert!(u.col(col).iter().all(|&kl| kl.is_finite() && (-1e-6..0.5).contains(&kl)), "{col}: {:?}", u.col(col));
    }
    assert!(
        r.csv("episodes.csv").col("charts/episodic_return").iter().all(|&rf| (0.0..1.0).contains(&rf)),
        "recovery factors in [0, 1)"
    );
    // Multilevel 5: each level's L^l logged with its spread over the minibatches (the MLMC's V_l)
    for l in ["l1", "l2", "l3"] {
        let (loss, var) = (u.col(&format!("losses/{l}_loss")), u.col(&format!("losses/{l}_loss_var")));
        assert!(loss.iter().all(|x| x.is_finite()) && var.iter().all(|&v| v > 0.0), "{l}: {loss:?} {var:?}");
    }
    common::assert_tensorboard_matches_csvs(&r);
}

/// Aux 3 as the paper ran it (Ressim 3, SB3's rule; Multilevel 6): the update stops at the first minibatch whose main
/// batch on any level has an approx_kl above 1.5 x target_kl, before its step; one that ran all 20 epochs never saw
/// one. CleanRL's rule stops only at an epoch's end, on the finest main batch's KL against target_kl itself.
#[test]
fn target_kl_stops_the_epochs() {
    let minibatches = 5.0; // the small configuration's minibatches per epoch
    let (main, finest) = (["losses/l1_approx_kl", "losses/l2_approx_kl", "losses/l3_approx_kl"], ["losses/approx_kl"]);
    let sb3 = run(BIN, &small(&["--target-kl", "0.005"]));
    common::assert_early_stops(&sb3.assert_ok().csv("updates.csv"), false, &main, 0.005, minibatches);
    let cleanrl = run(BIN, &small(&["--target-kl", "0.005", "--kl-rule", "cleanrl"]));
    common::assert_early_stops(&cleanrl.assert_ok().csv("updates.csv"), true, &finest, 0.005, minibatches);
    let off = run(BIN, &small(&["--target-kl", "inf"]));
    let u = off.assert_ok().csv("updates.csv");
    assert!(u.col("debug/optimizer_steps").iter().all(|&s| s == 20.0 * minibatches));
}

/// Multilevel 3: each sync row is its main row's env at the same step, taking the same action: with two equal grids
/// every sync row equals its main row, so L^2 = L(main) − L(sync) is 0 up to rounding in every minibatch.
#[test]
fn sync_rows_pair_with_main_rows() {
    let r = run(BIN, &[SMALL_ENVS, &levels("30,30", "5,5", "10,10")].concat());
    let u = r.assert_ok().csv("updates.csv");
    assert_eq!(u.rows.len(), 4);
    let col = |name: &str| u.col(name);
    for (i, (loss, var)) in col("losses/l2_loss").iter().zip(col("losses/l2_loss_var")).enumerate() {
        assert!(loss.abs() <= 1e-7 && var <= 1e-12, "update {i}: L^2 {loss}, variance {var}");
    }
    for (main, sync) in col("losses/l2_approx_kl").iter().zip(col("losses/l2_sync_approx_kl")) {
        assert!((main - sync).abs() <= 1e-7, "the main rows' KL {main}, the sync rows' {sync}: a rounding at most");
    }
    assert!(col("losses/l1_loss_var").iter().all(|&v| v > 1e-7), "{:?}", col("losses/l1_loss_var"));
}

/// The reference's invariant: with one level, `ppo_multilevel` runs its parent `ppo_ressim` (`common::assert_close`),
/// at the paper's settings and with ppo_continuous's normalization, CleanRL's stop and the adaptive rate.
#[test]
fn one_level_is_its_parent() {
    let common = ["--env-id", "ResSim-case1", "--num-envs", "4", "--update-epochs", "3", "--seed", "3"];
    let others: [&[&str]; 2] = [
        &["--target-kl", "0.01"],
        &["--normalize", "--kl-rule", "cleanrl", "--target-kl", "0.02", "--adaptive-lr", "--shared-trunk", "false"],
    ];
    for other in others {
        let parent = ["--num-steps", "10", "--num-minibatches", "2", "--total-timesteps", "200"];
        let parent = run(PARENT, &[&common[..], &parent, other].concat());
        let multi = run(BIN, &[&common[..], &levels("61", "10", "20"), &["--num-iterations", "5"], other].concat());
        common::assert_runs_its_parent(&parent, &multi, 5, &format!("{other:?}"));
    }
}

/// Extra 1 under the MLMC loss: with one minibatch per level and two epochs, each update's rate is rsl_rl's rule
/// applied to the previous one and the finest main batch's logged KL; it moves both ways; ratio == 1 on every batch.
#[test]
fn adaptive_lr_follows_the_rule_from_the_finest_main_batchs_kl() {
    let rule = |lr: f64, kl: f64| common::adapt_lr("rsl-rl", lr, kl, 0.01);
    let mut directions = std::collections::BTreeSet::new();
    for lr in ["1e-5", "1e-2"] {
        // (no early stop: the paper's would end an update at 1e-2 before the rule sees its KL)
        let args = ["--adaptive-lr", "--update-epochs", "2", "--learning-rate", lr, "--num-iterations", "6"];
        let levels = levels("15,30,61", "20,5,5", "200,50,50");
        let r = run(BIN, &[SMALL_ENVS, &levels, &args, &["--target-kl", "inf"]].concat());
        let u = r.assert_ok().csv("updates.csv");
        let (rates, kls) = (u.col("charts/learning_rate"), u.col("debug/adaptive_kl"));
        assert!(kls.iter().all(|k| k.is_finite() && *k >= 0.0), "{kls:?}");
        let mut prev: f64 = lr.parse().expect("a number");
        for (i, (&rate, &kl)) in rates.iter().zip(&kls).enumerate() {
            assert_eq!(rate, rule(prev, kl), "update {}: KL {kl}, previous rate {prev}", i + 1);
            directions.insert(rate.partial_cmp(&prev).expect("finite rates"));
            prev = rate;
        }
        let (_, ratio_cols) = kl_and_ratio_columns(&u);
        for col in ratio_cols {
            assert!(u.col(&col).iter().all(|&d| d <= 1e-5), "{col}: {:?}", u.col(&col));
        }
    }
    assert!(directions.contains(&std::cmp::Ordering::Greater), "the rate never went up");
    assert!(directions.contains(&std::cmp::Ordering::Less), "the rate never went down");
}

/// On the small configuration, seed 5 on 1 and on 2 env threads logs the same updates.csv and episodes.csv, timing
/// columns aside; seed 6 logs other updates.
#[test]
fn same_seed_same_metrics_on_cpu_for_any_thread_count() {
    let a = run(BIN, &small(&["--seed", "5", "--env-threads", "1"]));
    let b = run(BIN, &small(&["--seed", "5", "--env-threads", "2"]));
    common::assert_same_metrics(&a, &b, &run(BIN, &small(&["--seed", "6"])));
}

/// Users' own reservoirs: a log-permeability field from a CSV file, or other generated fields by seed; each changes
/// the run, and the file's path is in args.json.
#[test]
fn own_permeability_field_from_a_file_or_a_seed() {
    let dir = tempfile::tempdir().expect("temp dir");
    // a channel across the middle rows of the 61x61 grid, written as a user would
    let field = envs::ressim::perm::channel_field(61, 61, 5.5, -2.0, 0.2, 0.4, 0.4);
    let text: Vec<String> =
        field.chunks(61).map(|row| row.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(",")).collect();
    let path = dir.path().join("my_reservoir.csv");
    std::fs::write(&path, format!("# ln(k / mD)\n{}\n", text.join("\n"))).expect("write the field");
    let path = path.to_str().expect("a UTF-8 path");
    let built_in = run(BIN, &small(&["--seed", "5"]));
    let from_file = run(BIN, &small(&["--seed", "5", "--perm-file", path]));
    let other_seed = run(BIN, &small(&["--seed", "5", "--perm-seed", "2"]));
    let returns = |r: &Run| r.assert_ok().csv("episodes.csv").col("charts/episodic_return");
    assert_ne!(returns(&from_file), returns(&built_in));
    assert_ne!(returns(&other_seed), returns(&built_in));
    let args = from_file.args();
    assert!(args["perm_file"].as_str().is_some_and(|p| p.ends_with("my_reservoir.csv")), "{args}");
}

/// Bad input: one line, exit code 2, no run directory. Every shared flag it takes at its edge
/// (`common::SHARED_FLAG_EDGES`; its levels' flags replace `--num-steps`, `--num-minibatches` and
/// `--total-timesteps`), bad values of flags of its own, levels it cannot run, bad permeability files, and the env
/// ids of another binary or of none.
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    // the flags its levels replace: --level-steps, --level-minibatch-size and --num-iterations
    let replaced = ["--num-steps", "--num-minibatches", "--total-timesteps"];
    let shared: Vec<common::BadInput> =
        common::SHARED_FLAG_EDGES.iter().filter(|c| !c.0.iter().any(|a| replaced.contains(a))).copied().collect();
    common::assert_bad_input(BIN, &shared);
    let dir = tempfile::tempdir().expect("temp dir");
    let short = dir.path().join("short.csv");
    std::fs::write(&short, "-2.0,-2.0\n5.5,5.5\n").expect("write the field");
    let short = short.to_str().expect("a UTF-8 path");
    let nonexistent = "permeability file /nonexistent/field.csv: cannot read it";
    let with_levels = |grids, steps, minibatches| [SMALL_ENVS, &levels(grids, steps, minibatches)].concat();
    common::assert_bad_input(
        BIN,
        &[
            (&small(&["--perm-file", short]), &[], "line 1 has 2 values; the grid is 61x61"),
            (&small(&["--perm-file", "/nonexistent/field.csv"]), &[], nonexistent),
            (&small(&["--perm-file", short, "--perm-seed", "2"]), &[], "cannot be used with"),
            (&["--levels", "30,15,61"], &[], "coarse to fine"),
            (&["--adaptive-lr-rule", "rsl"], &[], "'rsl' for '--adaptive-lr-rule"),
            (&["--desired-kl", "0"], &[], "'0' for '--desired-kl"),
            (&levels("15,61", "20,5,5", "40,10"), &[], "one value per level"),
            (&levels("15,30,61", "20,5", "40,10,10"), &[], "one value per level"),
            (&levels("15,30,61", "20,5,5", "40"), &[], "one value per level"),
            (&with_levels("15,30,61", "20,5,5", "40,10,5"), &[], "same whole number of minibatches"),
            (&["--env-id", "ResSim-v9"], &[], "unknown env id 'ResSim-v9'"),
            (&with_levels("15,30,60", "20,5,5", "40,10,10"), &[], "has no level with a 60x60 grid"),
            (&small(&["--normalize"]), &[], "one level only"),
            (&["--env-id", "HalfCheetah-v4"], &[], "run it with ppo_continuous;"),
            (&with_levels("15,30,61", "1,1,1", "1,1,1"), &[], "--norm-adv"),
        ],
    );
    // one bad value per flag of its own, at or past its edge: the error names the flag and the value
    // (for a list, the element that is out of range)
    let edges: &[(&str, &str, &str)] = &[
        ("--num-iterations", "0", "0"),
        ("--levels", "0", "0"),
        ("--level-steps", "20,0,5", "0"),
        ("--level-minibatch-size", "40,10,0", "0"),
        ("--hidden-sizes", "64,0", "0"),
        ("--log-std-init", "nan", "nan"),
        ("--perm-seed", "-1", "-1"),
        ("--shared-trunk", "maybe", "maybe"),
        ("--kl-rule", "maybe", "maybe"),
    ];
    for (flag, value, bad) in edges {
        common::assert_bad_input(BIN, &[(&[*flag, *value], &[], &format!("'{bad}' for '{flag}"))]);
    }
}
