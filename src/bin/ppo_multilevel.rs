//! # ppo_multilevel: multilevel PPO (Dixit & Elsheikh) on the reservoir env, a diff of `ppo_ressim.rs`
//!
//! The loss by multilevel Monte Carlo (`// Multilevel N`): per level l, coarse to fine, L^l = L(main) − L(sync), a
//! level-l rollout less level l−1's in the same states and actions; Σ_l L^l telescopes to the finest level's loss.
//! Run: `cargo run --release --bin ppo_multilevel -- --levels 32,64,128 --level-steps 80,10,5`; writes `runs/`.
//! What is not PPO comes from the package's library (`src/lib.rs`), as CleanRL's from torch, tyro and cleanrl_utils.

use clap::Parser;
use envs::{Action, Env, RecordEpisodeStatistics, RunningMeanStd, Space, VecEnv};
use ppo_details::distributions::Normal;
use ppo_details::{fail, parse_args, pick_device, play, to_host, var, FlatAdam, OrExit, RunArgs, RunLog, Start, Trace};
use ppo_details::{flags::*, Logged::*}; // value parsers (each numeric flag's range); a logged value, host or device
use std::mem::take;
use tch::{nn, nn::Module, Device, IndexOp, Kind, Tensor};

#[derive(Parser, Debug, serde::Serialize, serde::Deserialize)]
#[command(about = "Multilevel PPO on the ressim waterflooding env (Dixit & Elsheikh), after ppo_ressim")]
struct Args {
    // the experiment's flags (seed, cuda, threads, checkpoints), the same in every binary: RunArgs
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
    /// Ressim 1: the reservoir (ResSim-v1: the paper's 128x128; ResSim-case1: the reference's 61x61 test case)
    #[arg(long, default_value = "ResSim-v1")]
    env_id: String,
    /// Ressim 1: your own reservoir: a CSV file of the fine grid's log-permeability (one line per grid row,
    /// injectors in column 0; one value per column, ln of the permeability in mD; `#` comments
    /// allowed), used instead of the built-in fields
    #[arg(long, conflicts_with = "perm_seed")]
    perm_file: Option<std::path::PathBuf>,
    /// Ressim 1: seed of the generator of the 16 channelized permeability fields (1: the built-in fields, the paper's)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32))]
    perm_seed: u32,
    /// the number of iterations (rollouts on every level, then the update)
    #[arg(long, default_value_t = 300, value_parser = at_least_one)]
    num_iterations: usize,
    /// the learning rate of the optimizer
    #[arg(long, default_value_t = 1e-5, value_parser = positive)]
    learning_rate: f64,
    /// the number of parallel game environments
    #[arg(long, default_value_t = 50, value_parser = at_least_one)]
    num_envs: usize,
    /// Multilevel 1: grid size (cells per side) of each level, coarse to fine
    #[arg(long, value_delimiter = ',', default_value = "32,64,128", value_parser = at_least_one)]
    levels: Vec<usize>,
    /// Multilevel 1: steps per env and iteration on each level (T^l)
    #[arg(long, value_delimiter = ',', default_value = "80,10,5", value_parser = at_least_one)]
    level_steps: Vec<usize>,
    /// Multilevel 1: minibatch size on each level (M^l); N T^l / M^l must be the same on all levels
    #[arg(long, value_delimiter = ',', default_value = "400,50,25", value_parser = at_least_one)]
    level_minibatch_size: Vec<usize>,
    /// anneal the learning rate linearly to 0 over the run (--adaptive-lr sets the rate itself instead)
    #[arg(long, default_value_t = false)]
    anneal_lr: bool,
    /// adapt the learning rate to the policy's KL after every minibatch instead of annealing it
    /// (rsl_rl's rule: / 1.5 above 2 x --desired-kl, x 1.5 below half of it; within [1e-5, 1e-2])
    #[arg(long, default_value_t = false)]
    adaptive_lr: bool,
    /// the KL between the rollout's policy and the current one that --adaptive-lr aims at
    #[arg(long, default_value_t = 0.01, value_parser = positive)]
    desired_kl: f64,
    /// --adaptive-lr's rule: rsl-rl's, or the TUM report's (3.6: / 2 above 1.5 x --desired-kl, x 2 below it / 1.5)
    #[arg(long, default_value = "rsl-rl", value_parser = ["rsl-rl", "tum"])]
    adaptive_lr_rule: String,
    /// the discount factor gamma
    #[arg(long, default_value_t = 0.99, value_parser = unit_interval)]
    gamma: f64,
    /// the lambda for the general advantage estimation
    #[arg(long, default_value_t = 0.95, value_parser = unit_interval)]
    gae_lambda: f64,
    /// the K epochs to update the policy
    #[arg(long, default_value_t = 20, value_parser = at_least_one)]
    update_epochs: usize,
    /// normalize the advantages per minibatch
    #[arg(long, default_value_t = true)]
    norm_adv: bool,
    /// the surrogate clipping coefficient
    #[arg(long, default_value_t = 0.1, value_parser = positive)]
    clip_coef: f64,
    /// anneal the clip coefficient (policy and value clipping) linearly to 0 over the run
    #[arg(long, default_value_t = false)]
    anneal_clip: bool,
    /// use a clipped loss for the value function, as in the paper
    #[arg(long, default_value_t = false)]
    clip_vloss: bool,
    /// coefficient of the entropy bonus
    #[arg(long, default_value_t = 0.001, value_parser = finite)]
    ent_coef: f64,
    /// coefficient of the value function loss
    #[arg(long, default_value_t = 1.0, value_parser = finite)]
    vf_coef: f64,
    /// the maximum norm for the gradient clipping
    #[arg(long, default_value_t = 0.5, value_parser = positive)]
    max_grad_norm: f64,
    /// the target KL divergence threshold (inf: off), checked as --kl-rule says
    #[arg(long, default_value = "0.05", value_parser = kl_target)]
    target_kl: Option<f64>,
    /// Ressim 3: sb3 (SB3's PPO.train): stop the update at once when a minibatch's approx_kl exceeds 1.5 x --target-kl,
    /// before its step; cleanrl: after an epoch whose last minibatch's approx_kl is above --target-kl
    #[arg(long, default_value = "sb3", value_parser = ["sb3", "cleanrl"])]
    kl_rule: String,
    /// bootstrap the value at time-limit truncations instead of treating them as terminations (not in CleanRL)
    #[arg(long, default_value_t = false)]
    bootstrap_truncation: bool,
    /// Ressim 2: hidden layer sizes
    #[arg(long, value_delimiter = ',', default_value = "150,100,80")]
    #[arg(value_parser = clap::value_parser!(i64).range(1..))]
    hidden_sizes: Vec<i64>,
    /// Ressim 2: one tanh trunk shared by policy and value (SB3 1.x's MlpPolicy, the paper's); false: two separate MLPs
    #[arg(long, default_value_t = true)]
    shared_trunk: bool,
    /// Ressim 2: initial log standard deviation of the actions
    #[arg(long, default_value_t = -2.9, value_parser = finite)]
    log_std_init: f64,
    /// ppo_continuous's observation and reward normalization (off: the env scales its own)
    #[arg(long, default_value_t = false)]
    normalize: bool,
}

