//! `ppo_seeds` end to end: one seed is `ppo`, seed k starts where `ppo --seed k` starts, every seed keeps
//! ratio == 1 and its own trajectory, the logs, the saved models, `--resume`, bad input, and learning.

mod common;
use common::{assert_bad_input, run, Run, Table, TIMING_COLUMNS};
use std::collections::BTreeMap;
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_ppo_seeds");
const PPO: &str = env!("CARGO_BIN_EXE_ppo");
/// One seed on `ppo`'s threads (ppo_seeds gives libtorch every core by default)
const ONE_SEED: &[&str] = &["--num-seeds", "1", "--torch-threads", "1"];

/// The rows of seed `seed` (updates.csv's or episodes.csv's), without the seed column.
fn of_seed(table: &Table, seed: f64) -> Table {
    let i = table.col_index("seed");
    let rows = table.rows.iter().filter(|r| r[i].parse::<f64>().ok() == Some(seed)).cloned().collect();
    Table { header: table.header.clone(), rows }.without(&["seed"])
}

/// Seed `seed`'s metrics in a run of seeds, or a `ppo` run's: updates (timing aside) and episodes.
fn metrics(r: &Run, seed: Option<f64>) -> (Table, Table) {
    let (updates, episodes) = (r.csv("updates.csv").without(TIMING_COLUMNS), r.csv("episodes.csv"));
    match seed {
        Some(seed) => (of_seed(&updates, seed), of_seed(&episodes, seed)),
        None => (updates, episodes),
    }
}

/// `ppo_seeds --num-seeds 1` against `ppo`, batched products against plain ones: each value within this of its
/// column's scale (measured over 8 updates: 0 on an Intel Xeon, 3.1e-5 at most on AMD EPYCs, docs/tests.md).
const ONE_SEED_TOLERANCE: f64 = 1e-3;

/// `--num-seeds 1` is `ppo`, with 8 envs and with 4: the same episodes and counts, every other value within rounding,
/// on one libtorch thread each; with `--target-kl` one update only (past it a KL near the threshold would part the
/// runs).
#[test]
fn one_seed_is_ppo() {
    for (steps, envs, extra) in [("8192", "8", &[][..]), ("1024", "8", &["--target-kl", "0.005"]), ("512", "4", &[])] {
        let args = [&["--total-timesteps", steps, "--num-envs", envs, "--seed", "3"][..], extra].concat();
        let (seeds, ppo) = (run(BIN, &[&args[..], ONE_SEED].concat()), run(PPO, &args));
        let ((a, a_episodes), (b, b_episodes)) =
            (metrics(seeds.assert_ok(), Some(3.0)), metrics(ppo.assert_ok(), None));
        assert_eq!(a_episodes, b_episodes, "{extra:?}: the episodes");
        let drift =
            common::assert_close(&a.without(&["debug/nonfinite_at_update"]), &b, ONE_SEED_TOLERANCE, "one seed");
        eprintln!("{envs} envs {extra:?}: largest difference {drift:.1e} of a column's scale");
    }
}

/// Seed k's networks (every initial weight, on one libtorch thread each) and envs (the first observations) start
/// as `ppo --seed k`'s, read from both binaries' parity traces.
#[test]
fn each_seed_starts_where_ppo_with_its_seed_starts() {
    let seeds = traced(BIN, &["--num-seeds", "3", "--seed", "5", "--total-timesteps", "512", "--torch-threads", "1"]);
    for k in 0..3 {
        let seed = (5 + k).to_string();
        let ppo = traced(PPO, &["--seed", &seed, "--total-timesteps", "512"]);
        let inits: Vec<&String> = ppo.keys().filter(|n| n.starts_with("init.")).collect();
        assert_eq!(inits.len(), 12, "{inits:?}");
        for name in inits {
            // two binaries: the same init within rounding
            let (ours, theirs) = (seeds[name].get(k), &ppo[name]);
            let off = (&ours - theirs).abs().max().double_value(&[]) / theirs.abs().max().double_value(&[]).max(1e-3);
            assert!(off <= 1e-6, "seed {seed}: {name} is not ppo --seed {seed}'s ({off:.1e} of its scale)");
        }
        let first = |obs: &tch::Tensor| obs.narrow(0, 0, 4); // the first step's, env by env
        assert!(first(&seeds["rollout.obs"].get(k)).equal(&first(&ppo["rollout.obs"])), "seed {seed}'s envs");
    }
}

