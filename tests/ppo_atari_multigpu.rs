//! `ppo_atari_multigpu` end to end: the real binary, alone (it is then `ppo_atari`) and as two MPI
//! ranks under `mpirun`, on the shared-memory transport and on TCP (the one separate machines use).

mod common;
use common::{assert_bad_input, assert_ratio_one_and_small_kl, run, run_with_env, Run, Table, TIMING_COLUMNS};
use std::process::Stdio;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ppo_atari_multigpu");

/// Small and quick: 32 steps per env, 512 steps in all.
const SMALL: &[&str] = &["--num-steps", "32", "--total-timesteps", "512", "--torch-threads", "1", "--env-threads", "1"];

/// The columns only this binary writes (the largest KL over the ranks, the all-reduce's time).
const OWN_COLUMNS: &[&str] = &["debug/max_approx_kl_of_ranks", "timing/allreduce_seconds"];

/// A finished two-rank run in a fresh directory.
fn run_mpi(mca: &[&str], args: &[&str]) -> Run {
    common::run_mpi(2, BIN, mca, args, &[])
}

fn metrics(r: &Run) -> (Table, Table) {
    let skip: Vec<&str> = TIMING_COLUMNS.iter().chain(OWN_COLUMNS).copied().collect();
    (r.csv("updates.csv").without(&skip), r.csv("episodes.csv"))
}

/// Without mpirun it is one process, and `ppo_atari`'s run (`--local-num-envs` for `--num-envs`): the same counts
/// and episodes, every other value within rounding (`common::assert_close`). So is one rank forced through the
/// all-reduce (PPO_FORCE_ALLREDUCE=1: MPI here, NCCL on a GPU).
#[test]
fn one_process_is_ppo_atari() {
    let alone = run(BIN, &[&["--local-num-envs", "2"], SMALL].concat());
    let atari = run(env!("CARGO_BIN_EXE_ppo_atari"), &[&["--num-envs", "2"], SMALL].concat());
    let (ours, theirs) = (metrics(alone.assert_ok()), metrics(atari.assert_ok()));
    assert_eq!(ours.0.rows.len(), 8);
    common::assert_close(&ours.0.without(&["debug/max_approx_kl_of_ranks"]), &theirs.0, 1e-3, "one rank");
    assert_eq!(ours.1, theirs.1, "episodes.csv");
    assert!(!ours.1.rows.is_empty(), "no Breakout game finished: the check is empty");
    let stdout = |r: &Run| String::from_utf8_lossy(&r.output.stdout).to_string();
    assert!(stdout(&alone).contains("one rank, no all-reduce"), "{}", stdout(&alone));
    let forced = run_with_env(
        &common::hooked(BIN),
        &[&["--local-num-envs", "2"], SMALL].concat(),
        &[("PPO_FORCE_ALLREDUCE", "1")],
    );
    forced.assert_ok();
    assert!(stdout(&forced).contains("gradients all-reduced by MPI through host memory"), "{}", stdout(&forced));
    let seconds = forced.csv("updates.csv").col("timing/allreduce_seconds");
    assert!(seconds.iter().all(|&s| s > 0.0), "the all-reduce ran: {seconds:?}");
    let forced = metrics(&forced);
    common::assert_close(&forced.0.without(&["debug/max_approx_kl_of_ranks"]), &theirs.0, 1e-3, "all-reduced");
}

/// Two ranks: ratio == 1 and a small KL on every rank (the logged values are the largest over the ranks), weights
/// identical after every update (the binary checks), every rank's episodes; the same metrics twice for the same
/// seed, on either transport; another seed differs, and so does one process's run.
#[test]
fn two_ranks_agree_on_either_transport_and_repeat() {
    let args = [&["--local-num-envs", "2"], SMALL, &["--total-timesteps", "1024"]].concat();
    let shm = run_mpi(&[], &args);
    let again = run_mpi(&[], &args);
    let tcp = run_mpi(&["--mca", "btl", "tcp,self"], &args);
    let other = run_mpi(&[], &[&args[..], &["--seed", "2"]].concat());
    for r in [&shm, &again, &tcp, &other] {
        r.assert_ok();
    }
    let updates = shm.csv("updates.csv");
    assert_eq!(updates.rows.len(), 8, "1024 steps of 2 ranks x 2 envs x 32 steps");
    assert_eq!(updates.col("global_step"), (1..=8).map(|i| 128.0 * i as f64).collect::<Vec<_>>());
    assert_ratio_one_and_small_kl(
        &updates,
        "debug/first_mb_max_ratio_dev",
        "debug/first_mb_clipfrac",
        "debug/max_approx_kl_of_ranks",
        50,
    );
    let ranks: std::collections::BTreeSet<u64> =
        shm.csv("episodes.csv").col("rank").iter().map(|&r| r as u64).collect();
    assert_eq!(ranks, [0, 1].into(), "episodes of both ranks in episodes.csv");
    assert_eq!(metrics(&shm), metrics(&again), "same seed, same ranks: same metrics");
    assert_eq!(metrics(&shm), metrics(&tcp), "the TCP transport sums the same gradients");
    assert_ne!(metrics(&shm).0, metrics(&other).0, "another seed, other metrics");
    // one process's run differs: the two ranks' batches are averaged
    let alone = run(BIN, &args);
    assert_ne!(metrics(&alone).0.rows[0], metrics(&shm).0.rows[0]);
}

