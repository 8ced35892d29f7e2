//! # ppo_seeds: `ppo` for N seeds at once, batched in one process (its diff against ppo: `diffs/`)
//!
//! purejaxrl's `jax.vmap(train)` in libtorch: every tensor gains a leading seed dimension (`// Seeds N: ...`).
//! Run: `cargo run --release --bin ppo_seeds -- --num-seeds 3 --seed 1`; it writes `runs/<run-name>/` (docs/runs.md).
//! What is not PPO comes from the package's library (`src/lib.rs`), as CleanRL's from torch, tyro and cleanrl_utils.

use clap::Parser;
use envs::{Action, Env, RecordEpisodeStatistics, RecordVideo, Space, VecEnv};
use ppo_details::{fail, parse_args, pick_device, play, to_host, var, FlatAdam, RunArgs, RunLog, Start, Trace};
use ppo_details::{flags::*, Logged::*}; // value parsers (each numeric flag's range); a logged value, host or device
use tch::{nn, nn::Module, Device, Kind, Tensor};

#[derive(Parser, Debug, serde::Serialize, serde::Deserialize)]
#[command(about = "PPO on classic control (CartPole-v1) for N seeds in one process, after CleanRL's ppo.py")]
struct Args {
    // the experiment's flags (seed, cuda, threads, checkpoints), the same in every binary: RunArgs
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
    /// record env 0's games, every frame, on CleanRL's schedule, as GIFs in videos/<run-name>/
    #[arg(long, default_value_t = false)]
    capture_video: bool,
    /// the number of seeds trained at once: --seed, --seed + 1, ..., each with `ppo --seed k`'s networks and envs
    #[arg(long, default_value_t = 3, value_parser = at_least_one)]
    num_seeds: usize,
    /// the id of the environment (CartPole-v1, Acrobot-v1, MountainCar-v0; without velocities: CartPoleNoVel-v1, ...)
    #[arg(long, default_value = "CartPole-v1")]
    env_id: String,
    /// total timesteps of the experiment, for each seed
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..))]
    total_timesteps: u64,
    /// the learning rate of the optimizer
    #[arg(long, default_value_t = 2.5e-4, value_parser = positive)]
    learning_rate: f64,
    /// the number of parallel game environments of each seed
    #[arg(long, default_value_t = 4, value_parser = at_least_one)]
    num_envs: usize,
    /// the number of steps to run in each environment per policy rollout
    #[arg(long, default_value_t = 128, value_parser = at_least_one)]
    num_steps: usize,
    /// anneal the learning rate linearly to 0 over the run
    #[arg(long, default_value_t = true)]
    anneal_lr: bool,
    /// the discount factor gamma
    #[arg(long, default_value_t = 0.99, value_parser = unit_interval)]
    gamma: f64,
    /// the lambda for the general advantage estimation
    #[arg(long, default_value_t = 0.95, value_parser = unit_interval)]
    gae_lambda: f64,
    /// the number of mini-batches
    #[arg(long, default_value_t = 4, value_parser = at_least_one)]
    num_minibatches: usize,
    /// the K epochs to update the policy
    #[arg(long, default_value_t = 4, value_parser = at_least_one)]
    update_epochs: usize,
    /// normalize the advantages per minibatch
    #[arg(long, default_value_t = true)]
    norm_adv: bool,
    /// the surrogate clipping coefficient
    #[arg(long, default_value_t = 0.2, value_parser = positive)]
    clip_coef: f64,
    /// anneal the clip coefficient (policy and value clipping) linearly to 0 over the run
    #[arg(long, default_value_t = false)]
    anneal_clip: bool,
    /// use a clipped loss for the value function, as in the paper
    #[arg(long, default_value_t = true)]
    clip_vloss: bool,
    /// coefficient of the entropy bonus
    #[arg(long, default_value_t = 0.01, value_parser = finite)]
    ent_coef: f64,
    /// coefficient of the value function loss
    #[arg(long, default_value_t = 0.5, value_parser = finite)]
    vf_coef: f64,
    /// the maximum norm for the gradient clipping
    #[arg(long, default_value_t = 0.5, value_parser = positive)]
    max_grad_norm: f64,
    /// the target KL divergence threshold (off when not given)
    #[arg(long, value_parser = kl_target)]
    target_kl: Option<f64>,
}

