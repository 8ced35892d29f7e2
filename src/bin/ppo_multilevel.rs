//! # ppo_multilevel: multilevel PPO (Dixit & Elsheikh) on the reservoir env, a diff of `ppo_continuous`
//!
//! The policy loss is estimated by multilevel Monte Carlo over a hierarchy of grids: many cheap
//! samples on coarse grids, a few on fine ones, and per level the difference to a synchronized
//! coarser sample of the same state and action, so the sum telescopes to the finest level's
//! loss: loss_MLMC = Σ_l mean[(L_a^l − L̃_a^{l−1}) + (L_v^l − L̃_v^{l−1}) + (L_e^l − L̃_e^{l−1})].
//! Each multilevel element is tagged `// Multilevel N: ...`:
//!   1. levels: a grid, T^l steps per env and minibatch size M^l each, coarse to fine, with the
//!      same number of minibatches on every level
//!   2. per level its own envs, rollout buffer and last observation
//!   3. the synchronized buffer: level l−1 put in level l's state (`map_from`), same action
//!   4. GAE on both buffers with the fine episode boundaries
//!   5. the MLMC loss: main and sync minibatches with identical indices, one optimizer step
//!   6. the paper's network: a shared tanh trunk, log std initialized to −2.9
//!
//! Run: `cargo run --release --bin ppo_multilevel -- --levels 32,64,128 --level-steps 80,10,5 --level-minibatch-size 400,50,25`
//! Writes `runs/<env-id>__<exp-name>__<seed>__<unix-time>/`: args.json, episodes.csv (the finest
//! level's episodes: their return is the recovery factor) and updates.csv (CleanRL's metric
//! names, plus ratio and KL columns per level for main and sync batches, and timing columns).

use clap::{ArgAction, Parser};
use envs::{Action, Env, RecordEpisodeStatistics, Space, VecEnv};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

#[rustfmt::skip]
#[derive(Parser, Debug, serde::Serialize)]
#[command(about = "Multilevel PPO on the ressim waterflooding env (Dixit & Elsheikh), after ppo_continuous", allow_negative_numbers = true)]
struct Args {
    /// the name of this experiment (part of the run directory's name)
    #[arg(long, default_value = "ppo_multilevel")] exp_name: String,
    /// seed of the experiment (envs get seed + i, torch gets seed)
    #[arg(long, default_value_t = 1)] seed: u64,
    /// ask libtorch for deterministic algorithms (`--torch-deterministic false` to allow others)
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] torch_deterministic: bool,
    /// use CUDA when a GPU is present (`--cuda false` for the CPU)
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] cuda: bool,
    /// libtorch intra-op threads (1 is fastest for these small networks on CPU)
    #[arg(long, default_value_t = 1)] torch_threads: i32,
    /// threads stepping the envs (default: one per core; results do not depend on it)
    #[arg(long, default_value_t = std::thread::available_parallelism().map_or(1, |n| n.get()))] env_threads: usize,
    /// save the weights to the run directory, then evaluate them for 10 episodes on the finest level
    #[arg(long)] save_model: bool,
    /// the reservoir configuration (ResSim-v1: the paper's 128x128; ResSim-case1: the reference's 61x61 test case)
    #[arg(long, default_value = "ResSim-v1")] env_id: String,
    /// Multilevel 1: grid size (cells per side) of each level, coarse to fine
    #[arg(long, value_delimiter = ',', default_value = "32,64,128")] levels: Vec<usize>,
    /// Multilevel 1: steps per env and iteration on each level (T^l)
    #[arg(long, value_delimiter = ',', default_value = "80,10,5")] level_steps: Vec<usize>,
    /// Multilevel 1: minibatch size on each level (M^l); N T^l / M^l must be the same on all levels
    #[arg(long, value_delimiter = ',', default_value = "400,50,25")] level_minibatch_size: Vec<usize>,
    /// the number of iterations (rollouts on every level, then the update)
    #[arg(long, default_value_t = 300)] num_iterations: usize,
    /// the learning rate of the optimizer
    #[arg(long, default_value_t = 1e-5)] learning_rate: f64,
    /// the number of parallel envs on every level (N)
    #[arg(long, default_value_t = 50)] num_envs: usize,
    /// anneal the learning rate linearly to 0 over the run
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] anneal_lr: bool,
    /// the discount factor gamma
    #[arg(long, default_value_t = 0.99)] gamma: f64,
    /// the lambda for the general advantage estimation
    #[arg(long, default_value_t = 0.95)] gae_lambda: f64,
    /// the K epochs to update the policy
    #[arg(long, default_value_t = 20)] update_epochs: usize,
    /// normalize the advantages per minibatch (main and sync batches separately)
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] norm_adv: bool,
    /// the surrogate clipping coefficient
    #[arg(long, default_value_t = 0.1)] clip_coef: f64,
    /// use a clipped loss for the value function (off: SB3's default, which the paper used)
    #[arg(long, value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] clip_vloss: bool,
    /// coefficient of the entropy bonus
    #[arg(long, default_value_t = 0.001)] ent_coef: f64,
    /// coefficient of the value loss ½(V − R)² (1.0 is SB3's 0.5 on its (V − R)², the paper's setting)
    #[arg(long, default_value_t = 1.0)] vf_coef: f64,
    /// the maximum norm for the gradient clipping
    #[arg(long, default_value_t = 0.5)] max_grad_norm: f64,
    /// the target KL divergence threshold, checked on the finest level's main batches (off: 0)
    #[arg(long, default_value_t = 0.05)] target_kl: f64,
    /// Multilevel 6: hidden layer sizes
    #[arg(long, value_delimiter = ',', default_value = "150,100,80")] hidden_sizes: Vec<i64>,
    /// Multilevel 6: one tanh trunk shared by policy and value (SB3's MlpPolicy); false: two separate MLPs
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] shared_trunk: bool,
    /// Multilevel 6: initial log standard deviation of the actions
    #[arg(long, default_value_t = -2.9)] log_std_init: f64,
    /// ppo_continuous's observation and reward normalization (one level only: envs of different levels would keep different statistics)
    #[arg(long, value_name = "BOOL", default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] normalize: bool,
}