/// Seeds 3: each seed's update is its own. One traced update of two seeds (PPO_TRACE) replayed seed by seed by
/// `one_seed_update`, ppo's arithmetic on that seed's rows alone: each seed lands on the replay's weights within 1e-4
/// of a change's norm (2.6e-6 measured; mixed seeds, 0.11 or more) and logs its values within parity's bound.
#[test]
fn each_seeds_update_is_its_own() {
    let args = ["--num-seeds", "2", "--seed", "1", "--total-timesteps", "512", "--torch-threads", "1"];
    let trace = traced(BIN, &args);
    let (mut worst, mut worst_logged) = (0f64, 0f64);
    for k in 0..2 {
        let (after, logged) = one_seed_update(&trace, k, 2);
        for (name, ours) in trace.iter().filter_map(|(n, t)| Some((n.strip_prefix("after.")?, t.get(k)))) {
            let init = trace[&format!("init.{name}")].get(k);
            let (change, theirs) = (&ours - &init, &after[name] - &init);
            let off = (&change - &theirs).norm().double_value(&[]) / theirs.norm().double_value(&[]);
            worst = worst.max(off);
            assert!(off <= 1e-4, "seed {k}: {name}'s change is {off:e} of its norm off the replay's");
        }
        for (column, theirs) in logged.iter().filter(|_| k == 0) {
            let ours = trace[&format!("scalar.{column}")].double_value(&[0]);
            worst_logged = worst_logged.max((ours - theirs).abs() / (1e-3 * theirs.abs() + 5e-6));
            assert!((ours - theirs).abs() <= 1e-3 * theirs.abs() + 5e-6, "{column}: {ours} vs the replay's {theirs}");
        }
    }
    println!("the worst: a parameter's change {worst:e} of its norm off, a logged value {worst_logged:e} of its bound");
}

/// The tensors of a safetensors file, by name.
fn tensors(path: &Path) -> BTreeMap<String, tch::Tensor> {
    tch::Tensor::read_safetensors(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).into_iter().collect()
}

/// The tensors of the trace (PPO_TRACE) of a run of `bin`.
fn traced(bin: &str, args: &[&str]) -> BTreeMap<String, tch::Tensor> {
    let work = tempfile::tempdir().expect("temp dir");
    let file = work.path().join("trace.safetensors");
    common::run_with_env(bin, args, &[("PPO_TRACE", file.to_str().expect("utf-8"))]).assert_ok();
    tensors(&file)
}