// TRY NOT TO MODIFY: Args to the library (parse_args: one-line errors, --resume's arguments, the batch's checks:
// whole minibatches, one batch at least); default threads: torch_on_all_cores (Seeds 1: the seeds' ops split well)
ppo_details::experiment!(Args, torch_on_all_cores, check = seeds_fit);

/// Seeds 2: seed k's env e is seeded with --seed + k + e, as `ppo --seed k`'s env e: the last must fit in 64 bits
fn seeds_fit(a: &Args) -> Result<(), String> {
    let (seed, seeds, envs) = (a.run.seed, a.num_seeds, a.num_envs);
    let err =
        format!("--seed {seed} with --num-seeds {seeds} and --num-envs {envs} seeds envs past 2^64 - 1: lower --seed");
    seed.checked_add((seeds - 1 + envs - 1) as u64).map(|_| ()).ok_or(err)
}

/// CleanRL's `make_env`: `gym.make(env_id)` wrapped in `RecordVideo` (for env 0) and `RecordEpisodeStatistics`.
fn make_env(env_id: &str, video_dir: Option<std::path::PathBuf>) -> Result<Box<dyn Env<Obs = f32>>, envs::EnvError> {
    Ok(Box::new(RecordEpisodeStatistics::new(RecordVideo::new(envs::make(env_id)?, video_dir)?)))
}

/// Core 2: orthogonal weight init with the given gain, zero biases.
fn layer_init(p: nn::Path, in_dim: i64, out_dim: i64, std: f64) -> nn::Linear {
    let init = nn::Init::Orthogonal { gain: std };
    nn::linear(p, in_dim, out_dim, nn::LinearConfig { ws_init: init, bs_init: Some(nn::Init::Const(0.0)), bias: true })
}

/// Seeds 1: a linear layer of every seed, `y[k] = x[k] w[k]^T + b[k]` in one batched matrix product
fn seeds_linear(ws: Tensor, bs: Tensor) -> impl Module {
    nn::func(move |x| bs.unsqueeze(1).baddbmm(x, &ws.transpose(1, 2), 1, 1))
}

// Core 13: separate policy and value networks
struct Agent {
    critic: nn::Sequential,
    actor: nn::Sequential,
}

impl Agent {
    /// Seeds 1: seed k's networks as `ppo --seed k` initialises its own, stacked: weights [seeds, out, in]
    fn new(p: &nn::Path, obs_dim: i64, n_actions: i64, seeds: &[u64]) -> Agent {
        // each a 64-64 tanh MLP, its last layer's size and gain apart; critic first, as CleanRL (the RNG's order).
        // Layers 0, 2, 4: nn.Sequential's indices (tanh at 1, 3): saved weights get CleanRL's names (critic.0.weight)
        let mlp = |p: nn::Path, out_dim: i64, std: f64| {
            nn::seq()
                .add(layer_init(&p / 0, obs_dim, 64, 2f64.sqrt()))
                .add_fn(|x| x.tanh())
                .add(layer_init(&p / 2, 64, 64, 2f64.sqrt()))
                .add_fn(|x| x.tanh())
                .add(layer_init(&p / 4, 64, out_dim, std))
        };
        // Seeds 1: seed k's networks drawn as `ppo --seed k` draws its own (torch seeded with k, critic first) ...
        let drawn: Vec<nn::VarStore> = (seeds.iter())
            .map(|&seed| {
                tch::manual_seed(seed as i64);
                let vs = nn::VarStore::new(p.device());
                mlp(vs.root() / "critic", 1, 1.0);
                mlp(vs.root() / "actor", n_actions, 0.01);
                vs
            })
            .collect();
        // ... then stacked, a variable per layer for all seeds (critic.0.weight: [seeds, 64, obs_dim])
        let stacked = |net: &str| {
            let layer = |i: i64| {
                let var = |name: &str| {
                    let each: Vec<Tensor> =
                        drawn.iter().map(|vs| vs.variables()[&format!("{net}.{i}.{name}")].copy()).collect();
                    (p / net / i).var_copy(name, &Tensor::stack(&each, 0))
                };
                let bias = var("bias"); // first, as nn::linear makes them (the order of Adam's flat vector)
                seeds_linear(var("weight"), bias)
            };
            nn::seq().add(layer(0)).add_fn(|x| x.tanh()).add(layer(2)).add_fn(|x| x.tanh()).add(layer(4))
        };
        Agent { critic: stacked("critic"), actor: stacked("actor") }
    }

