//! `ppo_lstm_workers` end to end: alone (it is then `ppo_lstm`) and as one learner with N rollout workers under
//! `mpirun`, over shared memory and TCP, on CartPoleNoVel-v1 and once on Breakout.

mod common;
use common::{assert_bad_input, run, run_with_env, Run, Table, TIMING_COLUMNS};
use std::process::Stdio;

const BIN: &str = env!("CARGO_BIN_EXE_ppo_lstm_workers");
const LSTM: &str = env!("CARGO_BIN_EXE_ppo_lstm");

/// Small and quick: CartPoleNoVel-v1, 4 envs (per worker) x 32 steps, one libtorch thread.
const NO_VEL: &[&str] =
    &["--env-id", "CartPoleNoVel-v1", "--num-envs", "4", "--num-steps", "32", "--torch-threads", "1"];

/// The columns only this binary writes: the waits (timing), and episodes.csv's worker.
const OWN_COLUMNS: &[&str] = &["timing/learner_wait_seconds", "timing/workers_wait_seconds"];

/// A finished run of `np` processes in a fresh directory, with `vars`.
fn run_mpi(np: usize, mca: &[&str], args: &[&str], vars: &[(&str, &str)]) -> Run {
    common::run_mpi(np, BIN, mca, args, vars)
}

/// updates.csv without the timing columns, episodes.csv without the worker column.
fn metrics(r: &Run) -> (Table, Table) {
    let skip: Vec<&str> = TIMING_COLUMNS.iter().chain(OWN_COLUMNS).copied().collect();
    (r.csv("updates.csv").without(&skip), r.csv("episodes.csv").without(&["worker"]))
}

fn workers_of_episodes(r: &Run) -> std::collections::BTreeSet<u64> {
    r.csv("episodes.csv").col("worker").iter().map(|&w| w as u64).collect()
}

/// Alone it is `ppo_lstm`; one worker (`-np 2`) is too: worker 1 draws on from the learner's random stream, its
/// envs are ppo_lstm's. The same counts and episodes, every other value within rounding (`common::assert_close`),
/// all on one libtorch thread, as a worker runs.
#[test]
fn alone_and_with_one_worker_it_is_ppo_lstm() {
    let args = [NO_VEL, &["--total-timesteps", "1024"]].concat();
    let lstm = run(LSTM, &args);
    let alone = run(BIN, &args);
    let one_worker = run_mpi(2, &[], &args, &[]);
    for r in [&lstm, &alone, &one_worker] {
        r.assert_ok();
    }
    let want = metrics(&lstm);
    assert_eq!(want.0.rows.len(), 8);
    assert!(!want.1.rows.is_empty(), "no CartPole episode finished: the check is empty");
    for (r, what) in [(&alone, "one process"), (&one_worker, "one worker")] {
        let (updates, episodes) = metrics(r);
        assert_eq!(episodes, want.1, "{what}: the episodes");
        eprintln!("{what}: largest difference {:.1e} of a scale", common::assert_close(&updates, &want.0, 1e-3, what));
    }
    assert_eq!(workers_of_episodes(&alone), [0].into(), "alone, the process is worker 0");
    assert_eq!(workers_of_episodes(&one_worker), [1].into());
    let stdout = String::from_utf8_lossy(&one_worker.output.stdout).to_string();
    assert!(stdout.contains("rank 0 (learner): device: cpu (--cuda false)"), "{stdout}");
    assert!(stdout.contains("rank 1 (worker): device: cpu, one libtorch thread"), "{stdout}");
    for column in ["charts/experience_sps", "charts/learning_sps"] {
        assert!(one_worker.csv("updates.csv").col(column).iter().all(|&x| x > 0.0), "{column}");
    }
}