/// Rejects flag combinations that cannot run, before anything is written.
fn check_args(a: &Args) -> Result<(), String> {
    let n_levels = a.levels.len();
    if a.level_steps.len() != n_levels || a.level_minibatch_size.len() != n_levels {
        return Err(format!("--levels, --level-steps and --level-minibatch-size need one value per level ({n_levels} levels)"));
    }
    if a.levels.windows(2).any(|w| w[0] >= w[1]) {
        return Err(format!("--levels must go from coarse to fine (growing grid sizes), got {:?}", a.levels));
    }
    if a.num_envs == 0 || a.update_epochs == 0 || a.num_iterations == 0 || a.level_steps.contains(&0) || a.level_minibatch_size.contains(&0)
    {
        return Err("--num-envs, --num-iterations, --update-epochs, --level-steps and --level-minibatch-size must be positive".into());
    }
    // Multilevel 1: one minibatch index drives every level, so all levels have as many minibatches
    let minibatches: Vec<String> =
        (0..n_levels).map(|l| format!("{}/{}", a.num_envs * a.level_steps[l], a.level_minibatch_size[l])).collect();
    let counts: Vec<usize> = (0..n_levels).map(|l| a.num_envs * a.level_steps[l] / a.level_minibatch_size[l]).collect();
    if (0..n_levels).any(|l| !(a.num_envs * a.level_steps[l]).is_multiple_of(a.level_minibatch_size[l]) || counts[l] != counts[0]) {
        return Err(format!("every level needs the same whole number of minibatches N T^l / M^l, got {}", minibatches.join(", ")));
    }
    if a.normalize && n_levels > 1 {
        return Err("--normalize works with one level only (each env would keep its own statistics)".into());
    }
    if a.hidden_sizes.is_empty() || a.hidden_sizes.iter().any(|&h| h < 1) {
        return Err(format!("--hidden-sizes must be positive, got {:?}", a.hidden_sizes));
    }
    if a.learning_rate.is_nan() || a.learning_rate <= 0.0 {
        return Err(format!("--learning-rate must be positive, got {}", a.learning_rate));
    }
    if a.torch_threads < 1 || a.env_threads < 1 {
        return Err("--torch-threads and --env-threads must be at least 1".into());
    }
    Ok(())
}

/// `ppo_continuous`'s `make_env` on one level's grid. The reservoir's observations are already
/// scaled by the env (saturations in [0, 1], pressures to [−1, 1]) and its rewards are recovery
/// fractions, so by default only the actions are clipped (to [0.001, 1], as SB3 does).
type EnvAndStats = (Box<dyn Env<Obs = f32>>, Option<envs::ObsStats>);
fn make_env(args: &Args, nx: usize, obs_rms: Option<envs::RunningMeanStd>) -> Result<EnvAndStats, envs::EnvError> {
    // Continuous 5: clip actions to the valid range for the env
    let env = envs::ClipAction::new(RecordEpisodeStatistics::new(envs::ressim::make(&args.env_id, Some(nx))?));
    if !args.normalize {
        return Ok((Box::new(env), None));
    }
    let env = envs::NormalizeObservation::new(env).frozen_with(obs_rms); // Continuous 6: observation normalization
    let stats = env.stats();
    // Continuous 7: observation clipping (±10)
    let env = envs::TransformObservation::new(env, |obs: &mut [f32]| obs.iter_mut().for_each(|o| *o = o.clamp(-10.0, 10.0)));
    let env = envs::NormalizeReward::new(env, args.gamma); // Continuous 8: reward scaling (divide by std of discounted return)
    let env = envs::TransformReward::new(env, |r: f64| r.clamp(-10.0, 10.0)); // Continuous 9: reward clipping (±10)
    Ok((Box::new(env), Some(stats)))
}

/// The `ResSim` inside an env stack, for `map_from`.
fn ressim(env: &mut Box<dyn Env<Obs = f32>>) -> &mut envs::ressim::ResSim {
    env.unwrapped().and_then(|e| e.downcast_mut()).expect("every env here is a ResSim")
}

/// Multilevel 3: puts env e of `coarse` in the state of env e of `fine` (the reference's
/// `map_from`: block means of saturation and pressure, same field and step).
fn map_envs(coarse: &mut VecEnv<f32>, fine: &mut VecEnv<f32>, num_envs: usize) {
    let d = coarse.obs_dim;
    for e in 0..num_envs {
        let to = ressim(coarse.env_mut(e));
        to.map_from(ressim(fine.env_mut(e)));
        let obs: Vec<f32> = to.obs.iter().map(|&v| v as f32).collect();
        coarse.obs[e * d..(e + 1) * d].copy_from_slice(&obs);
    }
}

/// Core 2: orthogonal weight init with the given gain, zero biases.
fn layer_init(p: nn::Path, in_dim: i64, out_dim: i64, std: f64) -> nn::Linear {
    let config = nn::LinearConfig { ws_init: nn::Init::Orthogonal { gain: std }, bs_init: Some(nn::Init::Const(0.0)), bias: true };
    nn::linear(p, in_dim, out_dim, config)
}