    fn get_value(&self, x: &Tensor) -> Tensor {
        self.critic.forward(x)
    }

    /// torch's Categorical(logits) written out; samples an action when none is given: (action, logprob, entropy, value)
    fn get_action_and_value(&self, x: &Tensor, action: Option<&Tensor>) -> [Tensor; 4] {
        let logits = self.actor.forward(x);
        let log_probs = logits.log_softmax(-1, Kind::Float);
        let probs = log_probs.exp();
        let (seeds, rows, n_actions) = probs.size3().expect("[seeds, rows, actions]"); // Seeds 1: one draw per row
        let sample = || ppo_details::categorical_sample(&probs.view([-1, n_actions])).view([seeds, rows]);
        let action = action.map_or_else(sample, |a| a.shallow_clone());
        let log_prob = log_probs.gather(-1, &action.unsqueeze(-1), false).squeeze_dim(-1);
        let entropy = -(probs * &log_probs).sum_dim_intlist(-1, false, Kind::Float);
        [action, log_prob, entropy, self.get_value(x)]
    }
}

fn main() {
    // bad input (a flag out of range, flags that cannot work together): one line, exit code 2, nothing written
    let args: Args = parse_args();
    // Seeds 2: all seeds' envs in one vector, seed k's (--seed + k) from env k * envs_per_seed on; a batch: one seed's
    let (num_seeds, envs_per_seed) = (args.num_seeds as i64, args.num_envs);
    let (num_envs, num_steps) = (args.num_seeds * envs_per_seed, args.num_steps);
    let batch_size = envs_per_seed * num_steps;
    let seeds: Vec<u64> = (0..args.num_seeds as u64).map(|k| args.run.seed + k).collect();
    let minibatch_size = batch_size / args.num_minibatches;
    let num_iterations = args.total_timesteps as usize / batch_size;
    let run_name = format!("{}__{}__{}__{}", args.env_id, args.run.exp_name, args.run.seed, ppo_details::unix_time());
    let video_dir: Option<std::path::PathBuf> = args.capture_video.then(|| ["videos", &run_name].iter().collect());
    let make = |i: usize| make_env(&args.env_id, video_dir.clone().filter(|_| i == 0));
    let env_fns: Vec<_> = (0..num_envs).map(|i| make(i).unwrap_or_else(|e| fail(2, e))).collect();

    // seeding
    tch::manual_seed(args.run.seed as i64);
    ppo_details::torch_deterministic(args.run.torch_deterministic); // cuDNN: deterministic algorithms, no autotuner
    let (device, device_name) = pick_device(args.run.cuda, ppo_details::Network::Mlp);
    println!("device: {device_name}");

    // env setup. Core 1: vectorized architecture
    let mut envs = VecEnv::new(env_fns).with_threads(args.run.env_threads);
    let (obs_dim, n_actions) = match (envs.single_observation_space(), envs.single_action_space()) {
        (Space::Box { shape, .. }, Space::Discrete(n)) if shape.len() == 1 => (shape[0] as i64, n as i64),
        (o, a) => fail(2, format!("{}: {o} observations, {a} actions; ppo needs 1-D and Discrete", args.env_id)),
    };
    let mut vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), obs_dim, n_actions, &seeds);
    // Core 3: Adam with epsilon 1e-5 (torch.optim.Adam's math over one flat vector; the rate comes at step(lr))
    // Seeds 3: each seed's own gradient norm and step count
    let mut optimizer = FlatAdam::new_seeds(&vs, 1e-5, args.num_seeds);
    // TRY NOT TO MODIFY: --resume loads the checkpoint's weights, Adam's state and counters, cuts its run's logs back
    // to it and reseeds torch (after the seeding above); the last argument: running statistics to restore (&[]: none)
    let from = Start::new(&args, num_iterations, &mut optimizer, &[]);
    let mut log = RunLog::create(&run_name, &args, &device_name, &from).with_seeds(&seeds, envs_per_seed); // Seeds 4
    let mut trace = Trace::start(&vs); // PPO_TRACE=FILE: the first updates, for tests/parity.rs

    // storage: obs, actions, logprobs, values on the device, a tensor per step; rewards, dones on the host, for GAE
    let per_step = || (0..num_steps).map(|_| Tensor::new()).collect::<Vec<_>>();
    let (mut obs, mut actions, mut logprobs, mut values) = (per_step(), per_step(), per_step(), per_step());
    let mut rewards = vec![vec![0f32; num_envs]; num_steps];
    let mut dones = vec![vec![0f32; num_envs]; num_steps];

    // start the game (with --resume: where the checkpoint stood, in fresh episodes)
    let mut global_step = from.global_step;
    // Seeds 2: seed k's env e as `ppo --seed k`'s env e
    envs.reset_each(|i| Some(from.seed + (i / envs_per_seed + i % envs_per_seed) as u64));
    let mut next_done = vec![0f32; num_envs];
    let mut action_buf = vec![0i64; num_envs];

    for iteration in from.iteration + 1..=num_iterations {
        // Core 4: learning-rate annealing, linearly to 0
        let frac = 1.0 - (iteration as f64 - 1.0) / num_iterations as f64;
        let lr = if args.anneal_lr { frac * args.learning_rate } else { args.learning_rate };
        // Aux 1: clip-range annealing, with the same fraction
        let clip_coef = if args.anneal_clip { frac * args.clip_coef } else { args.clip_coef };

        for step in 0..num_steps {
            global_step += envs_per_seed as u64; // each seed's steps, as `ppo --seed k` counts its own
            let next_obs = Tensor::from_slice(&envs.obs).view([num_seeds, -1, obs_dim]).to_device(device);
            obs[step] = next_obs.shallow_clone();
            dones[step].copy_from_slice(&next_done);

            let [action, logprob, _, value] = tch::no_grad(|| agent.get_action_and_value(&next_obs, None));
            values[step] = value;
            // the step's one copy down: the actions, for the envs
            action.to_device(Device::Cpu).copy_data(&mut action_buf, num_envs);
            actions[step] = action;
            logprobs[step] = logprob;

            // CleanRL's `next_obs, reward, terminations, truncations, infos = envs.step(action)`: the
            // envs write envs.obs, envs.rewards, envs.terminated, envs.truncated, envs.finished
            envs.step(Action::Discrete(&action_buf));
            rewards[step].copy_from_slice(&envs.rewards);
            // termination and truncation both end the episode (CleanRL does not bootstrap truncation)
            for (done, (term, trunc)) in next_done.iter_mut().zip(envs.terminated.iter().zip(&envs.truncated)) {
                *done = (*term || *trunc) as u8 as f32;
            }
            log.episodes(global_step, &envs.finished);
        }

        // bootstrap value if not done; the values come down to the host once per rollout, for GAE
        let next_obs = Tensor::from_slice(&envs.obs).view([num_seeds, -1, obs_dim]).to_device(device);
        let next_value = to_host(&tch::no_grad(|| agent.get_value(&next_obs)));
        let values_host = to_host(&Tensor::cat(&values, 0)); // row step * num_envs + env

        // Core 5: GAE, as a plain loop on the host
        let (gamma, gae_lambda) = (args.gamma as f32, args.gae_lambda as f32);
        let mut advantages = vec![0f32; num_steps * num_envs];
        let mut lastgaelam = vec![0f32; num_envs];
        for t in (0..num_steps).rev() {
            for e in 0..num_envs {
                let (nextnonterminal, nextvalues) = if t == num_steps - 1 {
                    (1.0 - next_done[e], next_value[e])
                } else {
                    (1.0 - dones[t + 1][e], values_host[(t + 1) * num_envs + e])
                };
                let delta = rewards[t][e] + gamma * nextvalues * nextnonterminal - values_host[t * num_envs + e];
                lastgaelam[e] = delta + gamma * gae_lambda * nextnonterminal * lastgaelam[e];
                advantages[t * num_envs + e] = lastgaelam[e];
            }
        }
        let returns: Vec<f32> = advantages.iter().zip(&values_host).map(|(a, v)| a + v).collect();

        // flatten the batch: row step * num_envs + env, as CleanRL's reshape (Seeds 3: a seed's own, [seeds, rows])
        let seed_major = |per_step: &[Tensor]| Tensor::stack(per_step, 1).flatten(1, 2);
        let per_step_host = |x: &[f32]| Tensor::from_slice(x).view([num_steps as i64, num_seeds, -1]).unbind(0);
        let (b_obs, b_logprobs) = (seed_major(&obs), seed_major(&logprobs));
        let b_actions = seed_major(&actions);
        let b_advantages = seed_major(&per_step_host(&advantages)).to_device(device);
        let b_returns = seed_major(&per_step_host(&returns)).to_device(device);
        let b_values = seed_major(&values).view([num_seeds, -1]);

        // Optimizing the policy and value network
        let learning_start = std::time::Instant::now();
        // the last minibatch's values are logged, as CleanRL's loop variables are after its loops
        let (mut pg_loss, mut v_loss, mut entropy_loss) = (Tensor::new(), Tensor::new(), Tensor::new());
        let (mut old_approx_kl, mut approx_kl) = (Tensor::new(), Tensor::new());
        let (mut loss, mut grad_norm) = (Tensor::new(), Tensor::new());
        let mut ratio_devs = Vec::new(); // |ratio - 1| of every minibatch, for the clip fractions
        let mut stepping: Vec<bool> = optimizer.stopped_at().iter().map(|&at| at == 0).collect(); // Seeds 3, 5: below
        let mut logged = Vec::new(); // Seeds 3: each seed's values where it stopped
        let mut stepped_minibatches = vec![0; args.num_seeds]; // Seeds 3: and the minibatches it stepped on
        let seed_rows = Tensor::arange(num_seeds, (Kind::Int64, device)).view([-1, 1]);
        for _epoch in 0..args.update_epochs {
            // Core 6: shuffled mini-batches that cover the whole batch each epoch (torch.randperm, PPO_TRACE keeps it)
            let order = |_| trace.order(Tensor::randperm(batch_size as i64, (Kind::Int64, device)));
            let b_inds = Tensor::stack(&(0..num_seeds).map(order).collect::<Vec<_>>(), 0); // Seeds 3: one per seed
            let live = Tensor::from_slice(&stepping).to_device(device); // Seeds 3: the seeds stepping as it starts
            for start in (0..batch_size).step_by(minibatch_size) {
                let mb_inds = b_inds.narrow(1, start as i64, minibatch_size as i64);
                let mb = |b: &Tensor| b.index(&[Some(&seed_rows), Some(&mb_inds)]); // Seeds 3: seed k's rows of its own
                let [_, newlogprob, entropy, newvalue] = agent.get_action_and_value(&mb(&b_obs), Some(&mb(&b_actions)));
                let logratio = &newlogprob - mb(&b_logprobs);
                let ratio = logratio.exp();

                // Core 12: debug variables: two KL estimates (joschu.net/blog/kl-approx.html), |ratio - 1|
                tch::no_grad(|| {
                    old_approx_kl = (-&logratio).mean_dim(-1, false, Kind::Float);
                    approx_kl = ((&ratio - 1.0) - &logratio).mean_dim(-1, false, Kind::Float);
                    ratio_devs.push((&ratio - 1.0).abs());
                });

                let mut mb_advantages = mb(&b_advantages);
                if args.norm_adv {
                    // Core 7: per-minibatch advantage normalization (torch's std: unbiased, n - 1, as CleanRL's)
                    let (mean, std) =
                        (mb_advantages.mean_dim(-1, true, Kind::Float), mb_advantages.std_dim(-1, true, true));
                    mb_advantages = (&mb_advantages - mean) / (std + 1e-8);
                }

                // Core 8: clipped surrogate objective
                let pg_loss1 = -&mb_advantages * &ratio;
                let pg_loss2 = -&mb_advantages * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef);
                pg_loss = pg_loss1.max_other(&pg_loss2).mean_dim(-1, false, Kind::Float);

                let newvalue = newvalue.view([num_seeds, -1]);
                let mb_returns = &mb(&b_returns);
                v_loss = if args.clip_vloss {
                    // Core 9: value-function loss clipping
                    let mb_values = &mb(&b_values);
                    let v_loss_unclipped = (&newvalue - mb_returns).square();
                    let v_clipped = mb_values + (&newvalue - mb_values).clamp(-clip_coef, clip_coef);
                    let v_loss_clipped = (v_clipped - mb_returns).square();
                    0.5 * v_loss_unclipped.max_other(&v_loss_clipped).mean_dim(-1, false, Kind::Float)
                } else {
                    0.5 * (&newvalue - mb_returns).square().mean_dim(-1, false, Kind::Float)
                };

                // Core 10: one loss with an entropy bonus, one optimizer
                entropy_loss = entropy.mean_dim(-1, false, Kind::Float);
                loss = &pg_loss - &entropy_loss * args.ent_coef + &v_loss * args.vf_coef;

                optimizer.zero_grad();
                // Seeds 3: the sum of the seeds' losses: no gradient mixes seeds
                loss.sum(Kind::Float).backward();
                // Core 11: global gradient-norm clipping (Seeds 3: each seed's gradient by its own norm)
                let grads: Vec<_> = vs.trainable_variables().iter().map(|p| p.grad().view([num_seeds, -1])).collect();
                grad_norm = tch::no_grad(|| Tensor::cat(&grads, 1).norm_scalaropt_dim(2, [1], false));
                let clip = (args.max_grad_norm / (&grad_norm + 1e-6)).clamp_max(1.0).view([-1, 1]);
                grads.into_iter().for_each(|mut grad| _ = tch::no_grad(|| grad.g_mul_(&clip)));
                // Seeds 5: a seed whose loss or gradient is not finite stops for good, as its last finite step left it
                let finite = ppo_details::read_host(&[&loss.isfinite().logical_and(&grad_norm.isfinite())]);
                optimizer.stop_for_good(&finite, iteration);
                stepping.iter_mut().zip(optimizer.stopped_at()).for_each(|(stepping, &at)| *stepping &= at == 0);
                optimizer.step_seeds(lr, &stepping); // Seeds 3: a stopped seed's weights and Adam state stay
                stepped_minibatches.iter_mut().zip(&stepping).for_each(|(n, stepping)| *n += *stepping as usize);
            }
            // Seeds 3: a seed logs the last minibatch of the epoch it stopped in, as `ppo` logs the one it stopped at
            let now = [&pg_loss, &v_loss, &entropy_loss, &old_approx_kl, &approx_kl, &grad_norm, &loss];
            logged = (0..now.len()).map(|i| now[i].where_self(&live, logged.get(i).unwrap_or(now[i]))).collect();
            // Aux 3: early stopping once the KL of the last minibatch passes the target (Seeds 3: per seed)
            if let Some(target_kl) = args.target_kl {
                let kl = ppo_details::read_host(&[&approx_kl]);
                stepping.iter_mut().zip(kl).for_each(|(stepping, kl)| *stepping &= kl <= target_kl);
                if !stepping.contains(&true) {
                    break;
                }
            }
        }

        // explained variance, 1 - Var[returns - values] / Var[returns] (numpy's, as CleanRL: NaN for constant returns)
        let mut explained_vars = Vec::new(); // Seeds 4: each seed's own, over its rows of the batch
        let (b_returns_host, b_values_host) = (to_host(&b_returns), to_host(&b_values));
        for (returns, values) in b_returns_host.chunks(batch_size).zip(b_values_host.chunks(batch_size)) {
            let values_host = values.to_vec();
            let var_y = var(returns.iter().map(|&y| y as f64));
            let residuals = returns.iter().zip(&values_host).map(|(&y, &v)| (y - v) as f64);
            let explained_var = if var_y == 0.0 { f64::NAN } else { 1.0 - var(residuals) / var_y };
            explained_vars.push(explained_var);
        }

        // the clip fraction: how many ratios the surrogate clipped (the first minibatch's, before any step: none, and
        // every ratio exactly 1: the tests check)
        let clipfrac = |devs: &Tensor| devs.gt(clip_coef).to_kind(Kind::Float).mean_dim(-1, false, Kind::Float);
        // Seeds 3: a stopped seed's values where it stopped, its clip fraction over the minibatches it stepped on
        let [pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, grad_norm, loss] =
            <[Tensor; 7]>::try_from(logged).expect("an epoch's values");
        let (devs, stepped_rows) =
            (Tensor::cat(&ratio_devs, 1), |k: i64| stepped_minibatches[k as usize] * minibatch_size);
        let clipfracs: Vec<Tensor> =
            (0..num_seeds).map(|k| clipfrac(&devs.get(k).narrow(0, 0, stepped_rows(k) as i64))).collect();
        let stopped_at: Vec<f64> = optimizer.stopped_at().iter().map(|&at| at as f64).collect();
        // Core 12: CleanRL's metrics by its names, our debug columns; log.update adds charts/SPS, ends on a NaN loss
        // (Seeds 4: a row per seed, its value of each [seeds] tensor; a seed stopped early: where it stopped)
        let row = [
            ("iteration", OnHost(iteration as f64)),
            ("global_step", OnHost(global_step as f64)),
            ("charts/learning_rate", Rate(lr)),
            ("charts/clip_coef", OnHost(clip_coef)),
            ("losses/value_loss", OnDevice(&v_loss)),
            ("losses/policy_loss", OnDevice(&pg_loss)),
            ("losses/entropy", OnDevice(&entropy_loss)),
            ("losses/old_approx_kl", OnDevice(&old_approx_kl)),
            ("losses/approx_kl", OnDevice(&approx_kl)),
            ("losses/clipfrac", OnDevice(&Tensor::stack(&clipfracs, 0))),
            ("losses/explained_variance", OnHostEach(&explained_vars)),
            ("debug/first_mb_max_ratio_dev", OnDevice(&ratio_devs[0].amax(-1, false))),
            ("debug/first_mb_clipfrac", OnDevice(&clipfrac(&ratio_devs[0]))),
            ("debug/unclipped_grad_norm", OnDevice(&grad_norm)),
            ("debug/nonfinite_at_update", OnHostEach(&stopped_at)), // Seeds 5: 0, or the update it stopped at
        ];
        trace.finish(&row, [&b_obs, &b_actions, &next_obs], [&rewards, &dones], &next_done);
        log.update(&row, &loss, envs.take_step_seconds(), learning_start);
        log.checkpoint(&optimizer, &[]);
    }

    if args.run.save_model {
        // CleanRL's evaluate: the saved file, read back into the agent, plays 10 episodes with sampled actions
        let model_path = log.save(&vs, &args.run.exp_name); // Seeds 4: and seed k's weights alone, for ppo's Agent
        vs.load(&model_path).unwrap_or_else(|e| fail(1, format!("cannot load {}: {e}", model_path.display())));
        let mut action = [0i64];
        let eval = |(k, &seed): (usize, &u64)| {
            play(make_env(&args.env_id, None).unwrap_or_else(|e| fail(1, e)), seed, |env| {
                let obs = Tensor::from_slice(&env.obs).view([1, 1, obs_dim]).expand([num_seeds, 1, obs_dim], false);
                let [a, _, _, _] = tch::no_grad(|| agent.get_action_and_value(&obs.to_device(device), None));
                a.get(k as i64).to_device(Device::Cpu).copy_data(&mut action, 1); // Seeds 4: seed k's action
                env.step(Action::Discrete(&action));
            })
        };
        log.eval_each(&seeds.iter().enumerate().map(eval).collect::<Vec<_>>());
    }
    // Seeds 5: exit code 1 if a seed stopped non-finite, once the others ran to the end and were saved
    log.end();
}