// TRY NOT TO MODIFY: Args to the library (parse_args: one-line errors, --resume's arguments, the levels' checks:
// Multilevel 1's shapes); default threads: 1 for libtorch, every core for simulating; --resume may add iterations
// (runs of earlier builds had rsl_rl's rule and no --bootstrap-truncation)
ppo_details::experiment!(Args, (1, ppo_details::all_cores()), levels, added_later = ADDED_LATER);
const ADDED_LATER: &[(&str, &str)] = &[("adaptive_lr_rule", "rsl-rl"), ("bootstrap_truncation", "false")];

/// CleanRL's `make_env` (ours are flat: no FlattenObservation), with the running statistics the checkpoints keep.
type EnvAndStats = Result<(Box<dyn Env<Obs = f32>>, Option<[envs::SharedRms; 2]>), envs::EnvError>;
fn make_env(args: &Args, nx: usize, rms: Option<RunningMeanStd>) -> EnvAndStats {
    let generated = envs::ressim::Fields::Generated { n: 16, seed: args.perm_seed };
    let fields = args.perm_file.clone().map_or(generated, envs::ressim::Fields::File);
    let env = RecordEpisodeStatistics::new(envs::ressim::make_with(&args.env_id, &fields, Some(nx))?);
    // Continuous 5: clip actions to the valid range for the env
    let env = envs::ClipAction::new(env);
    if !args.normalize {
        // Ressim 1: the env scales its observations (saturations in [0, 1], pressures to [−1, 1]), rewards are
        // recovery fractions: by default only the actions are clipped (to [0.001, 1], as SB3 does)
        return Ok((Box::new(env), None));
    }
    let env = envs::NormalizeObservation::new(env).frozen_with(rms); // Continuous 6: observation normalization
    let stats = env.stats();
    // Continuous 7: observation clipping (±10)
    let env = envs::TransformObservation::new(env, |o: &mut [f32]| o.iter_mut().for_each(|x| *x = x.clamp(-10., 10.)));
    // Continuous 8: reward scaling (divide by std of discounted return)
    let env = envs::NormalizeReward::new(env, args.gamma);
    let stats = [stats, env.stats()];
    let env = envs::TransformReward::new(env, |r: f64| r.clamp(-10.0, 10.0)); // Continuous 9: reward clipping (±10)
    Ok((Box::new(env), Some(stats)))
}

/// The `ResSim` inside an env stack, for `map_from`.
fn ressim(env: &mut Box<dyn Env<Obs = f32>>) -> &mut envs::ressim::ResSim {
    env.unwrapped().and_then(|e| e.downcast_mut()).expect("every env here is a ResSim")
}

/// Multilevel 3: puts each env of `coarse` in the state of the same env of `fine` (the reference's
/// `map_from`: block means of saturation and pressure, same field and step).
fn map_envs(coarse: &mut VecEnv<f32>, fine: &mut VecEnv<f32>) {
    let d = coarse.obs_dim;
    for e in 0..coarse.obs.len() / d {
        let to = ressim(coarse.env_mut(e));
        to.map_from(ressim(fine.env_mut(e)));
        let obs: Vec<f32> = to.obs.iter().map(|&v| v as f32).collect();
        coarse.obs[e * d..(e + 1) * d].copy_from_slice(&obs);
    }
}