/// tanh layers of the given sizes (names 0, 2, 4, ... as in a PyTorch Sequential), then an output
/// layer with gain `out_std` when `out` is given.
fn mlp(p: &nn::Path, sizes: &[i64], out: Option<(i64, f64)>) -> nn::Sequential {
    let mut seq = nn::seq();
    for (i, w) in sizes.windows(2).enumerate() {
        seq = seq.add(layer_init(p / (2 * i), w[0], w[1], 2f64.sqrt())).add_fn(|x| x.tanh());
    }
    match out {
        Some((n, std)) => seq.add(layer_init(p / (2 * sizes.len() - 2), sizes[sizes.len() - 1], n, std)),
        None => seq,
    }
}

// Core 13 / Continuous 4: separate policy and value MLPs, or Multilevel 6: a shared trunk
struct Agent {
    trunk: nn::Sequential,
    critic: nn::Sequential,
    actor_mean: nn::Sequential,
    actor_logstd: Tensor,
    obs_rms: Tensor, // observation statistics (mean, var, count), saved with the weights (cleanrl#425)
}

impl Agent {
    fn new(p: &nn::Path, obs_dim: i64, n_actions: i64, args: &Args) -> Agent {
        let sizes = [&[obs_dim][..], &args.hidden_sizes].concat();
        let last = sizes[sizes.len() - 1];
        let (trunk, critic, actor) = if args.shared_trunk {
            // Multilevel 6: SB3's MlpPolicy with net_arch [150, 100, 80]: one trunk, two linear heads
            let trunk = mlp(&(p / "trunk"), &sizes, None);
            (trunk, mlp(&(p / "critic"), &[last], Some((1, 1.0))), mlp(&(p / "actor_mean"), &[last], Some((n_actions, 0.01))))
        } else {
            (nn::seq(), mlp(&(p / "critic"), &sizes, Some((1, 1.0))), mlp(&(p / "actor_mean"), &sizes, Some((n_actions, 0.01))))
        };
        // Continuous 2: state-independent log std (Multilevel 6: initialized to --log-std-init)
        let actor_logstd = p.var("actor_logstd", &[1, n_actions], nn::Init::Const(args.log_std_init));
        let obs_rms = p.add("obs_rms", Tensor::zeros([2 * obs_dim + 1], (Kind::Double, p.device())), false);
        Agent { trunk, critic, actor_mean: actor, actor_logstd, obs_rms }
    }

    fn get_value(&self, x: &Tensor) -> Tensor {
        self.critic.forward(&self.trunk.forward(x))
    }

    /// Samples an action when none is given; returns (action, log-prob, entropy, value).
    fn get_action_and_value(&self, x: &Tensor, action: Option<&Tensor>) -> (Tensor, Tensor, Tensor, Tensor) {
        let h = self.trunk.forward(x);
        // Continuous 1: Normal action distribution
        let action_mean = self.actor_mean.forward(&h);
        let action_logstd = self.actor_logstd.expand_as(&action_mean);
        let action_std = action_logstd.exp();
        let action = match action {
            Some(a) => a.shallow_clone(),
            None => &action_mean + &action_std * action_mean.randn_like(),
        };
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        let log_prob: Tensor = -(&action - &action_mean).square() / (2.0 * action_std.square()) - &action_logstd - half_log_2pi;
        let entropy = action_logstd + (0.5 + half_log_2pi);
        // Continuous 3: independent action components (log-probs and entropies summed)
        (action, log_prob.sum_dim_intlist(1, false, Kind::Float), entropy.sum_dim_intlist(1, false, Kind::Float), self.critic.forward(&h))
    }
}

/// One level's rollout, flattened step-major (row step * num_envs + env), with its GAE results.
struct Batch {
    obs: Tensor,
    actions: Tensor,
    logprobs: Tensor,
    values: Tensor,
    advantages: Tensor,
    returns: Tensor,
}

/// Core 5: GAE, as a plain loop over host copies; `dones[i]` says the episode ended before row
/// i, `next_done`/`next_values` describe the step after the last row.
fn gae(args: &Args, rewards: &[f32], dones: &[f32], values: &[f32], next_done: &[f32], next_values: &[f32]) -> Vec<f32> {
    let (ne, num_steps) = (args.num_envs, rewards.len() / args.num_envs);
    let mut adv = vec![0f32; rewards.len()];
    let (gamma, lambda) = (args.gamma as f32, args.gae_lambda as f32);
    for e in 0..ne {
        let mut lastgaelam = 0f32;
        for s in (0..num_steps).rev() {
            let i = s * ne + e;
            // bootstrap from the next value unless the episode ended before the next step
            let (nextnonterminal, nextvalues) =
                if s == num_steps - 1 { (1.0 - next_done[e], next_values[e]) } else { (1.0 - dones[i + ne], values[i + ne]) };
            let delta = rewards[i] + gamma * nextvalues * nextnonterminal - values[i];
            lastgaelam = delta + gamma * lambda * nextnonterminal * lastgaelam;
            adv[i] = lastgaelam;
        }
    }
    adv
}

/// The losses of one minibatch (rows `mb_inds` of `b`) and their debug values.
struct MinibatchLoss {
    loss: Tensor,
    pg_loss: Tensor,
    v_loss: Tensor,
    entropy_loss: Tensor,
    old_approx_kl: Tensor,
    approx_kl: Tensor,
    clipfrac: Tensor,
    max_ratio_dev: Tensor,
}