/// One seed's first update as `ppo` makes it, written out plainly for [`each_seeds_update_is_its_own`]: seed `k`'s
/// initial weights, rows, envs and minibatch orders from a trace of `seeds` seeds (4 envs each, 128 steps, ppo's
/// defaults); the weights after, and the last minibatch's logged values.
fn one_seed_update(
    trace: &BTreeMap<String, tch::Tensor>,
    k: i64,
    seeds: i64,
) -> (BTreeMap<String, tch::Tensor>, Vec<(&'static str, f64)>) {
    use tch::{nn, nn::Module, Kind, Tensor};
    let (envs, steps, batch, minibatch) = (4i64, 128i64, 512i64, 128i64);
    let vs = nn::VarStore::new(tch::Device::Cpu);
    let mlp = |net: &str, out: i64| {
        let p = vs.root() / net;
        let layer = |i: i64, d_in: i64, d_out: i64| nn::linear(&p / i, d_in, d_out, Default::default());
        nn::seq()
            .add(layer(0, 4, 64))
            .add_fn(|x| x.tanh())
            .add(layer(2, 64, 64))
            .add_fn(|x| x.tanh())
            .add(layer(4, 64, out))
    };
    let (critic, actor) = (mlp("critic", 1), mlp("actor", 2));
    tch::no_grad(|| {
        for (name, mut t) in vs.variables() {
            t.copy_(&trace[&format!("init.{name}")].get(k));
        }
    });
    let mut adam = ppo_details::FlatAdam::new(&vs, 1e-5);
    let (obs, actions) = (trace["rollout.obs"].get(k), trace["rollout.actions"].get(k));
    let log_probs = |x: &Tensor| actor.forward(x).log_softmax(-1, Kind::Float);
    let (logprobs, values) = tch::no_grad(|| {
        (log_probs(&obs).gather(-1, &actions.unsqueeze(-1), false).squeeze_dim(-1), critic.forward(&obs).view([-1]))
    });
    let next_value =
        Vec::<f32>::try_from(tch::no_grad(|| critic.forward(&trace["rollout.next_obs"].get(k)).view([-1])));
    let host = |name: &str| Vec::<f32>::try_from(&trace[name]).expect("floats");
    let (rewards, dones, next_done, next_value) =
        (host("rollout.rewards"), host("rollout.dones"), host("rollout.next_done"), next_value.expect("floats"));
    let values_host = Vec::<f32>::try_from(&values).expect("floats");
    // GAE over seed k's envs: its env e is column k * envs + e of the step-major host rows
    let at = |t: i64, e: i64| (t * envs * seeds + k * envs + e) as usize;
    let mut advantages = vec![0f32; batch as usize];
    for e in 0..envs {
        let mut lastgaelam = 0f32;
        for t in (0..steps).rev() {
            let (nextnonterminal, nextvalue) = if t == steps - 1 {
                (1.0 - next_done[(k * envs + e) as usize], next_value[e as usize])
            } else {
                (1.0 - dones[at(t + 1, e)], values_host[((t + 1) * envs + e) as usize])
            };
            let row = (t * envs + e) as usize;
            let delta = rewards[at(t, e)] + 0.99 * nextvalue * nextnonterminal - values_host[row];
            lastgaelam = delta + 0.99 * 0.95 * nextnonterminal * lastgaelam;
            advantages[row] = lastgaelam;
        }
    }
    let advantages = Tensor::from_slice(&advantages);
    let returns = &advantages + &values;
    let mut logged = Vec::new();
    for epoch in 0..4 {
        let name = format!("order.{}", epoch * seeds + k); // the orders as drawn: epoch by epoch, seed by seed
        let order = trace.get(&name).unwrap_or_else(|| panic!("no {name}: one permutation per seed and epoch"));
        for start in (0..batch).step_by(minibatch as usize) {
            let mb = order.narrow(0, start, minibatch);
            let new_log_probs = log_probs(&obs.index_select(0, &mb));
            let newlogprob =
                new_log_probs.gather(-1, &actions.index_select(0, &mb).unsqueeze(-1), false).squeeze_dim(-1);
            let entropy =
                -(new_log_probs.exp() * &new_log_probs).sum_dim_intlist(-1, false, Kind::Float).mean(Kind::Float);
            let logratio = &newlogprob - logprobs.index_select(0, &mb);
            let ratio = logratio.exp();
            let adv = advantages.index_select(0, &mb);
            let adv = (&adv - adv.mean(Kind::Float)) / (adv.std(true) + 1e-8);
            let pg_loss = (-&adv * &ratio).max_other(&(-&adv * ratio.clamp(0.8, 1.2))).mean(Kind::Float);
            let (newvalue, mb_returns) =
                (critic.forward(&obs.index_select(0, &mb)).view([-1]), returns.index_select(0, &mb));
            let mb_values = values.index_select(0, &mb);
            let clipped = &mb_values + (&newvalue - &mb_values).clamp(-0.2, 0.2);
            let v_loss =
                0.5 * (&newvalue - &mb_returns).square().max_other(&(clipped - &mb_returns).square()).mean(Kind::Float);
            let loss: Tensor = &pg_loss - &entropy * 0.01 + &v_loss * 0.5;
            adam.zero_grad();
            loss.backward();
            let grad_norm = adam.clip_grad_norm(0.5);
            adam.step(2.5e-4);
            let approx_kl = ((&ratio - 1.0) - &logratio).mean(Kind::Float);
            let value = |t: &Tensor| t.double_value(&[]);
            logged = vec![
                ("losses/policy_loss", value(&pg_loss)),
                ("losses/value_loss", value(&v_loss)),
                ("losses/entropy", value(&entropy)),
                ("losses/approx_kl", value(&approx_kl)),
                ("debug/unclipped_grad_norm", value(&grad_norm)),
            ];
        }
    }
    (vs.variables().into_iter().map(|(n, t)| (n, t.detach().copy())).collect(), logged)
}

/// Four seeds: each keeps ratio == 1, has its rows, its own trajectory and its TensorBoard events in `seed_<k>/`;
/// the same seed repeats the run, another changes it.
#[test]
fn every_seed_keeps_ratio_one_and_its_own_trajectory() {
    let args = ["--num-seeds", "4", "--total-timesteps", "4096"];
    let r = run(BIN, &args);
    r.assert_ok();
    let (updates, episodes) = (r.csv("updates.csv"), r.csv("episodes.csv"));
    assert_eq!(updates.rows.len(), 4 * 8);
    let mut seen = Vec::new();
    for seed in [1.0, 2.0, 3.0, 4.0] {
        let (u, e) = (of_seed(&updates, seed), of_seed(&episodes, seed));
        assert_eq!(u.col("iteration"), (1..=8).map(f64::from).collect::<Vec<_>>(), "seed {seed}");
        assert!(u.col("global_step").iter().zip(1..).all(|(s, i)| *s == 512.0 * i as f64), "seed {seed}");
        assert!(e.rows.len() > 50, "seed {seed}: {} episodes", e.rows.len());
        common::assert_ratio_one(&u, 8);
        let trajectory = (u.without(TIMING_COLUMNS).without(&["charts/SPS"]), e);
        assert!(!seen.contains(&trajectory), "seed {seed}'s metrics are another seed's");
        seen.push(trajectory);
        assert_seed_events(&r.dir(), seed);
    }
    let same = run(BIN, &args);
    assert_eq!(metrics(same.assert_ok(), Some(2.0)), metrics(&r, Some(2.0)), "same seed, other metrics");
    let other = run(BIN, &[&args[..], &["--seed", "2"]].concat());
    assert_ne!(metrics(other.assert_ok(), Some(2.0)).0, metrics(&r, Some(2.0)).0, "seed 2 is not seed 1's second");
}

/// Seed `seed`'s TensorBoard events (in `dir/seed_<seed>/`) hold its rows of updates.csv and episodes.csv.
fn assert_seed_events(dir: &Path, seed: f64) {
    let events = dir.join(format!("seed_{seed}"));
    let work = tempfile::tempdir().expect("temp dir");
    // a run directory of that seed alone, whose events the shared check compares with its CSVs
    for name in ["updates.csv", "episodes.csv"] {
        let table = of_seed(&Table::read(&dir.join(name)), seed);
        let mut w = csv::Writer::from_path(work.path().join(name)).expect("csv");
        w.write_record(&table.header).expect("header");
        table.rows.iter().for_each(|row| w.write_record(row).expect("row"));
        w.flush().expect("flush");
    }
    for file in std::fs::read_dir(&events).expect("seed_<k>/") {
        let file = file.expect("entry").path();
        std::fs::copy(&file, work.path().join(file.file_name().expect("a name"))).expect("copy");
    }
    common::assert_tensorboard_matches_dir(work.path());
}

/// `--resume` continues every seed: two updates resumed to four give each seed rows 1 to 4 with ratio == 1 and its
/// events rebuilt; two resumes from one checkpoint agree; the seeds cannot change under a run.
#[test]
fn a_resume_continues_every_seed() {
    let work = tempfile::tempdir().expect("temp dir");
    let run_in = |args: &[&str]| common::assert_success(&common::run_in(work.path(), BIN, args));
    run_in(&["--num-seeds", "3", "--num-steps", "32", "--total-timesteps", "256"]);
    let dir = common::run_dir(work.path());
    let copy = work.path().join("copy");
    common::copy_dir(&dir, &copy);
    for d in [&dir, &copy] {
        run_in(&["--resume", d.to_str().expect("utf-8"), "--total-timesteps", "512"]);
    }
    let updates = Table::read(&dir.join("updates.csv"));
    for seed in [1.0, 2.0, 3.0] {
        let u = of_seed(&updates, seed);
        assert_eq!(u.col("iteration"), [1.0, 2.0, 3.0, 4.0], "seed {seed}");
        common::assert_ratio_one(&u, 4);
        assert_seed_events(&dir, seed);
    }
    let resumed =
        |d: &Path| (Table::read(&d.join("updates.csv")).without(TIMING_COLUMNS), Table::read(&d.join("episodes.csv")));
    assert_eq!(resumed(&dir), resumed(&copy), "two resumes from one checkpoint differ");
    let other = common::run_in(work.path(), BIN, &["--resume", dir.to_str().expect("utf-8"), "--num-seeds", "2"]);
    common::assert_one_line(&other, 2, "--num-seeds", "--resume with --num-seeds 2");
}

/// `--save-model`: the stacked model, and each seed's alone with `ppo`'s names and shapes, equal to its row of the
/// stacked one; eval.csv plays 10 episodes per seed.
#[test]
fn each_seeds_model_is_a_ppo_model() {
    let r = run(BIN, &["--num-seeds", "2", "--seed", "4", "--total-timesteps", "1024", "--save-model"]);
    let ppo = run(PPO, &["--total-timesteps", "512", "--save-model"]);
    let stacked = tensors(&r.assert_ok().dir().join("ppo_seeds.safetensors"));
    let theirs = tensors(&ppo.assert_ok().dir().join("ppo.safetensors"));
    for (k, seed) in [4, 5].into_iter().enumerate() {
        let alone = tensors(&r.dir().join(format!("ppo_seeds_seed{seed}.safetensors")));
        assert_eq!(alone.keys().collect::<Vec<_>>(), theirs.keys().collect::<Vec<_>>());
        for (name, t) in &alone {
            assert_eq!(t.size(), theirs[name].size(), "{name}");
            assert!(t.equal(&stacked[name].get(k as i64)), "seed {seed}: {name}");
        }
    }
    let eval = r.csv("eval.csv");
    assert_eq!(eval.col("seed"), [vec![4.0; 10], vec![5.0; 10]].concat());
}

/// Seeds 3 with `--target-kl`: a seed that stops logs where it stopped. At a target between the seeds' first-epoch
/// KLs (3.1e-5 and 4.0e-5), seed 2's row is a one-epoch update's; seed 1, which goes on, logs a later epoch's.
#[test]
fn a_stopped_seed_logs_where_it_stopped() {
    let args = ["--num-seeds", "2", "--total-timesteps", "512", "--target-kl", "0.000035"];
    let four = run(BIN, &[&args[..], &["--update-epochs", "4"]].concat());
    let one = run(BIN, &[&args[..], &["--update-epochs", "1"]].concat());
    let updates = |r: &Run, seed: f64| of_seed(&r.assert_ok().csv("updates.csv").without(TIMING_COLUMNS), seed);
    assert_eq!(updates(&four, 2.0), updates(&one, 2.0), "seed 2 stopped after epoch 1: its first epoch's values");
    assert_ne!(updates(&four, 1.0), updates(&one, 1.0), "seed 1 went on past its first epoch");
}

/// Seeds 5: a seed whose loss goes non-finite stops alone. `ENVS_NAN_REWARD=5:200` gives seed 2 a NaN reward in
/// update 2: it stops there with a line, `debug/nonfinite_at_update` 2 from then on, its weights and Adam steps
/// those after update 1; seed 1's metrics are the clean run's, to the bit; exit code 1; a `--resume` keeps it stopped.
#[test]
fn a_non_finite_seed_stops_alone() {
    let bin = &common::hooked(BIN); // ENVS_NAN_REWARD: the clean run too, one computation
    let args = |steps: &'static str| ["--num-seeds", "2", "--seed", "1", "--save-model", "--total-timesteps", steps];
    let nan = [("ENVS_NAN_REWARD", "5:200")];
    let (clean, poisoned) = (run(bin, &args("2048")), common::run_with_env(bin, &args("2048"), &nan));
    let stderr = poisoned.stderr();
    assert_eq!(poisoned.output.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.lines().any(|l| l.starts_with("seed 2 stopped at update 2: its loss or gradient")), "{stderr}");
    let last = stderr.trim_end().lines().last().unwrap_or_default();
    assert!(last.starts_with("error: seeds stopped non-finite: 2 (at update 2); the other seeds ran"), "{stderr}");
    assert_eq!(metrics(&poisoned, Some(1.0)), metrics(clean.assert_ok(), Some(1.0)), "seed 1 changed");
    let updates = poisoned.csv("updates.csv");
    assert_eq!(of_seed(&updates, 2.0).col("debug/nonfinite_at_update"), [0.0, 2.0, 2.0, 2.0]);
    assert_eq!(of_seed(&updates, 1.0).col("debug/nonfinite_at_update"), [0.0; 4]);
    // seed 2's weights and Adam steps: those after update 1 (which the NaN, in update 2, left as they were)
    let one = run(bin, &args("512"));
    let read = |dir: &Path| tensors(&dir.join("ppo_seeds_seed2.safetensors"));
    let after_one = read(&one.assert_ok().dir());
    let frozen_as_after_one = |dir: &Path| {
        let frozen = read(dir);
        assert_eq!(frozen.keys().collect::<Vec<_>>(), after_one.keys().collect::<Vec<_>>());
        frozen.iter().all(|(name, t)| t.equal(&after_one[name]))
    };
    assert!(frozen_as_after_one(&poisoned.dir()), "seed 2's weights moved after it stopped");
    let steps = |r: &Run| {
        let saved = tch::Tensor::read_safetensors(r.dir().join("checkpoint.safetensors")).expect("checkpoint");
        let steps = saved.into_iter().find(|(name, _)| name == "adam.seed_steps").expect("adam.seed_steps").1;
        Vec::<i32>::try_from(steps).expect("ints")
    };
    assert_eq!(steps(&poisoned), [64, 16], "4 updates of 16 minibatches for seed 1, one update for seed 2");
    // a run of 3 updates resumed to 4: seed 2 stays stopped (no NaN reward now), the run fails again
    let three = common::run_with_env(bin, &args("1536"), &nan);
    assert_eq!(three.output.status.code(), Some(1), "{}", three.stderr());
    let dir = three.dir();
    let resumed = common::run_in(
        three.workdir.path(),
        bin,
        &["--total-timesteps", "2048", "--resume", dir.to_str().expect("utf-8")],
    );
    assert_eq!(resumed.status.code(), Some(1), "{}", String::from_utf8_lossy(&resumed.stderr));
    let updates = Table::read(&dir.join("updates.csv"));
    assert_eq!(of_seed(&updates, 2.0).col("debug/nonfinite_at_update"), [0.0, 2.0, 2.0, 2.0]);
    assert!(frozen_as_after_one(&dir), "seed 2's weights moved after a resume");
}

/// Seeds 5: once every seed has stopped non-finite (a rate of 1e30) the run ends at that update, exit code 1, its
/// last line saying so.
#[test]
fn the_run_ends_when_no_seed_is_left() {
    let r = run(BIN, &["--num-seeds", "2", "--learning-rate", "1e30", "--total-timesteps", "20480"]);
    let stderr = r.stderr();
    assert_eq!(r.output.status.code(), Some(1), "{stderr}");
    assert!(stderr.trim_end().lines().last().unwrap_or_default().contains("no seed was left"), "{stderr}");
    let updates = r.csv("updates.csv");
    let (iterations, stopped) = (updates.col("iteration"), updates.col("debug/nonfinite_at_update"));
    let last = iterations.iter().copied().fold(0.0, f64::max);
    assert!(last < 40.0, "the run went on to update {last} of 40");
    assert_eq!(stopped.iter().copied().fold(0.0, f64::max), last, "it ends at the update the last seed stopped at");
}

/// Bad input: one line, exit code 2, no run directory. Every shared flag at its edge (`common::SHARED_FLAG_EDGES`), bad
/// seed counts, more seeds than memory holds, a seed with no room for its envs, an indivisible batch, fewer steps than
/// one batch, an id another binary runs, and a malformed `ENVS_NAN_REWARD`.
#[test]
fn bad_input_is_one_line_exit_2() {
    assert_bad_input(
        BIN,
        &[
            (&["--num-seeds", "0"], &[], "'0' for '--num-seeds"),
            (&["--num-seeds", "-3"], &[], "'-3' for '--num-seeds"),
            (&["--num-minibatches", "3"], &[], "divisible by --num-minibatches (3)"),
            (&["--total-timesteps", "100"], &[], "below one batch"),
            (&["--env-id", "Pendulum-v1"], &[], "Pendulum-v1"),
            (&["--num-seeds", "10000000"], &[], "the seeds need up to about"), // 1.8 TB, refused before any is made
            // seed k's env e is --seed + k + e: the library keeps 2^32 seeds of room
            (&["--num-seeds", "3", "--seed", "18446744069414584320"], &[], "must be at most 18446744069414584319"),
        ],
    );
    // the testing aid, malformed: read by the binaries with the test hooks only
    assert_bad_input(&common::hooked(BIN), &[(&[], &[("ENVS_NAN_REWARD", "5")], "ENVS_NAN_REWARD")]);
    assert_bad_input(BIN, common::SHARED_FLAG_EDGES);
}

/// Two seeds near 2^64 (one f64 to each other) have rows of their own in both CSVs, with their digits; `plot` reads
/// them.
#[test]
fn seeds_near_2_to_the_64_are_written_exactly() {
    let (first, second) = ("18446744069414584318", "18446744069414584319"); // the largest two --seed takes
    let args = ["--num-seeds", "2", "--num-envs", "2", "--seed", first, "--total-timesteps", "512"];
    let r = run(BIN, &args);
    r.assert_ok();
    for file in ["updates.csv", "episodes.csv"] {
        let table = r.csv(file);
        let seeds: Vec<&str> = table.rows.iter().map(|row| row[table.col_index("seed")].as_str()).collect();
        assert!(seeds.iter().all(|s| [first, second].contains(s)), "{file}: {seeds:?}");
        assert!(seeds.contains(&first) && seeds.contains(&second), "{file}: {seeds:?}");
    }
    let png = r.workdir.path().join("seeds.png");
    let plot = std::process::Command::new(env!("CARGO_BIN_EXE_plot")).arg(r.dir()).arg("--out").arg(&png).output();
    let plot = plot.expect("plot starts");
    assert!(plot.status.success() && png.exists(), "{}", String::from_utf8_lossy(&plot.stderr));
}

/// Four seeds for 61,440 steps learn as `ppo --seed 1..4` do: each side's last-20 mean, averaged over the seeds, is
/// above 100 (a random policy's: 22), and ours lies between the least and the most of `ppo`'s four runs.
#[test]
fn the_seeds_learn_as_separate_ppo_runs_do() {
    let steps = ["--total-timesteps", "61440"];
    let last20 = |returns: Vec<f64>| returns.iter().rev().take(20).sum::<f64>() / 20.0;
    let r = run(BIN, &[&steps[..], &["--num-seeds", "4"]].concat());
    let episodes = r.assert_ok().csv("episodes.csv");
    let ours: Vec<f64> = (1..=4).map(|s| last20(of_seed(&episodes, s as f64).col("charts/episodic_return"))).collect();
    let theirs: Vec<f64> = (1..=4)
        .map(|s| {
            let r = run(PPO, &[&steps[..], &["--seed", &s.to_string()]].concat());
            last20(r.assert_ok().csv("episodes.csv").col("charts/episodic_return"))
        })
        .collect();
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let (lo, hi) = theirs.iter().fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
    assert!(mean(&ours) > 100.0 && mean(&theirs) > 100.0, "ours {ours:?}, ppo's {theirs:?}");
    assert!((lo..=hi).contains(&mean(&ours)), "ours {ours:?} (mean {}), ppo's {theirs:?}", mean(&ours));
}