/// Core 2: orthogonal weight init with the given gain, zero biases (over nn.Linear's own init: the RNG draws both)
fn layer_init(p: nn::Path, in_dim: i64, out_dim: i64, std: f64) -> nn::Linear {
    let mut layer = nn::linear(p, in_dim, out_dim, Default::default());
    nn::Init::Orthogonal { gain: std }.set(&mut layer.ws);
    tch::no_grad(|| layer.bs.as_mut().map(|bias| bias.fill_(0.0)));
    layer
}

// Core 13: separate policy and value networks (Ressim 2: by default one trunk shared by both, --shared-trunk)
// Continuous 4: separate policy and value MLPs
struct Agent {
    trunk: nn::Sequential,
    critic: nn::Sequential,
    actor_mean: nn::Sequential,
    actor_logstd: Tensor,
    obs_rms: Tensor, // observation statistics (mean, var, count), saved with the weights (cleanrl#425)
}

impl Agent {
    fn new(p: &nn::Path, obs_dim: i64, n_actions: i64, args: &Args) -> Agent {
        // tanh layers of the given sizes, then an output layer of the given size and gain when one is given; trunk,
        // critic, actor (SB3: actor before critic). Layers 0, 2, 4, ...: nn.Sequential's indices (tanh at 1, 3, ...)
        let mlp = |p: nn::Path, sizes: &[i64], out: Option<(i64, f64)>| {
            let mut seq = nn::seq();
            for (i, w) in sizes.windows(2).enumerate() {
                seq = seq.add(layer_init(&p / (2 * i), w[0], w[1], 2f64.sqrt())).add_fn(|x| x.tanh());
            }
            let Some((n, std)) = out else { return seq };
            seq.add(layer_init(&p / (2 * sizes.len() - 2), sizes[sizes.len() - 1], n, std))
        };
        let sizes = [&[obs_dim][..], &args.hidden_sizes].concat();
        // Ressim 2: SB3 1.x's MlpPolicy (the paper's) with net_arch [150, 100, 80]: one trunk, two linear heads
        let k = if args.shared_trunk { sizes.len() - 1 } else { 0 }; // trunk: sizes[..=k]; heads: sizes[k..]
        let (trunk, heads_in) = (mlp(p / "trunk", &sizes[..=k], None), &sizes[k..]);
        let (critic, actor_mean) =
            (mlp(p / "critic", heads_in, Some((1, 1.0))), mlp(p / "actor_mean", heads_in, Some((n_actions, 0.01))));
        // Continuous 2: state-independent log std (Ressim 2: initialized to --log-std-init)
        let actor_logstd = p.var("actor_logstd", &[1, n_actions], nn::Init::Const(args.log_std_init));
        let obs_rms = p.add("obs_rms", Tensor::zeros([2 * obs_dim + 1], (Kind::Double, p.device())), false);
        Agent { trunk, critic, actor_mean, actor_logstd, obs_rms }
    }

    fn get_value(&self, x: &Tensor) -> Tensor {
        self.critic.forward(&self.trunk.forward(x))
    }

    /// torch's Normal(mean, std), as CleanRL's; samples an action when none is given: (action, logprob, entropy, value)
    fn get_action_and_value(&self, x: &Tensor, action: Option<&Tensor>) -> [Tensor; 4] {
        let hidden = self.trunk.forward(x);
        // Continuous 1: Normal action distribution
        let action_mean = self.actor_mean.forward(&hidden);
        let action_logstd = self.actor_logstd.expand_as(&action_mean);
        let action_std = action_logstd.exp();
        let probs = Normal::new(&action_mean, &action_std);
        let action = action.map_or_else(|| probs.sample(), |a| a.shallow_clone());
        // Continuous 3: independent action components (log-probs and entropies summed)
        let log_prob = probs.log_prob(&action).sum_dim_intlist(1, false, Kind::Float);
        let entropy = probs.entropy().sum_dim_intlist(1, false, Kind::Float);
        [action, log_prob, entropy, self.critic.forward(&hidden)]
    }
}