fn minibatch_loss(agent: &Agent, args: &Args, b: &Batch, mb_inds: &Tensor) -> MinibatchLoss {
    let mb_obs = b.obs.index_select(0, mb_inds);
    let mb_actions = b.actions.index_select(0, mb_inds);
    let (_, newlogprob, entropy, newvalue) = agent.get_action_and_value(&mb_obs, Some(&mb_actions));
    let logratio = &newlogprob - b.logprobs.index_select(0, mb_inds);
    let ratio = logratio.exp();

    // Core 12: debug variables
    let (old_approx_kl, approx_kl, clipfrac, max_ratio_dev) = tch::no_grad(|| {
        let old_approx_kl = (-&logratio).mean(Kind::Float);
        let approx_kl = ((&ratio - 1.0) - &logratio).mean(Kind::Float);
        let clipfrac = (&ratio - 1.0).abs().gt(args.clip_coef).to_kind(Kind::Float).mean(Kind::Float);
        (old_approx_kl, approx_kl, clipfrac, (&ratio - 1.0).abs().max())
    });

    let mut mb_advantages = b.advantages.index_select(0, mb_inds);
    if args.norm_adv {
        // Core 7: per-minibatch advantage normalization
        mb_advantages = (&mb_advantages - mb_advantages.mean(Kind::Float)) / (mb_advantages.std(true) + 1e-8);
    }

    // Core 8: clipped surrogate objective
    let pg_loss1 = -&mb_advantages * &ratio;
    let pg_loss2 = -&mb_advantages * ratio.clamp(1.0 - args.clip_coef, 1.0 + args.clip_coef);
    let pg_loss = pg_loss1.max_other(&pg_loss2).mean(Kind::Float);

    let newvalue = newvalue.view([-1]);
    let mb_returns = b.returns.index_select(0, mb_inds);
    let v_loss = if args.clip_vloss {
        // Core 9: value-function loss clipping
        let mb_values = b.values.index_select(0, mb_inds);
        let v_loss_unclipped = (&newvalue - &mb_returns).square();
        let v_clipped = &mb_values + (&newvalue - &mb_values).clamp(-args.clip_coef, args.clip_coef);
        let v_loss_clipped = (v_clipped - &mb_returns).square();
        0.5 * v_loss_unclipped.max_other(&v_loss_clipped).mean(Kind::Float)
    } else {
        0.5 * (&newvalue - &mb_returns).square().mean(Kind::Float)
    };

    // Core 10: one loss with an entropy bonus
    let entropy_loss = entropy.mean(Kind::Float);
    let loss: Tensor = &pg_loss - &entropy_loss * args.ent_coef + &v_loss * args.vf_coef;
    MinibatchLoss { loss, pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, clipfrac, max_ratio_dev }
}