/// The first observation of every env of a run (PPO_TRACE's first rollout, step 0: row e is env e).
fn first_observations(r: &Run, envs: i64) -> Vec<Vec<f32>> {
    let trace = tch::Tensor::read_safetensors(r.workdir.path().join("trace.safetensors")).expect("the trace");
    let obs = &trace.iter().find(|(name, _)| name == "rollout.obs").expect("rollout.obs").1;
    (0..envs).map(|e| Vec::<f32>::try_from(obs.get(e)).expect("f32 row")).collect()
}

/// Each env of the job is seeded as `ppo_lstm`'s env of the same global index, whatever the envs per worker (2 x 4,
/// 4 x 2, 1 x 8: ppo_lstm's 8 first observations, all different). Two workers: ratio == 1, a small KL, both
/// workers' episodes, the same metrics again and over TCP; the actions differ from ppo_lstm's (two random streams).
#[test]
fn two_workers_seed_their_envs_as_ppo_lstm_and_keep_ratio_one() {
    let trace = [("PPO_TRACE", "trace.safetensors")];
    let lstm = run_with_env(LSTM, &[NO_VEL, &["--num-envs", "8", "--total-timesteps", "2048"]].concat(), &trace);
    lstm.assert_ok();
    let want = first_observations(&lstm, 8);
    for (i, a) in want.iter().enumerate() {
        assert!(want[i + 1..].iter().all(|b| a != b), "ppo_lstm's env {i} starts as another");
    }
    let args = [NO_VEL, &["--total-timesteps", "4096"]].concat();
    for (np, envs) in [(3, "4"), (5, "2"), (2, "8")] {
        let r = run_mpi(np, &[], &[&args[..], &["--num-envs", envs]].concat(), &trace);
        r.assert_ok();
        assert_eq!(first_observations(&r, 8), want, "{} workers x {envs} envs", np - 1);
    }

    let two = run_mpi(3, &[], &args, &[]);
    let updates = two.assert_ok().csv("updates.csv");
    assert_eq!(updates.rows.len(), 16, "4096 steps of 2 workers x 4 envs x 32 steps");
    assert_eq!(updates.col("global_step"), (1..=16).map(|i| 256.0 * i as f64).collect::<Vec<_>>());
    common::assert_ratio_one(&updates, 50);
    assert_eq!(workers_of_episodes(&two), [1, 2].into(), "episodes of both workers in episodes.csv");
    let lstm8 = run(LSTM, &[NO_VEL, &["--num-envs", "8", "--total-timesteps", "4096"]].concat());
    assert_ne!(metrics(&two).0.rows[0], metrics(&lstm8).0.rows[0], "two random streams, other actions");
    assert_eq!(metrics(&two), metrics(&run_mpi(3, &[], &args, &[])), "same seed, same workers: same metrics");
    let tcp = run_mpi(3, &["--mca", "btl", "tcp,self"], &args, &[]);
    tcp.assert_ok();
    assert_eq!(metrics(&two), metrics(&tcp), "the TCP transport carries the same rollouts");
}

/// The CNN path: two workers on Breakout, ratio 1 at the first minibatch (one update: the CNN is slow on the CPU).
#[test]
fn two_workers_on_breakout_keep_ratio_one() {
    let args = ["--num-envs", "2", "--num-steps", "32", "--total-timesteps", "128", "--torch-threads", "1"];
    let updates = run_mpi(3, &[], &args, &[]).assert_ok().csv("updates.csv");
    assert_eq!(updates.rows.len(), 1);
    common::assert_ratio_one(&updates, 50);
}