/// A rank killed mid-run brings the job down within seconds (no rank waits forever in an all-reduce), mpirun names
/// the rank, and rank 0's metrics so far are kept.
#[test]
fn a_killed_rank_stops_the_job_and_keeps_the_metrics() {
    let workdir = tempfile::tempdir().expect("temp dir");
    let dir = workdir.path().to_path_buf();
    let args = ["--local-num-envs", "2", "--num-steps", "32", "--total-timesteps", "1000000", "--torch-threads", "1"];
    let child =
        common::mpirun(&dir, BIN, &[], &args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("mpirun");
    // wait for rank 0's second update, then kill rank 1
    let run_dir = || std::fs::read_dir(dir.join("runs")).ok()?.next()?.ok().map(|e| e.path());
    common::wait_for(120, "second update", || run_dir().is_some_and(|d| common::rows(&d) >= 2));
    let output = common::kill_rank_and_wait(child, BIN, &dir, 1);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("process rank 1") && stderr.contains("signal 9"), "{stderr}");
    let kept = common::rows(&run_dir().expect("the run directory"));
    assert!(kept >= 2, "rank 0's metrics so far are kept: {kept} rows");
}

/// Bad input: one line, exit code 2, no run directory. Every shared flag at its edge (`common::SHARED_FLAG_EDGES`) but
/// `--num-envs`, which it refuses for `--local-num-envs`; bad values of its own flags, an id another binary runs, an
/// indivisible batch, fewer steps than one batch. Under `mpirun` with two ranks, three of them are one line too.
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let edges: Vec<_> = common::SHARED_FLAG_EDGES.iter().filter(|(args, _, _)| !args.contains(&"--num-envs")).collect();
    assert_bad_input(BIN, &edges.into_iter().copied().collect::<Vec<_>>());
    assert_bad_input(
        BIN,
        &[
            (&["--local-num-envs", "0"], &[], "'0' for '--local-num-envs"),
            (&["--num-envs", "8"], &[], "--num-envs"),
            (&["--device-ids", "x"], &[], "'x' for '--device-ids"),
            (&["--env-id", "CartPole-v1"], &[], "ppo or ppo_noisy or ppo_seeds or ppo_lstm or ppo_lstm_workers;"),
            (&["--local-num-envs", "3", "--num-minibatches", "4", "--num-steps", "7"], &[], "divisible"),
            (&["--total-timesteps", "100"], &[], "is below one batch"),
        ],
    );
    // under mpirun: the same one line, from rank 0 only; exit code 2; nothing written
    for (args, needle) in [
        (&["--gamma", "2"][..], "'2' for '--gamma"),
        (&["--local-num-envs", "3", "--num-steps", "7"], "divisible"),
        (&["--local-num-envs", "2", "--num-steps", "32", "--total-timesteps", "100"], "x ranks = 128"),
    ] {
        common::assert_refused(&run_mpi(&[], args), needle, &format!("two ranks, {args:?}"));
    }
}

/// When rank 0 cannot make NCCL's id (forced on the CPU: PPO_NCCL_FAIL_ID=1), its status goes out with the id:
/// every rank ends with rank 0's line, at once, and nothing is written.
#[test]
fn rank_0s_nccl_failure_ends_every_rank_with_its_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = [&["--local-num-envs", "2"][..], SMALL].concat();
    let mut child = common::mpirun(dir.path(), &common::hooked(BIN), &["--quiet"], &args)
        .env("PPO_NCCL_FAIL_ID", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun");
    let since = Instant::now();
    while child.try_wait().expect("mpirun").is_none() {
        if since.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the job still runs after 2 minutes: a rank waits for an id that never comes");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("mpirun ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let line = "error: rank 0: ncclGetUniqueId failed (forced by the test suite)";
    assert_eq!(stderr.lines().filter(|l| *l == line).count(), 2, "each rank's line: {stderr}");
    assert!(!stderr.contains("panicked") && !dir.path().join("runs").exists(), "{stderr}");
}