fn main() {
    let args = Args::parse();
    let start_unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let run_name = format!("{}__{}__{}__{}", args.env_id, args.exp_name, args.seed, start_unix);
    // Bad input: one line naming the problem, exit code 2, nothing written.
    check_args(&args).unwrap_or_else(|e| fail(2, e));
    let n_levels = args.levels.len();
    // Multilevel 2: per level its own envs; for l > 0 also envs on level l−1 for the sync samples
    let make_vec = |nx: usize| -> Result<(VecEnv<f32>, Vec<Option<envs::ObsStats>>), String> {
        let (env_fns, stats): (Vec<_>, Vec<_>) = (0..args.num_envs)
            .map(|_| make_env(&args, nx, None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?
            .into_iter()
            .unzip();
        Ok((VecEnv::new(env_fns).with_threads(args.env_threads), stats))
    };
    let made: Result<Vec<_>, String> = (0..n_levels).map(|l| make_vec(args.levels[l])).collect();
    let (mut level_envs, mut obs_stats): (Vec<VecEnv<f32>>, Vec<_>) = made.unwrap_or_else(|e| fail(2, e)).into_iter().unzip();
    let mut sync_envs: Vec<VecEnv<f32>> = (1..n_levels).map(|l| make_vec(args.levels[l - 1]).unwrap_or_else(|e| fail(2, e)).0).collect();
    let obs_stats = obs_stats.pop().expect("a level");
    let steps_per_iteration: usize = args.level_steps.iter().map(|t| t * args.num_envs).sum();

    // seeding
    tch::manual_seed(args.seed as i64);
    tch::set_num_threads(args.torch_threads);
    tch::Cuda::cudnn_set_benchmark(!args.torch_deterministic);
    let device = if args.cuda { Device::cuda_if_available() } else { Device::Cpu };

    // env setup: Core 1: vectorized architecture
    let (obs_dim, n_actions) = match (level_envs[0].single_observation_space(), level_envs[0].single_action_space()) {
        (Space::Box { shape, .. }, Space::Box { shape: a, .. }) if shape.len() == 1 && a.len() == 1 => (shape[0] as i64, a[0] as i64),
        (o, a) => fail(2, format!("ppo_multilevel needs 1-D Box observation and action spaces, {} has {o:?} and {a:?}", args.env_id)),
    };
    let vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), obs_dim, n_actions, &args);
    // Core 3: Adam with epsilon 1e-5
    let mut optimizer = FlatAdam::new(&vs, 1e-5);

    let run_dir = std::path::Path::new("runs").join(&run_name);
    let mut log = RunLog::create(&run_dir, &args, (args.num_iterations * steps_per_iteration) as u64)
        .unwrap_or_else(|e| fail(1, format!("cannot write {}: {e}", run_dir.display())));

    // start the game: every level's envs from the same seeds
    let (n, ne) = (args.num_envs as i64, args.num_envs);
    let mut global_step = 0u64;
    let start_time = Instant::now();
    for envs in level_envs.iter_mut().chain(sync_envs.iter_mut()) {
        envs.reset(Some(args.seed));
    }
    let mut next_done = vec![vec![0f32; ne]; n_levels];
    let mut action_buf = vec![0f32; ne * n_actions as usize];

    for iteration in 1..=args.num_iterations {
        let (collect_start, mut env_seconds) = (Instant::now(), 0.0);
        // Core 4: learning-rate annealing, linearly to 0
        let frac = if args.anneal_lr { 1.0 - (iteration as f64 - 1.0) / args.num_iterations as f64 } else { 1.0 };
        let lr = frac * args.learning_rate;

        // Multilevel 2: levels in ascending order, each continuing its own episodes from its own last
        // observation (the reference carries the last observation over from the previous level, so
        // each level's first transition paired another grid's observation with this one's state)
        let (mut main, mut sync): (Vec<Batch>, Vec<Option<Batch>>) = (Vec::new(), Vec::new());
        let (mut v_fine, mut ret_fine) = (Vec::new(), Vec::new());
        for l in 0..n_levels {
            let num_steps = args.level_steps[l];
            let envs = &mut level_envs[l];
            let mut sync_envs = if l > 0 { Some(&mut sync_envs[l - 1]) } else { None };
            // storage: each step's tensors stay on the device and are joined after the rollout;
            // rewards and dones are made and used on the host (env, GAE), so they stay there
            let mut rewards = vec![0f32; ne * num_steps];
            let mut dones = vec![0f32; ne * num_steps];
            let mut sync_rewards = vec![0f32; ne * num_steps];
            let (mut obs, mut actions, mut logprobs, mut values) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let (mut s_obs, mut s_logprobs, mut s_values) = (Vec::new(), Vec::new(), Vec::new());
            for step in 0..num_steps {
                global_step += ne as u64;
                let next_obs = Tensor::from_slice(&envs.obs).view([n, obs_dim]).to_device(device);
                dones[step * ne..(step + 1) * ne].copy_from_slice(&next_done[l]);
                let (action, logprob, _, value) = tch::no_grad(|| agent.get_action_and_value(&next_obs, None));
                action.to_device(Device::Cpu).copy_data(&mut action_buf, ne * n_actions as usize);
                if let Some(coarse) = sync_envs.as_deref_mut() {
                    // Multilevel 3: level l−1 in this level's state, valued and stepped with the same
                    // action; V~ and log π~ come from a forward pass that samples nothing (the
                    // reference drew an extra action for V~)
                    let env_start = Instant::now();
                    map_envs(coarse, envs, ne);
                    env_seconds += env_start.elapsed().as_secs_f64();
                    let coarse_obs = Tensor::from_slice(&coarse.obs).view([n, obs_dim]).to_device(device);
                    let (_, s_logprob, _, s_value) = tch::no_grad(|| agent.get_action_and_value(&coarse_obs, Some(&action)));
                    let env_start = Instant::now();
                    coarse.step(Action::Continuous(&action_buf));
                    env_seconds += env_start.elapsed().as_secs_f64();
                    sync_rewards[step * ne..(step + 1) * ne].copy_from_slice(&coarse.rewards);
                    s_obs.push(coarse_obs);
                    s_logprobs.push(s_logprob);
                    s_values.push(s_value.view([n]));
                }
                obs.push(next_obs);
                actions.push(action);
                logprobs.push(logprob);
                values.push(value.view([n]));

                let env_start = Instant::now();
                envs.step(Action::Continuous(&action_buf)); // Continuous 5: the unclipped sample is stored
                env_seconds += env_start.elapsed().as_secs_f64();
                rewards[step * ne..(step + 1) * ne].copy_from_slice(&envs.rewards);
                // termination and truncation both end the episode (ressim has no truncation)
                for (d, (term, trunc)) in next_done[l].iter_mut().zip(envs.terminated.iter().zip(&envs.truncated)) {
                    *d = (*term || *trunc) as u8 as f32;
                }
                if l == n_levels - 1 {
                    for ep in &envs.finished {
                        log.episode(global_step, ep.r, ep.l);
                    }
                }
            }

            // the flattened batch, step-major (row step * num_envs + env), as CleanRL reshapes it
            let host = |x: &Tensor| Vec::<f32>::try_from(x.to_device(Device::Cpu)).unwrap_or_else(|e| fail(1, e));
            let next_obs = Tensor::from_slice(&envs.obs).view([n, obs_dim]).to_device(device);
            let next_value = tch::no_grad(|| agent.get_value(&next_obs)).view([-1]);
            let b_values = Tensor::cat(&values, 0);
            let v = host(&b_values);
            let adv = gae(&args, &rewards, &dones, &v, &next_done[l], &host(&next_value));
            let ret: Vec<f32> = adv.iter().zip(&v).map(|(a, v)| a + v).collect();
            let batch = Batch {
                obs: Tensor::cat(&obs, 0),
                actions: Tensor::cat(&actions, 0),
                logprobs: Tensor::cat(&logprobs, 0),
                values: b_values,
                advantages: Tensor::from_slice(&adv).to_device(device),
                returns: Tensor::from_slice(&ret).to_device(device),
            };
            sync.push(sync_envs.map(|coarse| {
                // Multilevel 4: GAE on the sync samples with the fine episode boundaries,
                // bootstrapped from level l−1 put in the fine state after the last step
                map_envs(coarse, envs, ne);
                let next_obs = Tensor::from_slice(&coarse.obs).view([n, obs_dim]).to_device(device);
                let next_value = tch::no_grad(|| agent.get_value(&next_obs)).view([-1]);
                let s_values = Tensor::cat(&s_values, 0);
                let sv = host(&s_values);
                let adv = gae(&args, &sync_rewards, &dones, &sv, &next_done[l], &host(&next_value));
                let ret: Vec<f32> = adv.iter().zip(&sv).map(|(a, v)| a + v).collect();
                Batch {
                    obs: Tensor::cat(&s_obs, 0),
                    actions: batch.actions.shallow_clone(),
                    logprobs: Tensor::cat(&s_logprobs, 0),
                    values: s_values,
                    advantages: Tensor::from_slice(&adv).to_device(device),
                    returns: Tensor::from_slice(&ret).to_device(device),
                }
            }));
            main.push(batch);
            (v_fine, ret_fine) = (v, ret);
        }
        let collection_seconds = collect_start.elapsed().as_secs_f64();

        // Optimizing the policy and value network
        let learn_start = Instant::now();
        let num_minibatches = args.num_envs * args.level_steps[0] / args.level_minibatch_size[0];
        let mut clipfracs = Vec::new();
        // per level: the first minibatch's ratio deviation and clip fraction, main then sync
        let mut first_mb: Vec<(Tensor, Tensor)> = Vec::new();
        let mut last = None;
        let mut last_kl: Vec<Tensor> = Vec::new();
        let mut epochs_run = 0;
        for epoch in 0..args.update_epochs {
            epochs_run += 1;
            // Core 6: shuffled mini-batches that cover the whole batch each epoch, one
            // permutation per level for its main and sync batches alike
            let perms: Vec<Tensor> = main.iter().map(|b| Tensor::randperm(b.obs.size()[0], (Kind::Int64, device))).collect();
            for mb in 0..num_minibatches {
                // Multilevel 5: loss_MLMC = Σ_l [L(main batch of l) − L(sync batch of l−1)], same indices
                let (mut losses, mut terms, mut kls) = (Vec::new(), Vec::new(), Vec::new());
                for l in 0..n_levels {
                    let size = args.level_minibatch_size[l] as i64;
                    let mb_inds = perms[l].narrow(0, mb as i64 * size, size);
                    let m = minibatch_loss(&agent, &args, &main[l], &mb_inds);
                    terms.push(m.loss.shallow_clone());
                    let s = sync[l].as_ref().map(|b| minibatch_loss(&agent, &args, b, &mb_inds));
                    terms.extend(s.iter().map(|s| -&s.loss));
                    if epoch == 0 && mb == 0 {
                        // the policy has not moved yet: the ratio must be exactly 1 here
                        first_mb.push((m.max_ratio_dev.shallow_clone(), m.clipfrac.shallow_clone()));
                        first_mb.extend(s.iter().map(|s| (s.max_ratio_dev.shallow_clone(), s.clipfrac.shallow_clone())));
                    }
                    kls.push(m.approx_kl.shallow_clone());
                    kls.extend(s.iter().map(|s| s.approx_kl.shallow_clone()));
                    if l == n_levels - 1 {
                        clipfracs.push(m.clipfrac.shallow_clone());
                    }
                    losses.push(m);
                }
                let fine = losses.pop().expect("a level");
                let loss = Tensor::stack(&terms, 0).sum(Kind::Float);

                // Core 10: one loss, one optimizer
                optimizer.zero_grad();
                loss.backward();
                let grad_norm = optimizer.clip_and_step(lr, args.max_grad_norm);
                last = Some((fine.pg_loss, fine.v_loss, fine.entropy_loss, fine.old_approx_kl, fine.approx_kl, grad_norm, loss));
                last_kl = kls;
            }
            // Aux 3: early stopping once the KL of the last minibatch passes the target (the
            // finest level's main batch: its data is the real environment)
            if let (true, Some(l)) = (args.target_kl > 0.0, &last) {
                if f64::try_from(&l.4).unwrap_or(f64::NAN) > args.target_kl {
                    break;
                }
            }
        }
        let Some((pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, grad_norm, loss)) = last else {
            unreachable!("at least one minibatch")
        };

        // Core 12: debug variables, logged under CleanRL's names (for the finest level's main
        // batches), plus per-level ratio and KL columns for main and sync batches, and timing
        let scalar = |x: &Tensor| f64::try_from(x).unwrap_or(f64::NAN);
        let sps = (global_step as f64 / start_time.elapsed().as_secs_f64()).floor();
        let first_dev = first_mb.iter().map(|(d, _)| scalar(d)).fold(0.0, f64::max);
        let first_clip = first_mb.iter().map(|(_, c)| scalar(c)).fold(0.0, f64::max);
        let mut row = vec![
            ("iteration".to_string(), iteration as f64),
            ("global_step".to_string(), global_step as f64),
            ("charts/learning_rate".to_string(), lr),
            ("losses/value_loss".to_string(), scalar(&v_loss)),
            ("losses/policy_loss".to_string(), scalar(&pg_loss)),
            ("losses/entropy".to_string(), scalar(&entropy_loss)),
            ("losses/old_approx_kl".to_string(), scalar(&old_approx_kl)),
            ("losses/approx_kl".to_string(), scalar(&approx_kl)),
            ("losses/clipfrac".to_string(), scalar(&Tensor::stack(&clipfracs, 0).mean(Kind::Float))),
            ("losses/explained_variance".to_string(), explained_variance(&v_fine, &ret_fine)),
            ("charts/SPS".to_string(), sps),
            ("debug/first_mb_max_ratio_dev".to_string(), first_dev),
            ("debug/first_mb_clipfrac".to_string(), first_clip),
            ("debug/unclipped_grad_norm".to_string(), scalar(&grad_norm)),
            ("debug/epochs".to_string(), epochs_run as f64),
            ("timing/collection_seconds".to_string(), collection_seconds),
            ("timing/env_seconds".to_string(), env_seconds),
            ("timing/learning_seconds".to_string(), learn_start.elapsed().as_secs_f64()),
        ];
        // per level l (1 = coarsest): main batches, and for l > 1 the sync batches on level l − 1
        let names: Vec<String> =
            (1..=n_levels).flat_map(|l| std::iter::once(format!("l{l}")).chain((l > 1).then(|| format!("l{l}_sync")))).collect();
        for (name, ((dev, clip), kl)) in names.iter().zip(first_mb.iter().zip(&last_kl)) {
            row.push((format!("debug/{name}_first_mb_max_ratio_dev"), scalar(dev)));
            row.push((format!("debug/{name}_first_mb_clipfrac"), scalar(clip)));
            row.push((format!("losses/{name}_approx_kl"), scalar(kl)));
        }
        let row: Vec<(&str, f64)> = row.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        log.update(&row, args.num_iterations).unwrap_or_else(|e| fail(1, format!("cannot write {}: {e}", run_dir.display())));
        if !scalar(&loss).is_finite() {
            let dir = run_dir.display();
            fail(1, format!("the loss became non-finite at update {iteration}; metrics so far are in {dir}; try a lower --learning-rate"));
        }
    }

    if args.save_model {
        if let Some(stats) = &obs_stats[0] {
            let rms = stats.lock().clone(); // env 0's observation statistics go into the model file
            tch::no_grad(|| agent.obs_rms.shallow_clone().copy_(&Tensor::from_slice(&[rms.mean, rms.var, vec![rms.count]].concat())));
        }
        let model_path = run_dir.join(format!("{}.safetensors", args.exp_name));
        // write to a temporary file, then rename: a crash never leaves a half-written model
        let tmp_path = run_dir.join(format!("{}.tmp.safetensors", args.exp_name));
        vs.save(&tmp_path)
            .and_then(|()| Ok(std::fs::rename(&tmp_path, &model_path)?))
            .unwrap_or_else(|e| fail(1, format!("cannot save {}: {e}", model_path.display())));
        println!("model saved to {}", model_path.display());
        let returns = evaluate(&model_path, &args, obs_dim, n_actions, device, 10).unwrap_or_else(|e| fail(1, e));
        log.eval(&returns).unwrap_or_else(|e| fail(1, format!("cannot write eval.csv: {e}")));
        println!("eval: mean episodic return {:.1} over {} episodes", returns.iter().sum::<f64>() / returns.len() as f64, returns.len());
    }
}