fn main() {
    // bad input (a flag out of range, flags that cannot work together): one line, exit code 2, nothing written
    let args: Args = parse_args();
    let (num_envs, n_levels) = (args.num_envs, args.levels.len());
    let num_minibatches = num_envs * args.level_steps[0] / args.level_minibatch_size[0]; // Multilevel 1: every level's
    let num_iterations = args.num_iterations;
    let run_name = format!("{}__{}__{}__{}", args.env_id, args.run.exp_name, args.run.seed, ppo_details::unix_time());
    // Multilevel 2: per level its own envs; for l > 0 also envs on level l−1 for the sync samples
    let make = |&nx: &usize| {
        let env_fns: Result<Vec<_>, _> = (0..args.num_envs).map(|_| make_env(&args, nx, None)).collect();
        let (env_fns, stats): (Vec<_>, Vec<_>) = env_fns.unwrap_or_else(|e| fail(2, e)).into_iter().unzip();
        let stats: Vec<_> = stats.into_iter().flatten().collect(); // each env's pair (none without --normalize)
        (VecEnv::new(env_fns).with_threads(args.run.env_threads), stats)
    };
    let (mut level_envs, level_stats): (Vec<_>, Vec<_>) = args.levels.iter().map(make).unzip();
    let (mut sync_envs, sync_stats): (Vec<_>, Vec<_>) = args.levels[..n_levels - 1].iter().map(make).unzip();
    let stats = [level_stats, sync_stats].concat().concat(); // every env's running statistics, for the checkpoints

    // seeding: torch's generator, and numpy's legacy one for the minibatches (np.random.seed takes 32 bits)
    tch::manual_seed(args.run.seed as i64);
    let mut np_random = envs::numpy::RandomState::new(args.run.seed as u32);
    ppo_details::torch_deterministic(args.run.torch_deterministic); // cuDNN: deterministic algorithms, no autotuner
    let (device, device_name) = pick_device(args.run.cuda, ppo_details::Network::Mlp);
    println!("device: {device_name}");

    // env setup. Core 1: vectorized architecture
    let envs = &level_envs[0]; // every level's spaces are the same
    let (obs_dim, n_actions) = match (envs.single_observation_space(), envs.single_action_space()) {
        (Space::Box { shape, .. }, Space::Box { shape: a, .. }) if shape.len() == 1 && a.len() == 1 => {
            (shape[0] as i64, a[0] as i64)
        }
        (o, a) => fail(2, format!("{}: {o} observations, {a} actions; 1-D Boxes needed", args.env_id)),
    };
    let mut vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), obs_dim, n_actions, &args);
    // Core 3: Adam with epsilon 1e-5 (torch.optim.Adam's steps, per parameter; the rate comes at step(lr))
    let mut optimizer = FlatAdam::new(&vs, 1e-5);
    // TRY NOT TO MODIFY: --resume loads the checkpoint's weights, Adam, counters, statistics (&[]: none), cuts logs
    let from = Start::new(&args, num_iterations, &mut optimizer, stats.as_flattened()).or_exit();
    if from.iteration > 0 {
        tch::manual_seed(from.seed as i64); // --resume: the checkpoint's seed, as the envs' fresh episodes get
        np_random = envs::numpy::RandomState::new(from.seed as u32);
    }
    let mut log = RunLog::create(&run_name, &args, &device_name, &from).or_exit();
    let mut trace = Trace::start(&vs); // PPO_TRACE=FILE: the first updates, for tests/parity.rs

    // start the game (with --resume: where the checkpoint stood, in fresh episodes)
    let mut global_step = from.global_step;
    for envs in level_envs.iter_mut().chain(sync_envs.iter_mut()) {
        envs.reset(Some(from.seed));
    }
    let mut level_next_done = vec![vec![0f32; num_envs]; n_levels];
    let mut action_buf = vec![0f32; num_envs * n_actions as usize];
    let mut lr = from.learning_rate.unwrap_or(args.learning_rate);

    for iteration in from.iteration + 1..=num_iterations {
        // Core 4: learning-rate annealing, linearly to 0 (Extra 1: --adaptive-lr carries it on instead)
        let frac = 1.0 - (iteration as f64 - 1.0) / num_iterations as f64;
        if !args.adaptive_lr {
            lr = if args.anneal_lr { frac * args.learning_rate } else { args.learning_rate };
        }
        // Aux 1: clip-range annealing, with the same fraction
        let clip_coef = if args.anneal_clip { frac * args.clip_coef } else { args.clip_coef };
        let old_logstd = agent.actor_logstd.detach().copy(); // Extra 1: the rollout's log std

        // Multilevel 2: levels coarse to fine, each continuing its own episodes; global_step: every level's main steps
        let mut batches = Vec::new(); // Multilevel 5: per level its main batch (sign 1), for l > 0 its sync one (−1)
        let mut finest = None; // the finest level's main batch: what --adaptive-lr, the logs and the trace read of it
        for l in 0..n_levels {
            let (envs, mut coarse, mut next_done) =
                (&mut level_envs[l], l.checked_sub(1).map(|c| &mut sync_envs[c]), take(&mut level_next_done[l]));
            let (num_steps, batch_size) = (args.level_steps[l], num_envs * args.level_steps[l]);
            // storage: obs, actions, logprobs, values on the device, a tensor per step; rewards, dones on the host
            let per_step = || (0..num_steps).map(|_| Tensor::new()).collect::<Vec<_>>();
            let (mut obs, mut actions, mut logprobs, mut values) = (per_step(), per_step(), per_step(), per_step());
            let mut mus = per_step(); // Extra 1: the rollout's action means
            let mut rewards = vec![vec![0f32; num_envs]; num_steps];
            let mut dones = vec![vec![0f32; num_envs]; num_steps];
            // Multilevel 3: the sync samples (level l−1 in this level's states, same actions and dones)
            let (mut sync_obs, mut sync_logprobs, mut sync_values) = (per_step(), per_step(), per_step());
            let mut sync_rewards = vec![vec![0f32; num_envs]; num_steps];

            let (mut truncations, mut final_obs) = (Vec::new(), Vec::new()); // (step, env) and its last observation
            for step in 0..num_steps {
                global_step += num_envs as u64;
                let next_obs = Tensor::from_slice(&envs.obs).view([-1, obs_dim]).to_device(device);
                obs[step] = next_obs.shallow_clone();
                dones[step].copy_from_slice(&next_done);

                let [action, logprob, _, value] = tch::no_grad(|| agent.get_action_and_value(&next_obs, None));
                values[step] = value;
                if args.adaptive_lr {
                    mus[step] = tch::no_grad(|| agent.actor_mean.forward(&agent.trunk.forward(&next_obs)));
                }
                // the step's one copy down: the actions, for the envs
                action.to_device(Device::Cpu).copy_data(&mut action_buf, num_envs * n_actions as usize);
                if let Some(coarse) = coarse.as_deref_mut() {
                    // Multilevel 3: level l−1 in this level's state, valued and stepped with the same action; V~ and
                    // log π~ from a forward pass that samples nothing (the reference drew an extra action for V~)
                    map_envs(coarse, envs);
                    let coarse_obs = Tensor::from_slice(&coarse.obs).view([-1, obs_dim]).to_device(device);
                    let [_, logprob, _, value] =
                        tch::no_grad(|| agent.get_action_and_value(&coarse_obs, Some(&action)));
                    coarse.step(Action::Continuous(&action_buf));
                    sync_rewards[step].copy_from_slice(&coarse.rewards);
                    (sync_obs[step], sync_logprobs[step], sync_values[step]) = (coarse_obs, logprob, value);
                }
                actions[step] = action;
                logprobs[step] = logprob;

                // CleanRL's `envs.step(action)`: it writes envs.obs, .rewards, .terminated, .truncated, .finished
                envs.step(Action::Continuous(&action_buf)); // Continuous 5: the unclipped sample is stored
                rewards[step].copy_from_slice(&envs.rewards);
                for e in
                    (0..num_envs).filter(|&e| args.bootstrap_truncation && envs.truncated[e] && !envs.terminated[e])
                {
                    truncations.push((step, e));
                    final_obs.extend_from_slice(&envs.final_obs[e * envs.obs_dim..][..envs.obs_dim]);
                }
                // termination and truncation both end the episode (CleanRL does not bootstrap truncation)
                for (done, (term, trunc)) in next_done.iter_mut().zip(envs.terminated.iter().zip(&envs.truncated)) {
                    *done = (*term || *trunc) as u8 as f32;
                }
                log.episodes(global_step, if l == n_levels - 1 { &envs.finished } else { &[] });
            }

            if !truncations.is_empty() {
                // a time limit is not a real end: add gamma * V(final observation) (cleanrl#198), valued
                // for the whole rollout in one forward pass (the policy has not changed since)
                let final_obs =
                    Tensor::from_slice(&final_obs).view([truncations.len() as i64, obs_dim]).to_device(device);
                let final_values = to_host(&tch::no_grad(|| agent.get_value(&final_obs)));
                for (&(step, e), v) in truncations.iter().zip(final_values) {
                    rewards[step][e] += (args.gamma * v as f64) as f32;
                }
            }

            for &sign in if l == 0 { &[1.0][..] } else { &[1.0, -1.0] } {
                // Multilevel 4: the main samples (sign 1), then the sync samples (−1): GAE with the fine episode
                // boundaries, bootstrapped from level l−1 put in the fine state after the last step
                let (envs, obs, logprobs, values, rewards) = match coarse.as_deref_mut() {
                    Some(coarse) if sign < 0.0 => {
                        map_envs(coarse, envs);
                        (coarse, take(&mut sync_obs), take(&mut sync_logprobs), take(&mut sync_values), &sync_rewards)
                    }
                    _ => (&mut *envs, take(&mut obs), take(&mut logprobs), take(&mut values), &rewards),
                };

                // bootstrap value if not done; the values come down to the host once per rollout, for GAE
                let next_obs = Tensor::from_slice(&envs.obs).view([-1, obs_dim]).to_device(device);
                let next_value = to_host(&tch::no_grad(|| agent.get_value(&next_obs)));
                let values_host = to_host(&Tensor::cat(&values, 0)); // row step * num_envs + env

                // Core 5: GAE, as a plain loop on the host
                let (gamma, gamma_lambda) = (args.gamma as f32, (args.gamma * args.gae_lambda) as f32); // Python's f64
                let mut advantages = vec![0f32; batch_size];
                let mut lastgaelam = vec![0f32; num_envs];
                for t in (0..num_steps).rev() {
                    for e in 0..num_envs {
                        let (nextnonterminal, nextvalues) = if t == num_steps - 1 {
                            (1.0 - next_done[e], next_value[e])
                        } else {
                            (1.0 - dones[t + 1][e], values_host[(t + 1) * num_envs + e])
                        };
                        let delta =
                            rewards[t][e] + gamma * nextvalues * nextnonterminal - values_host[t * num_envs + e];
                        lastgaelam[e] = delta + gamma_lambda * nextnonterminal * lastgaelam[e];
                        advantages[t * num_envs + e] = lastgaelam[e];
                    }
                }
                let returns: Vec<f32> = advantages.iter().zip(&values_host).map(|(a, v)| a + v).collect();

                // flatten the batch: row step * num_envs + env, as CleanRL's reshape
                let (b_obs, b_logprobs) = (Tensor::cat(&obs, 0), Tensor::cat(&logprobs, 0));
                let b_actions = Tensor::cat(&actions, 0);
                if l == n_levels - 1 && sign > 0.0 {
                    let b_mus = if args.adaptive_lr { Tensor::cat(&mus, 0) } else { b_actions.zeros_like() }; // Extra 1
                    finest = Some((b_mus, returns.clone(), values_host, rewards.clone(), dones.clone(), next_obs));
                }
                let b_advantages = Tensor::from_slice(&advantages).to_device(device);
                let b_returns = Tensor::from_slice(&returns).to_device(device);
                let b_values = Tensor::cat(&values, 0).view([-1]);
                batches.push(Batch { level: l, sign, b_obs, b_actions, b_logprobs, b_advantages, b_returns, b_values });
            }
            level_next_done[l] = next_done;
        }
        let fine = batches.iter().rposition(|b| b.sign > 0.0).expect("a main batch"); // the finest level's main batch
        let (b_mus, returns, values_host, rewards, dones, next_obs) = finest.expect("a main batch");

        // Optimizing the policy and value network (the last minibatch's values are logged, as CleanRL's)
        let learning_start = std::time::Instant::now();
        let (mut pg_loss, mut v_loss, mut entropy_loss) = (Tensor::new(), Tensor::new(), Tensor::new());
        let (mut old_approx_kl, mut approx_kl) = (Tensor::new(), Tensor::new());
        let (mut loss, mut grad_norm) = (Tensor::new(), Tensor::from(f32::NAN)); // NaN: Ressim 3 stopped before a step
        let mut ratio_devs: Vec<Vec<_>> = batches.iter().map(|_| Vec::new()).collect(); // |ratio - 1|, per batch
        let mut batch_kls: Vec<_> = batches.iter().map(|_| Tensor::new()).collect(); // Multilevel 5: last approx_kl
        let mut level_losses = Vec::new(); // Multilevel 5: every minibatch's L^l, for their mean and variance
        let mut adaptive_kl = f64::NAN; // Extra 1: the last KL the rule saw
        let (mut epochs, mut optimizer_steps, mut stop) = (0, 0, false); // Ressim 3: how far the update went
        let sb3 = args.kl_rule == "sb3"; // Ressim 3: SB3's early stop, else CleanRL's (Aux 3)
        let mut level_inds: Vec<Vec<i64>> =
            args.level_steps.iter().map(|t| (0..(t * num_envs) as i64).collect()).collect();
        for _epoch in 0..args.update_epochs {
            epochs += 1;
            // Core 6: shuffled mini-batches that cover the whole batch each epoch (numpy's shuffle, PPO_TRACE keeps it)
            // Multilevel 5: one permutation per level, for its main and sync batches alike
            level_inds.iter_mut().for_each(|inds| np_random.shuffle(inds));
            let perm = |inds: &Vec<i64>| trace.order(Tensor::from_slice(inds).to_device(device));
            let perms: Vec<Tensor> = level_inds.iter().map(perm).collect();
            for start in 0..num_minibatches {
                // Multilevel 5: every batch's minibatch on the same indices of its level's permutation, all through
                // the network in one forward pass (and so one backward pass), then one optimizer step
                let sizes: Vec<i64> = batches.iter().map(|b| args.level_minibatch_size[b.level] as i64).collect();
                let batch_inds: Vec<Tensor> =
                    batches.iter().zip(&sizes).map(|(b, &n)| perms[b.level].narrow(0, start as i64 * n, n)).collect();
                let (mb_obs, mb_actions): (Vec<_>, Vec<_>) =
                    batches.iter().zip(&batch_inds).map(|(b, i)| (b.b_obs.i(i), b.b_actions.i(i))).unzip();
                let outputs = agent.get_action_and_value(&Tensor::cat(&mb_obs, 0), Some(&Tensor::cat(&mb_actions, 0)));
                let [_, newlogprobs, entropies, newvalues] = outputs.map(|t| t.split_with_sizes(&sizes, 0));
                let mut level_loss: Vec<_> = (0..n_levels).map(|_| Tensor::from(0f32)).collect();
                // (the finest main batch last: its values are the ones logged)
                for b in (0..batches.len()).filter(|&b| b != fine).chain([fine]) {
                    let Batch { level, sign, b_logprobs, b_advantages, b_returns, b_values, .. } = &batches[b];
                    let [mb_inds, newlogprob, entropy, newvalue] =
                        [&batch_inds, &newlogprobs, &entropies, &newvalues].map(|t| t[b].shallow_clone());
                    let logratio = &newlogprob - b_logprobs.i(&mb_inds);
                    let ratio = logratio.exp();

                    // Core 12: debug variables: two KL estimates (joschu.net/blog/kl-approx.html), |ratio - 1|
                    tch::no_grad(|| {
                        old_approx_kl = (-&logratio).mean(Kind::Float);
                        approx_kl = ((&ratio - 1.0) - &logratio).mean(Kind::Float);
                        ratio_devs[b].push((&ratio - 1.0).abs());
                        batch_kls[b] = approx_kl.shallow_clone();
                    });

                    let mut mb_advantages = b_advantages.i(&mb_inds);
                    if args.norm_adv {
                        // Core 7: per-minibatch advantage normalization (torch's std: unbiased, n - 1, as CleanRL's)
                        mb_advantages =
                            (&mb_advantages - mb_advantages.mean(Kind::Float)) / (mb_advantages.std(true) + 1e-8);
                    }

                    // Core 8: clipped surrogate objective
                    let pg_loss1 = -&mb_advantages * &ratio;
                    let pg_loss2 = -&mb_advantages * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef);
                    pg_loss = pg_loss1.max_other(&pg_loss2).mean(Kind::Float);

                    let newvalue = newvalue.view([-1]);
                    let mb_returns = &b_returns.i(&mb_inds);
                    v_loss = if args.clip_vloss {
                        // Core 9: value-function loss clipping
                        let mb_values = &b_values.i(&mb_inds);
                        let v_loss_unclipped = (&newvalue - mb_returns).square();
                        let v_clipped = mb_values + (&newvalue - mb_values).clamp(-clip_coef, clip_coef);
                        let v_loss_clipped = (v_clipped - mb_returns).square();
                        0.5 * v_loss_unclipped.max_other(&v_loss_clipped).mean(Kind::Float)
                    } else {
                        0.5 * (&newvalue - mb_returns).square().mean(Kind::Float)
                    };

                    // Core 10: one loss with an entropy bonus, one optimizer
                    entropy_loss = entropy.mean(Kind::Float);
                    loss = &pg_loss - &entropy_loss * args.ent_coef + &v_loss * args.vf_coef;
                    // Multilevel 5: L^l = L(main batch of l) − L(sync batch of l−1), each term the loss above
                    level_loss[*level] = &level_loss[*level] + *sign * &loss;
                }
                let level_loss = Tensor::stack(&level_loss, 0);
                loss = level_loss.sum(Kind::Float); // Multilevel 5: loss_MLMC = Σ_l L^l
                level_losses.push(level_loss.detach());

                // Aux 3, Ressim 3: SB3's early stop (PPO.train): a minibatch with an approx_kl above 1.5 x target_kl
                // ends the update before its step (one host read per minibatch)
                let main_kls: Vec<&Tensor> =
                    batches.iter().zip(&batch_kls).filter(|(b, _)| b.sign > 0.0).map(|(_, kl)| kl).collect();
                let max_main_kl = Tensor::stack(&main_kls, 0).max(); // Multilevel 6: any level's main minibatch
                stop = sb3 && args.target_kl.is_some_and(|target_kl| max_main_kl.double_value(&[]) > 1.5 * target_kl);
                if stop {
                    break;
                }

                if args.adaptive_lr {
                    // Extra 1: KL-adaptive learning rate (rsl_rl's or the TUM report's rule), from this minibatch's KL
                    // on the finest main batch (its data is the real environment)
                    let (b_obs, mb_inds) = (&batches[fine].b_obs, batch_inds[fine].shallow_clone());
                    let mu = tch::no_grad(|| agent.actor_mean.forward(&agent.trunk.forward(&b_obs.i(&mb_inds))));
                    adaptive_kl =
                        gaussian_kl(&b_mus.i(&mb_inds), &old_logstd, &mu, &agent.actor_logstd).double_value(&[]);
                    lr = adapt_lr(&args.adaptive_lr_rule, lr, adaptive_kl, args.desired_kl);
                }

                optimizer.zero_grad();
                loss.backward();
                // Core 11: global gradient-norm clipping
                grad_norm = optimizer.clip_grad_norm(args.max_grad_norm);
                optimizer.step(lr);
                optimizer_steps += 1;
            }
            // Aux 3: early stopping once the KL of the last minibatch passes the target
            if stop || !sb3 && args.target_kl.is_some_and(|target_kl| approx_kl.double_value(&[]) > target_kl) {
                break;
            }
        }

        // explained variance, 1 - Var[returns - values] / Var[returns] (numpy's float32 var: NaN for constant returns)
        let (b_obs, b_actions) = (batches[fine].b_obs.shallow_clone(), batches[fine].b_actions.shallow_clone());
        let next_done = level_next_done[n_levels - 1].clone();
        let var_y = var(&returns);
        let residuals: Vec<f32> = returns.iter().zip(&values_host).map(|(y, v)| y - v).collect();
        let explained_var = if var_y == 0.0 { f64::NAN } else { (1.0 - var(&residuals) / var_y) as f64 };

        // the clip fraction: the ratios the surrogate clipped (the first minibatch's: none, every ratio 1: tests check)
        let clipfrac = |devs: &Tensor| devs.gt(clip_coef).to_kind(Kind::Float).mean(Kind::Float);
        let first_mb = Tensor::cat(&ratio_devs.iter().map(|devs| devs[0].shallow_clone()).collect::<Vec<_>>(), 0);
        // Core 12: CleanRL's metrics by its names, our debug columns; log.update adds charts/SPS, ends on a NaN loss
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
            ("losses/clipfrac", OnDevice(&clipfrac(&Tensor::cat(&ratio_devs[fine], 0)))),
            ("losses/explained_variance", OnHost(explained_var)),
            ("debug/first_mb_max_ratio_dev", OnDevice(&first_mb.max())),
            ("debug/first_mb_clipfrac", OnDevice(&clipfrac(&first_mb))),
            ("debug/adaptive_kl", if args.adaptive_lr { OnHost(adaptive_kl) } else { Off }),
            ("debug/unclipped_grad_norm", OnDevice(&grad_norm)),
            ("debug/epochs", OnHost(epochs as f64)),
            ("debug/optimizer_steps", OnHost(optimizer_steps as f64)),
        ];
        // Multilevel 5: per batch its first minibatch's ratio columns and last KL; per level L^l's mean and variance
        // over the update's minibatches (the V_l of MLMC's sample-size rule)
        let level_losses = Tensor::stack(&level_losses, 0);
        let (means, vars) = (level_losses.mean_dim(0, false, Kind::Float), level_losses.var_dim(0, true, false));
        let mut level_columns = Vec::new();
        for (b, batch) in batches.iter().enumerate() {
            let name = format!("l{}{}", batch.level + 1, if batch.sign > 0.0 { "" } else { "_sync" });
            level_columns.push((format!("debug/{name}_first_mb_max_ratio_dev"), ratio_devs[b][0].max()));
            level_columns.push((format!("debug/{name}_first_mb_clipfrac"), clipfrac(&ratio_devs[b][0])));
            level_columns.push((format!("losses/{name}_approx_kl"), batch_kls[b].shallow_clone()));
        }
        for l in 0..n_levels {
            level_columns.push((format!("losses/l{}_loss", l + 1), means.get(l as i64)));
            level_columns.push((format!("losses/l{}_loss_var", l + 1), vars.get(l as i64)));
        }
        let row: Vec<_> =
            row.into_iter().chain(level_columns.iter().map(|(name, value)| (name.as_str(), OnDevice(value)))).collect();
        trace.finish(&row, [&b_obs, &b_actions, &next_obs], [&rewards, &dones], &next_done).or_exit();
        let env_seconds = level_envs.iter_mut().chain(&mut sync_envs).map(|envs| envs.take_step_seconds()).sum();
        log.update(&row, &loss, env_seconds, learning_start).or_exit();
        log.checkpoint(&optimizer, stats.as_flattened()).or_exit();
    }

    if args.run.save_model {
        if args.normalize {
            let rms = stats[0][0].lock().clone(); // env 0's observation statistics go into the model file
            let rms = Tensor::from_slice(&[rms.mean, rms.var, vec![rms.count]].concat());
            tch::no_grad(|| agent.obs_rms.shallow_clone().copy_(&rms));
        }
        // CleanRL's evaluate: the saved file, read back into the agent, plays 10 episodes with sampled actions
        let model_path = log.save(&vs, &args.run.exp_name).or_exit();
        vs.load(&model_path).unwrap_or_else(|e| fail(1, format!("cannot load {}: {e}", model_path.display())));
        let v = Vec::<f64>::try_from(agent.obs_rms.to_device(Device::Cpu)).unwrap_or_else(|e| fail(1, e));
        let d = obs_dim as usize;
        let rms = RunningMeanStd { mean: v[..d].to_vec(), var: v[d..2 * d].to_vec(), count: v[2 * d] };
        let env = make_env(&args, args.levels[n_levels - 1], Some(rms)).unwrap_or_else(|e| fail(1, e)).0;
        let mut action = vec![0f32; n_actions as usize];
        let returns = play(env, args.run.seed, |env| {
            let obs = Tensor::from_slice(&env.obs).view([1, obs_dim]).to_device(device);
            let [a, _, _, _] = tch::no_grad(|| agent.get_action_and_value(&obs, None));
            a.to_device(Device::Cpu).copy_data(&mut action, n_actions as usize);
            env.step(Action::Continuous(&action));
        });
        log.eval(&returns).or_exit();
    }
}

