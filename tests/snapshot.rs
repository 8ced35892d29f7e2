//! Pins what each binary computes: a few updates at a fixed seed on the CPU, every logged value
//! (timing columns aside) and every episode, compared cell by cell with the snapshot committed in
//! `tests/snapshots/<case>/`. A change that moves a trajectory fails here; it says so by updating
//! the snapshot in a commit of its own, with the reason:
//! `UPDATE_SNAPSHOTS=1 cargo test --release --test snapshot`.
//!
//! The kernel level is pinned, so that the snapshot holds on any x86-64 machine with AVX2. libtorch's
//! math libraries pick their kernels by processor: on an AVX-512 machine MKL's AVX-512 GEMM moves
//! ppo's first update in the 7th digit against its AVX2 one, and oneDNN's convolutions move ppo_atari's.
//! Each run therefore gets MKL limited to AVX2 with its conditional numerical reproducibility at
//! AVX2 (`MKL_ENABLE_INSTRUCTIONS`, `MKL_CBWR`), oneDNN limited to AVX2 (`ONEDNN_MAX_CPU_ISA`), ATen's
//! own vectorized kernels at AVX2 (`ATEN_CPU_CAPABILITY`), and one libtorch thread (a reduction
//! split over threads sums in another order). The environments are Rust, ALE, MuJoCo and MicroRTS
//! code without fast-math: the same on every such machine.

mod common;
use common::{run_with_env, Table, TIMING_COLUMNS};
use std::path::Path;

/// A cell's tolerance, relative to its column's scale (the largest magnitude the committed column
/// holds), in the update it belongs to: `RELATIVE` in the first, growing `GROWTH`-fold per update
/// after it, as two kernel paths drift apart (see the header for the measurements).
fn tolerance(update: i32) -> f64 {
    RELATIVE * GROWTH.powi(update - 1)
}
const RELATIVE: f64 = 2e-3;
const GROWTH: f64 = 2.0;
/// The least scale a column is given: a policy loss or a KL near 0 is a mean of terms of order 1e-3
/// to 1 that cancel, and its rounding is of their size, not its own.
const SCALE_FLOOR: f64 = 1e-3;
/// Added to every cell's tolerance.
const ABSOLUTE: f64 = 1e-12;
/// |ratio - 1| at the first minibatch is 0 or a float32 rounding (1.2e-7 to 1.5e-5 in ppo_multilevel's
/// 61-cell grids), noise on any scale: compared within this, absolutely (each binary's own test
/// holds it to 1e-5).
const RATIO_DEV: f64 = 1e-4;

/// Runs `bin` with `args`, one libtorch thread and the pinned kernels, and compares its
/// updates.csv (timing aside) and episodes.csv with `tests/snapshots/<case>/`.
fn check(case: &str, bin: &str, args: &[&str]) {
    let args = [args, &["--torch-threads", "1", "--seed", "7"]].concat();
    compare(case, run_with_env(bin, &args, &common::kernel_pin()));
}

/// [`check`] for `np` processes under mpirun (`--quiet`).
fn check_mpi(case: &str, bin: &str, np: usize, args: &[&str]) {
    let args = [args, &["--torch-threads", "1", "--seed", "7"]].concat();
    let workdir = tempfile::tempdir().expect("temp dir");
    let output = common::mpirun_np(workdir.path(), np, bin, &["--quiet"], &args).envs(common::kernel_pin()).output();
    compare(case, common::Run { output: output.expect("mpirun starts"), workdir });
}