/// 1 - Var[returns - values] / Var[returns] (population variances; NaN when returns are constant).
fn explained_variance(y_pred: &[f32], y_true: &[f32]) -> f64 {
    let var = |xs: &mut dyn Iterator<Item = f64>| {
        let xs: Vec<f64> = xs.collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64
    };
    let var_y = var(&mut y_true.iter().map(|&y| y as f64));
    1.0 - var(&mut y_true.iter().zip(y_pred).map(|(&y, &p)| (y - p) as f64)) / var_y
    // 0/0 = NaN, as numpy
}

/// Adam (torch.optim.Adam's update: betas 0.9 and 0.999, no weight decay) over all parameters
/// as one flat vector: each parameter keeps its shape and name but its storage becomes a slice
/// of `flat`. For networks this small libtorch's per-call overhead dominates, and a handful of
/// large ops replace ~200 tiny per-parameter ones (about a quarter of the update's time).
struct FlatAdam {
    params: Vec<Tensor>,
    flat: Tensor,
    m: Tensor,
    v: Tensor,
    t: i32,
    eps: f64,
}

impl FlatAdam {
    fn new(vs: &nn::VarStore, eps: f64) -> FlatAdam {
        let mut params = vs.trainable_variables();
        tch::no_grad(|| {
            let flat = Tensor::cat(&params.iter().map(|p| p.flatten(0, -1)).collect::<Vec<_>>(), 0);
            let mut offset = 0;
            for p in params.iter_mut() {
                let (numel, shape) = (p.numel() as i64, p.size());
                p.set_data(&flat.narrow(0, offset, numel).view(shape.as_slice()));
                offset += numel;
            }
            FlatAdam { m: flat.zeros_like(), v: flat.zeros_like(), flat, params, t: 0, eps }
        })
    }