/// A worker killed mid-run ends the job within seconds (no learner waiting forever in the gather), mpirun names it,
/// the metrics so far are kept; `--resume` with as many workers continues to the end; with another number, one
/// line naming the `-np` to use, exit code 2.
#[test]
fn a_killed_worker_stops_the_job_and_resume_continues() {
    let workdir = tempfile::tempdir().expect("temp dir");
    let dir = workdir.path().to_path_buf();
    let args = [NO_VEL, &["--total-timesteps", "10240", "--checkpoint-interval", "1"]].concat();
    let child = common::mpirun_np(&dir, 3, BIN, &[], &args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun");
    let run_dir = || std::fs::read_dir(dir.join("runs")).ok()?.next()?.ok().map(|e| e.path());
    common::wait_for(120, "second update", || run_dir().is_some_and(|d| common::rows(&d) >= 2));
    let output = common::kill_rank_and_wait(child, BIN, &dir, 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("process rank 2") && stderr.contains("signal 9"), "{stderr}");
    let run_dir = run_dir().expect("the run directory");
    let kept = common::rows(&run_dir);
    assert!((2..40).contains(&kept), "the metrics so far are kept: {kept} rows");

    let resume = ["--resume", run_dir.to_str().expect("utf-8")];
    let other = common::mpirun_np(&dir, 2, BIN, &["--quiet"], &resume).output().expect("mpirun");
    common::assert_one_line(&other, 2, "ran with 2 workers: resume it with mpirun -np 3", "-np 2");
    assert_eq!(common::rows(&run_dir), kept, "a refused resume changes nothing");

    let resumed = common::mpirun_np(&dir, 3, BIN, &["--quiet"], &resume).output().expect("mpirun");
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let updates = Table::read(&run_dir.join("updates.csv"));
    assert_eq!(updates.col("iteration"), (1..=40).map(|i| i as f64).collect::<Vec<_>>(), "one row per update");
    common::assert_ratio_one(&updates, 50);
}

/// Bad input: one line, exit code 2, no run directory. Every shared flag at its edge (`common::SHARED_FLAG_EDGES`),
/// with its own `--norm-adv` case (its minibatches are whole envs); minibatches that are not whole envs and an id
/// another binary runs. Under `mpirun`, four cases are one line too.
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    let shared: Vec<common::BadInput> =
        common::SHARED_FLAG_EDGES.iter().filter(|c| !c.2.contains("--norm-adv")).copied().collect();
    assert_bad_input(BIN, &shared);
    assert_bad_input(
        BIN,
        &[
            (&["--num-envs", "0"], &[], "'0' for '--num-envs"),
            (&["--num-envs", "6", "--num-minibatches", "4"], &[], "minibatches are whole envs"),
            (&["--num-envs", "1", "--num-steps", "1", "--num-minibatches", "1"], &[], "--norm-adv needs minibatches"),
            (&["--env-id", "HalfCheetah-v4"], &[], "run it with ppo_continuous;"),
        ],
    );
    // under mpirun: the same one line, from the learner only; exit code 2; nothing written
    for (np, args, needle) in [
        (3, &["--num-envs", "0"][..], "'0' for '--num-envs"),
        (3, &["--gamma", "2"], "'2' for '--gamma"),
        (3, &[NO_VEL, &["--total-timesteps", "200"]].concat()[..], "x workers = 256"),
        (4, &["--num-envs", "3", "--num-minibatches", "4"], "(9) not divisible by --num-minibatches (4)"),
    ] {
        common::assert_refused(&run_mpi(np, &[], args, &[]), needle, &format!("-np {np} {args:?}"));
    }
}

/// The learner's batch is split, not a worker's: five workers of 3 envs are five minibatches of 3 whole envs, though
/// one worker's 96 steps do not divide by 5. Ratio == 1, every worker's episodes logged.
#[test]
fn the_learners_batch_is_split_not_a_workers() {
    let args = ["--env-id", "CartPoleNoVel-v1", "--torch-threads", "1", "--num-envs", "3", "--num-minibatches", "5"];
    let r = run_mpi(6, &[], &[&args[..], &["--num-steps", "32", "--total-timesteps", "960"]].concat(), &[]);
    let updates = r.assert_ok().csv("updates.csv");
    assert_eq!(updates.col("global_step"), [480.0, 960.0], "two updates of 5 x 3 envs x 32 steps");
    common::assert_ratio_one(&updates, 2);
    assert_eq!(workers_of_episodes(&r), (1..=5).collect(), "every worker's episodes");
}