/// A finished run's updates.csv (timing aside) and episodes.csv against `tests/snapshots/<case>/`.
fn compare(case: &str, r: common::Run) {
    r.assert_ok();
    let dir = Path::new("tests/snapshots").join(case);
    let updates = r.csv("updates.csv");
    let timing: Vec<&str> = updates.header.iter().filter(|h| h.starts_with("timing/")).map(|h| h.as_str()).collect();
    let got = [
        ("updates.csv", updates.without(&[TIMING_COLUMNS, &timing].concat())),
        ("episodes.csv", r.csv("episodes.csv")),
    ];
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(&dir).expect("tests/snapshots/<case>");
        for (name, table) in &got {
            let mut w = csv::Writer::from_path(dir.join(name)).expect("snapshot file");
            w.write_record(&table.header).expect("header");
            for row in &table.rows {
                w.write_record(row).expect("row");
            }
            w.flush().expect("flush");
        }
        return;
    }
    let want: Vec<Table> = got.iter().map(|(name, _)| Table::read(&dir.join(name))).collect();
    // the update an episode ended in: its global step over the first update's
    let batch = want[0].col("global_step")[0];
    let mut worst = (0.0, String::new());
    // per update, the largest |difference| / scale, for the header's measurements
    let mut drift = vec![0.0f64; want[0].rows.len()];
    for ((name, table), want) in got.iter().zip(&want) {
        assert_eq!(table.header, want.header, "{case}/{name}: the columns changed");
        assert_eq!(table.rows.len(), want.rows.len(), "{case}/{name}: the number of rows changed");
        let step = want.col_index("global_step");
        for (c, column) in want.header.iter().enumerate() {
            let committed: Vec<&str> = want.rows.iter().map(|row| row[c].as_str()).collect();
            let numbers: Option<Vec<f64>> = committed.iter().map(|v| v.parse::<f64>().ok()).collect();
            // counts (steps, lengths, CartPole's returns, epochs) exactly; |ratio - 1| is a rounding, not a count
            let integral = numbers.as_ref().is_none_or(|n| n.iter().all(|v| v.fract() == 0.0));
            let exact = integral && !column.contains("ratio_dev");
            let scale = numbers.iter().flatten().fold(SCALE_FLOOR, |m, v| m.max(v.abs()));
            for (i, (row, wanted)) in table.rows.iter().zip(&committed).enumerate() {
                let at = format!("{case}/{name} row {}, {column}", i + 1);
                let (ours, update) = (&row[c], (want.rows[i][step].parse::<f64>().unwrap_or(0.0) / batch).ceil());
                if exact {
                    assert_eq!(ours, wanted, "{at}: the trajectory moved (exact: see this file's header)");
                    continue;
                }
                let (a, b) = (ours.parse::<f64>().unwrap_or(f64::NAN), wanted.parse::<f64>().unwrap_or(f64::NAN));
                let allowed = match column.contains("ratio_dev") {
                    true => RATIO_DEV,
                    false => tolerance(update.max(1.0) as i32) * scale + ABSOLUTE,
                };
                let share = (a - b).abs() / allowed;
                if let Some(d) = drift.get_mut(update.max(1.0) as usize - 1).filter(|_| !column.contains("ratio_dev")) {
                    *d = d.max((a - b).abs() / scale.max(f64::MIN_POSITIVE));
                }
                if share > worst.0 || share.is_nan() {
                    worst = (share, format!("{at}: {ours} against {wanted}"));
                }
                assert!(
                    share <= 1.0,
                    "{at}: {ours} against the committed {wanted}, {:.1e} of the column's scale {scale:.3e} where \
                     update {update} allows {:.1e}: the trajectory moved (see this file's header)",
                    (a - b).abs() / scale,
                    tolerance(update as i32)
                );
            }
        }
    }
    eprintln!("{case}: largest difference {:.3} of its tolerance ({})", worst.0, worst.1);
    let drift: Vec<String> = drift.iter().map(|d| format!("{d:.1e}")).collect();
    eprintln!("{case}: drift by update (|difference| over the column's scale): {}", drift.join(" "));
    assert!(got[0].1.rows.len() >= 2, "{case}: a few updates, at least two");
}

#[test]
fn ppo_cartpole() {
    check("ppo", env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "2048"]);
}

#[test]
fn ppo_atari_breakout() {
    let args = ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "512", "--env-threads", "1"];
    check("ppo_atari", env!("CARGO_BIN_EXE_ppo_atari"), &args);
}

/// MuJoCo through Reacher-v4: smooth dynamics, so a rounding stays a rounding (HalfCheetah-v4's
/// contacts turn one kernel path's 1e-7 into differences of order 1 within 200 steps).
#[test]
fn ppo_continuous_reacher() {
    let args = ["--env-id", "Reacher-v4", "--num-steps", "256", "--total-timesteps", "1024", "--env-threads", "1"];
    check("ppo_continuous", env!("CARGO_BIN_EXE_ppo_continuous"), &args);
}