    fn zero_grad(&mut self) {
        for p in self.params.iter_mut() {
            p.zero_grad();
        }
    }

    /// Clips the gradients' global norm to `max_norm`, then takes one Adam step with learning
    /// rate `lr`. Returns the norm before clipping, left on the device (no sync per minibatch).
    fn clip_and_step(&mut self, lr: f64, max_norm: f64) -> Tensor {
        tch::no_grad(|| {
            let grad = Tensor::cat(&self.params.iter().map(|p| p.grad().view([-1])).collect::<Vec<_>>(), 0);
            // Core 11: global gradient-norm clipping
            let norm = grad.norm();
            let grad = grad * (max_norm / (&norm + 1e-6)).clamp_max(1.0);
            let (beta1, beta2) = (0.9f64, 0.999f64);
            self.t += 1;
            let _ = self.m.lerp_(&grad, 1.0 - beta1); // m = beta1 m + (1 - beta1) g
            let _ = self.v.lerp_(&grad.square(), 1.0 - beta2); // v = beta2 v + (1 - beta2) g^2
            let (bias_correction1, bias_correction2) = (1.0 - beta1.powi(self.t), 1.0 - beta2.powi(self.t));
            let denom = self.v.sqrt() / bias_correction2.sqrt() + self.eps;
            let _ = self.flat.g_sub_(&(&self.m / denom * (lr / bias_correction1)));
            norm
        })
    }
}