/// Multilevel 5: one batch of the MLMC loss, a level's main samples (`sign` 1) or its sync samples (−1), flattened.
struct Batch {
    level: usize,
    sign: f64,
    b_obs: Tensor,
    b_actions: Tensor,
    b_logprobs: Tensor,
    b_advantages: Tensor,
    b_returns: Tensor,
    b_values: Tensor,
}

/// Extra 1: KL(old ‖ new) of two diagonal Gaussian policies in closed form, as torch's
/// `kl_divergence(Normal(mu_old, std_old), Normal(mu, std))`: summed over the action's components, averaged over rows.
fn gaussian_kl(mu_old: &Tensor, logstd_old: &Tensor, mu: &Tensor, logstd: &Tensor) -> Tensor {
    let (var_old, var) = ((logstd_old * 2.0).exp(), (logstd * 2.0).exp());
    let kl: Tensor = logstd - logstd_old + (var_old + (mu_old - mu).square()) / (var * 2.0) - 0.5;
    kl.sum_dim_intlist(-1, false, Kind::Float).mean(Kind::Float)
}

/// Extra 1: the next learning rate from the KL d and the desired KL δ, within [1e-5, 1e-2]. rsl_rl's rule: / 1.5
/// when d > 2δ, x 1.5 when 0 < d < δ / 2; the TUM report's (3.6): / 2 when d > 1.5δ, x 2 when d < δ / 1.5.
fn adapt_lr(rule: &str, lr: f64, kl: f64, desired_kl: f64) -> f64 {
    let (down, up, factor) = match rule {
        "tum" => (kl > 1.5 * desired_kl, kl < desired_kl / 1.5, 2.0),
        _ => (kl > 2.0 * desired_kl, kl > 0.0 && kl < desired_kl / 2.0, 1.5),
    };
    if down {
        (lr / factor).max(1e-5)
    } else if up {
        (lr * factor).min(1e-2)
    } else {
        lr
    }
}