#[test]
fn ppo_continuous_pendulum_bootstrap_truncation_anneal_clip() {
    let args = ["--env-id", "Pendulum-v1", "--total-timesteps", "2048", "--num-steps", "256"];
    let args = [&args[..], &["--bootstrap-truncation", "--anneal-clip"]].concat();
    check("ppo_continuous_pendulum", env!("CARGO_BIN_EXE_ppo_continuous"), &args);
}

/// Two updates: rsl_rl's rule decides after each of the update's 320 minibatches (x 1.5 or / 1.5 at
/// KL thresholds), so a rounding that moves one KL across a threshold moves the rate by 1.5x and the
/// run with it; measured, the six kernel paths of the header agree on the first two updates and part
/// on the third.
#[test]
fn ppo_continuous_pendulum_adaptive_lr() {
    let args = ["--env-id", "Pendulum-v1", "--total-timesteps", "512", "--num-steps", "256", "--adaptive-lr"];
    check("ppo_continuous_pendulum_adaptive_lr", env!("CARGO_BIN_EXE_ppo_continuous"), &args);
}

#[test]
fn ppo_lstm_cartpole_novel() {
    let args = ["--env-id", "CartPoleNoVel-v1", "--num-steps", "32", "--total-timesteps", "1024", "--env-threads", "1"];
    check("ppo_lstm", env!("CARGO_BIN_EXE_ppo_lstm"), &args);
}

#[test]
fn ppo_lstm_breakout() {
    let args = ["--num-envs", "4", "--num-steps", "32", "--total-timesteps", "256", "--env-threads", "1"];
    check("ppo_lstm_breakout", env!("CARGO_BIN_EXE_ppo_lstm"), &args);
}

/// Noisy Nets in both networks (factorised), and the report's adaptive rate.
#[test]
fn ppo_noisy_cartpole() {
    let args =
        ["--num-steps", "64", "--total-timesteps", "1536", "--noisy", "both", "--adaptive-lr", "--env-threads", "1"];
    check("ppo_noisy", env!("CARGO_BIN_EXE_ppo_noisy"), &args);
}

/// Two workers and a learner: the job's trajectory, every worker's episodes.
#[test]
fn ppo_lstm_workers_two_workers() {
    let args = ["--env-id", "CartPoleNoVel-v1", "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "1024"];
    check_mpi("ppo_lstm_workers", env!("CARGO_BIN_EXE_ppo_lstm_workers"), 3, &args);
}

#[test]
fn ppo_multidiscrete_mask_gridharvest() {
    let args = ["--env-id", "GridHarvest-v0", "--num-steps", "64", "--total-timesteps", "1536", "--env-threads", "1"];
    check("ppo_multidiscrete_mask", env!("CARGO_BIN_EXE_ppo_multidiscrete_mask"), &args);
}

#[test]
fn ppo_multidiscrete_mask_microrts() {
    let args = ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256", "--env-threads", "1"];
    check("ppo_multidiscrete_mask_microrts", env!("CARGO_BIN_EXE_ppo_multidiscrete_mask"), &args);
}

#[test]
fn ppo_atari_multigpu_one_rank() {
    let args = ["--local-num-envs", "2", "--num-steps", "64", "--total-timesteps", "384", "--env-threads", "1"];
    check("ppo_atari_multigpu", env!("CARGO_BIN_EXE_ppo_atari_multigpu"), &args);
}

/// 8 envs: with 10, two of the header's six kernel paths part from the others in the second update
/// (a minibatch's KL on either side of a threshold, it seems: every count equal, the last
/// minibatch's KL of the other sign).
#[test]
fn ppo_multilevel_ressim() {
    let args = ["--env-id", "ResSim-case1", "--num-envs", "8", "--num-iterations", "3", "--levels", "15,30,61"];
    let args = [&args[..], &["--level-steps", "20,5,5", "--level-minibatch-size", "40,10,10", "--env-threads", "1"]];
    check("ppo_multilevel", env!("CARGO_BIN_EXE_ppo_multilevel"), &args.concat());
}