/// Loads the saved weights into a fresh agent and plays `episodes` episodes with sampled actions
/// on the finest level.
fn evaluate(
    path: &std::path::Path,
    args: &Args,
    obs_dim: i64,
    n_actions: i64,
    device: Device,
    episodes: usize,
) -> Result<Vec<f64>, String> {
    let mut vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), obs_dim, n_actions, args);
    vs.load(path).map_err(|e| format!("cannot load {}: {e}", path.display()))?;
    let (v, d) = (Vec::<f64>::try_from(agent.obs_rms.to_device(Device::Cpu)).map_err(|e| e.to_string())?, obs_dim as usize);
    let rms = envs::RunningMeanStd { mean: v[..d].to_vec(), var: v[d..2 * d].to_vec(), count: v[2 * d] };
    let finest = args.levels[args.levels.len() - 1];
    let mut env = VecEnv::new(vec![make_env(args, finest, Some(rms)).map_err(|e| e.to_string())?.0]);
    env.reset(Some(args.seed));
    let mut returns = Vec::new();
    let mut action = vec![0f32; n_actions as usize];
    while returns.len() < episodes {
        let obs = Tensor::from_slice(&env.obs).view([1, obs_dim]).to_device(device);
        let (a, _, _, _) = tch::no_grad(|| agent.get_action_and_value(&obs, None));
        a.to_device(Device::Cpu).copy_data(&mut action, n_actions as usize);
        env.step(Action::Continuous(&action));
        returns.extend(env.finished.iter().map(|ep| ep.r));
    }
    Ok(returns)
}

// ---- logging: CSV files in the run directory, flushed every update; progress on the console ----

struct RunLog {
    dir: std::path::PathBuf,
    episodes: csv::Writer<std::fs::File>,
    updates: csv::Writer<std::fs::File>,
    rows: usize,
    recent: std::collections::VecDeque<f64>,
    /// a progress bar on a terminal; a plain line every 2% of the run otherwise
    bar: Option<ProgressBar>,
}

impl RunLog {
    fn create(dir: &std::path::Path, args: &Args, total_steps: u64) -> std::io::Result<RunLog> {
        std::fs::create_dir_all(dir)?;
        std::fs::write(dir.join("args.json"), serde_json::to_string_pretty(args)? + "\n")?;
        let mut episodes = csv::Writer::from_path(dir.join("episodes.csv"))?;
        episodes.write_record(["global_step", "charts/episodic_return", "charts/episodic_length"])?;
        let updates = csv::Writer::from_path(dir.join("updates.csv"))?;
        let bar = std::io::stderr().is_terminal().then(|| {
            let style = ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {pos}/{len} steps {msg}").expect("valid template");
            ProgressBar::new(total_steps).with_style(style)
        });
        Ok(RunLog { dir: dir.to_path_buf(), episodes, updates, rows: 0, recent: Default::default(), bar })
    }

    fn episode(&mut self, global_step: u64, r: f64, l: u64) {
        // a failed write surfaces at the next update's flush
        let _ = self.episodes.write_record(&[global_step.to_string(), r.to_string(), l.to_string()]);
        self.recent.push_back(r);
        if self.recent.len() > 20 {
            self.recent.pop_front();
        }
    }

    /// Appends one row of (column, value) pairs (the header first), flushes, shows progress.
    fn update(&mut self, row: &[(&str, f64)], num_iterations: usize) -> std::io::Result<()> {
        if self.rows == 0 {
            self.updates.write_record(row.iter().map(|(name, _)| name))?;
        }
        self.updates.write_record(row.iter().map(|(_, value)| value.to_string()))?;
        self.rows += 1;
        self.updates.flush()?;
        self.episodes.flush()?;
        let get = |name: &str| row.iter().find(|(n, _)| *n == name).map_or(f64::NAN, |(_, v)| *v);
        let mean = self.recent.iter().sum::<f64>() / self.recent.len() as f64; // NaN before any episode
        let msg = format!("SPS {}, return (last 20) {mean:.1}", get("charts/SPS"));
        match &self.bar {
            Some(bar) => {
                bar.set_position(get("global_step") as u64);
                bar.set_message(msg);
            }
            None if self.rows.is_multiple_of(num_iterations.div_ceil(50)) || self.rows == num_iterations => {
                println!("update {}/{num_iterations}, global_step {}, {msg}", self.rows, get("global_step"));
            }
            None => {}
        }
        Ok(())
    }

    fn eval(&mut self, returns: &[f64]) -> std::io::Result<()> {
        let mut w = csv::Writer::from_path(self.dir.join("eval.csv"))?;
        w.write_record(["episode", "eval/episodic_return"])?;
        for (i, r) in returns.iter().enumerate() {
            w.write_record(&[i.to_string(), r.to_string()])?;
        }
        w.flush()
    }
}

/// Prints one line and exits: 2 for bad input, 1 for failures while running.
fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(code)
}
