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

/// The variables that pin libtorch's kernels (see the header).
const PINNED: &[(&str, &str)] = &[
    ("MKL_ENABLE_INSTRUCTIONS", "AVX2"),
    ("MKL_CBWR", "AVX2"),
    ("ONEDNN_MAX_CPU_ISA", "AVX2"),
    ("ATEN_CPU_CAPABILITY", "avx2"),
];

/// Runs `bin` with `args`, one libtorch thread and the pinned kernels, and compares its
/// updates.csv (timing aside) and episodes.csv with `tests/snapshots/<case>/`.
fn check(case: &str, bin: &str, args: &[&str]) {
    let args = [args, &["--torch-threads", "1", "--seed", "7"]].concat();
    compare(case, run_with_env(bin, &args, PINNED));
}

/// [`check`] for `np` processes under mpirun (`--quiet`).
fn check_mpi(case: &str, bin: &str, np: usize, args: &[&str]) {
    let args = [args, &["--torch-threads", "1", "--seed", "7"]].concat();
    let workdir = tempfile::tempdir().expect("temp dir");
    let output = common::mpirun_np(workdir.path(), np, bin, &["--quiet"], &args).envs(PINNED.iter().copied()).output();
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
    for (name, table) in &got {
        let want = Table::read(&dir.join(name));
        assert_eq!(table.header, want.header, "{case}/{name}: the columns changed");
        assert_eq!(table.rows.len(), want.rows.len(), "{case}/{name}: the number of rows changed");
        for (i, (a, b)) in table.rows.iter().zip(&want.rows).enumerate() {
            for ((column, a), b) in table.header.iter().zip(a).zip(b) {
                assert_eq!(
                    a,
                    b,
                    "{case}/{name} row {}, {column}: the trajectory moved (see this file's header)",
                    i + 1
                );
            }
        }
    }
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

#[test]
fn ppo_continuous_halfcheetah() {
    let args = ["--num-envs", "1", "--num-steps", "256", "--total-timesteps", "1024", "--env-threads", "1"];
    check("ppo_continuous", env!("CARGO_BIN_EXE_ppo_continuous"), &args);
}

#[test]
fn ppo_continuous_pendulum_adaptive_lr_bootstrap_truncation() {
    let args = ["--env-id", "Pendulum-v1", "--total-timesteps", "2048", "--num-steps", "256"];
    let args = [&args[..], &["--adaptive-lr", "--bootstrap-truncation", "--anneal-clip"]].concat();
    check("ppo_continuous_pendulum", env!("CARGO_BIN_EXE_ppo_continuous"), &args);
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

#[test]
fn ppo_multilevel_ressim() {
    let args = ["--env-id", "ResSim-case1", "--num-envs", "10", "--num-iterations", "3", "--levels", "15,30,61"];
    let args = [&args[..], &["--level-steps", "20,5,5", "--level-minibatch-size", "40,10,10", "--env-threads", "1"]];
    check("ppo_multilevel", env!("CARGO_BIN_EXE_ppo_multilevel"), &args.concat());
}
