//! # ppo_multilevel: multilevel PPO (Dixit & Elsheikh) on the reservoir env, a diff of `ppo_continuous`
//!
//! The policy loss is estimated by multilevel Monte Carlo over a hierarchy of grids: many cheap
//! samples on coarse grids, a few on fine ones, and per level l the difference L^l to a synchronized coarser sample
//! of the same state and action, whose sum telescopes to the finest level's loss in expectation (not sample by
//! sample: sync states are mapped from fine trajectories, each batch normalizes its own advantages):
//! loss_MLMC = Σ_l L^l, L^l = mean[(L_a^l − L̃_a^{l−1}) + (L_v^l − L̃_v^{l−1}) + (L_e^l − L̃_e^{l−1})].
//! Each multilevel element is tagged `// Multilevel N: ...`:
//!   1. levels: a grid, T^l steps per env and minibatch size M^l each, coarse to fine, with the
//!      same number of minibatches on every level
//!   2. per level its own envs, rollout buffer and last observation
//!   3. the synchronized buffer: level l−1 put in level l's state (`map_from`), same action
//!   4. GAE on both buffers with the fine episode boundaries
//!   5. the MLMC loss: main and sync minibatches with identical indices, one optimizer step
//!   6. the paper's network: a shared tanh trunk, log std initialized to −2.9
//!   7. the paper's early stop (SB3's): every level's main minibatch against 1.5 × target_kl, before its step
//!
//! This file restructures `ppo_continuous.rs` rather than adding to it: which of its parts stand for which of the
//! parent's is in docs/ppo_multilevel.md.
//! Run: `cargo run --release --bin ppo_multilevel -- --levels 32,64,128 --level-steps 80,10,5`; writes `runs/`: the
//! finest level's episodes (the return is the recovery factor), CleanRL's metrics plus per-level ratio and KL columns.
//! What is not PPO comes from the package's library (`src/lib.rs`), as CleanRL's from torch, tyro and cleanrl_utils.

use clap::Parser;
use envs::{Action, Env, RecordEpisodeStatistics, Space, VecEnv};
use ppo_details::{fail, parse_args, pick_device, play, to_host, var, FlatAdam, RunArgs, RunLog, Start};
use ppo_details::{flags::*, Logged::*}; // value parsers (each numeric flag's range); a logged value, host or device
use std::time::Instant;
use tch::{nn, nn::Module, Device, Kind, Tensor};

#[derive(Parser, Debug, serde::Serialize, serde::Deserialize)]
#[command(about = "Multilevel PPO on the ressim waterflooding env (Dixit & Elsheikh), after ppo_continuous")]
struct Args {
    // the experiment's flags (seed, cuda, threads, checkpoints), the same in every binary: RunArgs
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
    /// the reservoir configuration (ResSim-v1: the paper's 128x128; ResSim-case1: the reference's 61x61 test case)
    #[arg(long, default_value = "ResSim-v1")]
    env_id: String,
    /// your own reservoir: a CSV file of the fine grid's log-permeability (one line per grid row,
    /// injectors in column 0; one value per column, ln of the permeability in mD; `#` comments
    /// allowed), used instead of the built-in fields
    #[arg(long, conflicts_with = "perm_seed")]
    perm_file: Option<std::path::PathBuf>,
    /// seed of the generator of the 16 channelized permeability fields (1: the built-in fields, the paper's)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32))]
    perm_seed: u32,
    /// Multilevel 1: grid size (cells per side) of each level, coarse to fine
    #[arg(long, value_delimiter = ',', default_value = "32,64,128", value_parser = at_least_one)]
    levels: Vec<usize>,
    /// Multilevel 1: steps per env and iteration on each level (T^l)
    #[arg(long, value_delimiter = ',', default_value = "80,10,5", value_parser = at_least_one)]
    level_steps: Vec<usize>,
    /// Multilevel 1: minibatch size on each level (M^l); N T^l / M^l must be the same on all levels
    #[arg(long, value_delimiter = ',', default_value = "400,50,25", value_parser = at_least_one)]
    level_minibatch_size: Vec<usize>,
    /// the number of iterations (rollouts on every level, then the update)
    #[arg(long, default_value_t = 300, value_parser = at_least_one)]
    num_iterations: usize,
    /// the learning rate of the optimizer
    #[arg(long, default_value_t = 1e-5, value_parser = positive)]
    learning_rate: f64,
    /// the number of parallel envs on every level (N)
    #[arg(long, default_value_t = 50, value_parser = at_least_one)]
    num_envs: usize,
    /// anneal the learning rate linearly to 0 over the run (off: the paper's constant rate; --adaptive-lr: ignored)
    #[arg(long, default_value_t = false)]
    anneal_lr: bool,
    /// adapt the learning rate to the policy's KL after every minibatch instead of annealing it
    /// (rsl_rl's rule: / 1.5 above 2 x --desired-kl, x 1.5 below half of it; within [1e-5, 1e-2]),
    /// from the finest level's main minibatch (its data is the real environment)
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
    /// normalize the advantages per minibatch (main and sync batches separately)
    #[arg(long, default_value_t = true)]
    norm_adv: bool,
    /// the surrogate clipping coefficient
    #[arg(long, default_value_t = 0.1, value_parser = positive)]
    clip_coef: f64,
    /// anneal the clip coefficient (policy and value clipping) linearly to 0 over the run
    #[arg(long, default_value_t = false)]
    anneal_clip: bool,
    /// use a clipped loss for the value function (off: SB3's default, which the paper used)
    #[arg(long, default_value_t = false)]
    clip_vloss: bool,
    /// coefficient of the entropy bonus
    #[arg(long, default_value_t = 0.001, value_parser = finite)]
    ent_coef: f64,
    /// coefficient of the value loss ½(V − R)² (1.0 is SB3's 0.5 on its (V − R)², the paper's setting)
    #[arg(long, default_value_t = 1.0, value_parser = finite)]
    vf_coef: f64,
    /// the maximum norm for the gradient clipping
    #[arg(long, default_value_t = 0.5, value_parser = positive)]
    max_grad_norm: f64,
    /// the target KL divergence threshold (inf: off), checked as --kl-rule says
    #[arg(long, default_value = "0.05", value_parser = kl_target)]
    target_kl: Option<f64>,
    /// Multilevel 7: sb3 (the paper's): stop the update at once when any level's main minibatch has an approx_kl
    /// above 1.5 x --target-kl, before its step; cleanrl: after an epoch whose last minibatch of the finest main
    /// batch has an approx_kl above --target-kl
    #[arg(long, value_enum, default_value_t = KlRule::Sb3)]
    kl_rule: KlRule,
    /// Multilevel 6: hidden layer sizes
    #[arg(long, value_delimiter = ',', default_value = "150,100,80")]
    #[arg(value_parser = clap::value_parser!(i64).range(1..))]
    hidden_sizes: Vec<i64>,
    /// Multilevel 6: one tanh trunk shared by policy and value (SB3's MlpPolicy); false: two separate MLPs
    #[arg(long, default_value_t = true)]
    shared_trunk: bool,
    /// Multilevel 6: initial log standard deviation of the actions
    #[arg(long, default_value_t = -2.9, value_parser = finite)]
    log_std_init: f64,
    /// ppo_continuous's observation and reward normalization (one level only: envs of different
    /// levels would keep different statistics)
    #[arg(long, default_value_t = false)]
    normalize: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
enum KlRule {
    Sb3,
    Cleanrl,
}

// TRY NOT TO MODIFY: Args to the library (parse_args also runs check_args); threads: 1 for libtorch, every core
// for simulating; --resume may add iterations
ppo_details::experiment!(
    Args,
    (1, ppo_details::all_cores()),
    resume_may_change = &["num_iterations"],
    added_later = &[("adaptive_lr_rule", "rsl-rl")], // came after runs were made: theirs had rsl_rl's rule
    check = check_args
);

/// The combinations of flags that cannot run (each flag's own range is checked by clap).
fn check_args(a: &Args) -> Result<(), String> {
    let n_levels = a.levels.len();
    // Multilevel 1: one minibatch index drives every level, so all levels have as many minibatches
    let counts: Vec<_> = a.level_steps.iter().zip(&a.level_minibatch_size).map(|(t, &m)| (a.num_envs * t, m)).collect();
    if a.level_steps.len() != n_levels || a.level_minibatch_size.len() != n_levels {
        Err(format!("--levels, --level-steps and --level-minibatch-size need one value per level ({n_levels} levels)"))
    } else if a.levels.windows(2).any(|w| w[0] > w[1]) {
        // (two equal grids are allowed: their L^l is exactly 0, a check that sync rows pair with main rows)
        Err(format!("--levels must go from coarse to fine (growing grid sizes), got {:?}", a.levels))
    } else if counts.iter().any(|&(n, m)| !n.is_multiple_of(m) || n / m != counts[0].0 / counts[0].1) {
        let got: Vec<_> = counts.iter().map(|(n, m)| format!("{n}/{m}")).collect();
        Err(format!("every level needs the same whole number of minibatches N T^l / M^l, got {}", got.join(", ")))
    } else if a.norm_adv && a.level_minibatch_size.contains(&1) {
        Err("--norm-adv needs minibatches of 2 or more (the std of one is NaN); raise --level-minibatch-size".into())
    } else if a.normalize && n_levels > 1 {
        Err("--normalize works with one level only (each env would keep its own statistics)".into())
    } else {
        Ok(())
    }
}

/// `ppo_continuous`'s `make_env` on one level's grid. The reservoir's observations are already
/// scaled by the env (saturations in [0, 1], pressures to [−1, 1]) and its rewards are recovery
/// fractions, so by default only the actions are clipped (to [0.001, 1], as SB3 does).
type EnvAndStats = (Box<dyn Env<Obs = f32>>, Vec<envs::SharedRms>);
fn make_env(args: &Args, nx: usize, obs_rms: Option<envs::RunningMeanStd>) -> Result<EnvAndStats, envs::EnvError> {
    // Continuous 5: clip actions to the valid range for the env
    let fields = match &args.perm_file {
        Some(path) => envs::ressim::Fields::File(path.clone()),
        None => envs::ressim::Fields::Generated { n: 16, seed: args.perm_seed },
    };
    let env =
        envs::ClipAction::new(RecordEpisodeStatistics::new(envs::ressim::make_with(&args.env_id, &fields, Some(nx))?));
    if !args.normalize {
        return Ok((Box::new(env), Vec::new()));
    }
    let env = envs::NormalizeObservation::new(env).frozen_with(obs_rms); // Continuous 6: observation normalization
    let stats = env.stats();
    // Continuous 7: observation clipping (±10)
    let env =
        envs::TransformObservation::new(env, |obs: &mut [f32]| obs.iter_mut().for_each(|o| *o = o.clamp(-10.0, 10.0)));
    // Continuous 8: reward scaling (divide by std of discounted return)
    let env = envs::NormalizeReward::new(env, args.gamma);
    let stats = vec![stats, env.stats()];
    let env = envs::TransformReward::new(env, |r: f64| r.clamp(-10.0, 10.0)); // Continuous 9: reward clipping (±10)
    Ok((Box::new(env), stats))
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
    let init = nn::Init::Orthogonal { gain: std };
    nn::linear(p, in_dim, out_dim, nn::LinearConfig { ws_init: init, bs_init: Some(nn::Init::Const(0.0)), bias: true })
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

// Core 13: separate policy and value networks, with --shared-trunk false
// Continuous 4: separate policy and value MLPs; by default Multilevel 6: one trunk shared by both heads
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
        let (trunk, heads_in) = match args.shared_trunk {
            // Multilevel 6: SB3's MlpPolicy with net_arch [150, 100, 80]: one trunk, two linear heads
            true => (mlp(&(p / "trunk"), &sizes, None), vec![last]),
            false => (nn::seq(), sizes),
        };
        let critic = mlp(&(p / "critic"), &heads_in, Some((1, 1.0)));
        let actor_mean = mlp(&(p / "actor_mean"), &heads_in, Some((n_actions, 0.01)));
        // Continuous 2: state-independent log std (Multilevel 6: initialized to --log-std-init)
        let actor_logstd = p.var("actor_logstd", &[1, n_actions], nn::Init::Const(args.log_std_init));
        let obs_rms = p.add("obs_rms", Tensor::zeros([2 * obs_dim + 1], (Kind::Double, p.device())), false);
        Agent { trunk, critic, actor_mean, actor_logstd, obs_rms }
    }

    fn get_value(&self, x: &Tensor) -> Tensor {
        self.critic.forward(&self.trunk.forward(x))
    }

    /// Extra 1: the Gaussian's means, for the KL of `--adaptive-lr`.
    fn action_mean(&self, x: &Tensor) -> Tensor {
        self.actor_mean.forward(&self.trunk.forward(x))
    }

    /// torch's Normal(mean, std) written out; samples an action when none is given: (action, logprob, entropy, value)
    fn get_action_and_value(&self, x: &Tensor, action: Option<&Tensor>) -> [Tensor; 4] {
        let h = self.trunk.forward(x);
        // Continuous 1: Normal action distribution
        let action_mean = self.actor_mean.forward(&h);
        let action_logstd = self.actor_logstd.expand_as(&action_mean);
        let action_std = action_logstd.exp();
        let action =
            action.map_or_else(|| &action_mean + &action_std * action_mean.randn_like(), |a| a.shallow_clone());
        let half_log_2pi = 0.5 * (2.0 * std::f64::consts::PI).ln();
        let log_prob: Tensor =
            -(&action - &action_mean).square() / (2.0 * action_std.square()) - &action_logstd - half_log_2pi;
        let entropy = action_logstd + (0.5 + half_log_2pi);
        // Continuous 3: independent action components (log-probs and entropies summed)
        [
            action,
            log_prob.sum_dim_intlist(1, false, Kind::Float),
            entropy.sum_dim_intlist(1, false, Kind::Float),
            self.critic.forward(&h),
        ]
    }
}

fn main() {
    let args: Args = parse_args();
    let run_name = format!("{}__{}__{}__{}", args.env_id, args.run.exp_name, args.run.seed, ppo_details::unix_time());
    // Multilevel 2: per level its own envs; for l > 0 also envs on level l−1 for the sync samples
    let (num_envs, n_levels) = (args.num_envs, args.levels.len());
    let make = |&nx: &usize| {
        let env_fns: Vec<_> = (0..num_envs).map(|_| make_env(&args, nx, None).unwrap_or_else(|e| fail(2, e))).collect();
        let (env_fns, stats): (Vec<_>, Vec<_>) = env_fns.into_iter().unzip();
        (VecEnv::new(env_fns).with_threads(args.run.env_threads), stats.concat())
    };
    let (mut level_envs, level_stats): (Vec<_>, Vec<_>) = args.levels.iter().map(make).unzip();
    let (mut sync_envs, sync_stats): (Vec<_>, Vec<_>) = args.levels[..n_levels - 1].iter().map(make).unzip();
    // every env's running statistics, for the checkpoints
    let all_stats = [&level_stats[..], &sync_stats[..]].concat().concat();
    let num_minibatches = num_envs * args.level_steps[0] / args.level_minibatch_size[0];
    let num_iterations = args.num_iterations;

    // seeding
    tch::manual_seed(args.run.seed as i64);
    ppo_details::torch_deterministic(args.run.torch_deterministic); // cuDNN: deterministic algorithms, no autotuner
    let (device, device_name) = pick_device(args.run.cuda, ppo_details::Network::Mlp);
    println!("device: {device_name}");

    // env setup. Core 1: vectorized architecture
    let (obs_dim, n_actions) = match (level_envs[0].single_observation_space(), level_envs[0].single_action_space()) {
        (Space::Box { shape, .. }, Space::Box { shape: a, .. }) if shape.len() == 1 && a.len() == 1 => {
            (shape[0] as i64, a[0] as i64)
        }
        (o, a) => fail(2, format!("{}: {o} observations, {a} actions; ppo_multilevel needs 1-D Boxes", args.env_id)),
    };
    let mut vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), obs_dim, n_actions, &args);
    // Core 3: Adam with epsilon 1e-5 (torch.optim.Adam's math over one flat vector; the rate comes at step(lr))
    let mut optimizer = FlatAdam::new(&vs, 1e-5);
    // TRY NOT TO MODIFY: --resume loads the checkpoint's weights, Adam's state and counters, cuts its run's logs back
    // to it and reseeds torch (after the seeding above); the last argument: running statistics to restore (&[]: none)
    let from = Start::new(&args, num_iterations, &mut optimizer, &all_stats);
    let mut log = RunLog::create(&run_name, &args, &device_name, &from);

    // start the game: every level's envs from the same seeds (with --resume: where the checkpoint
    // stood, in fresh episodes)
    let mut global_step = from.global_step;
    for envs in level_envs.iter_mut().chain(sync_envs.iter_mut()) {
        envs.reset(Some(from.seed));
    }
    let mut next_done = vec![vec![0f32; num_envs]; n_levels];
    let mut lr = from.learning_rate.unwrap_or(args.learning_rate);

    for iteration in from.iteration + 1..=num_iterations {
        // Core 4: learning-rate annealing, linearly to 0 (Extra 1: --adaptive-lr carries it on instead)
        let frac = 1.0 - (iteration as f64 - 1.0) / num_iterations as f64;
        if !args.adaptive_lr {
            lr = if args.anneal_lr { frac * args.learning_rate } else { args.learning_rate };
        }
        // Aux 1: clip-range annealing, with the same fraction
        let clip_coef = if args.anneal_clip { frac * args.clip_coef } else { args.clip_coef };

        // Multilevel 2: levels in ascending order, each continuing its own episodes from its own last observation
        // (the reference carries the last observation over from the previous level, so each level's first transition
        // paired another grid's observation with this one's state; it also maps each level's envs from the previous
        // level's state first: with every T^l a multiple of the 5-step episode, only the new episodes' fields differ)
        let mut batches = Vec::new();
        for l in 0..n_levels {
            let envs = (&mut level_envs[l], l.checked_sub(1).map(|c| &mut sync_envs[c]));
            let (next_done, global_step) = (&mut next_done[l], &mut global_step);
            collect_level(&args, &agent, device, l, envs, next_done, global_step, &mut log, &mut batches);
        }
        let fine = batches.iter().rposition(|b| b.sign > 0.0).expect("a main batch"); // the finest level's main batch

        // Optimizing the policy and value network
        let learn_start = Instant::now();
        // the finest main batch's last minibatch's values are logged, as CleanRL's loop variables are after its loops
        let (mut pg_loss, mut v_loss, mut entropy_loss, mut loss) =
            (Tensor::new(), Tensor::new(), Tensor::new(), Tensor::new());
        // |ratio - 1| of every batch's minibatches, in turn (for the clip fractions); each batch's last KL estimates
        // (old_approx_kl, approx_kl): the ones logged and checked
        let mut ratio_devs = Vec::new();
        let mut last_kl: Vec<_> = batches.iter().map(|_| (Tensor::from(0f32), Tensor::from(0f32))).collect();
        let mut level_losses = Vec::new(); // every minibatch's L^l per level, for their mean and variance
        let (mut epochs, mut optimizer_steps, mut stop, mut grad_norm) = (0, 0, false, Tensor::from(f32::NAN));
        // Extra 1: the rollout's policy on the finest main batch (the weights have not moved since), and the
        // last KL the rule saw
        let old_logstd = agent.actor_logstd.detach().copy();
        let old_mus = args.adaptive_lr.then(|| tch::no_grad(|| agent.action_mean(&batches[fine].b_obs)));
        let mut adaptive_kl = f64::NAN;
        for _epoch in 0..args.update_epochs {
            epochs += 1;
            // Core 6: shuffled mini-batches that cover the whole batch each epoch, one
            // permutation per level for its main and sync batches alike (each batch gathered in its
            // level's shuffled order once per epoch; minibatches are slices of it)
            let perm = |t: &usize| Tensor::randperm((t * num_envs) as i64, (Kind::Int64, device)); // torch.randperm
            let perms: Vec<Tensor> = args.level_steps.iter().map(perm).collect();
            let mbs: Vec<Minibatches> =
                batches.iter().map(|b| b.shuffled(&perms[b.level], args.level_minibatch_size[b.level])).collect();
            for start in 0..num_minibatches {
                // Multilevel 5: loss_MLMC = Σ_l [L(main batch of l) − L(sync batch of l−1)], each term on the same
                // indices of its level's permutation; the terms' minibatches share one forward pass through
                // the network (and so one backward pass), then one optimizer step
                let cat = |part: fn(&Minibatches) -> &[Tensor]| {
                    Tensor::cat(&mbs.iter().map(|m| part(m)[start].shallow_clone()).collect::<Vec<_>>(), 0)
                };
                let [_, newlogprobs, entropies, newvalues] =
                    agent.get_action_and_value(&cat(|m| &m.obs), Some(&cat(|m| &m.actions)));
                let sizes: Vec<i64> = batches.iter().map(|b| args.level_minibatch_size[b.level] as i64).collect();
                let split = |t: &Tensor| t.split_with_sizes(sizes.as_slice(), 0);
                let (newlogprobs, entropies, newvalues) = (split(&newlogprobs), split(&entropies), split(&newvalues));
                let mut level_loss = Vec::new();
                for (batch, mb) in batches.iter().zip(&mbs) {
                    let (newlogprob, entropy, newvalue) =
                        (&newlogprobs[batch.index], &entropies[batch.index], &newvalues[batch.index]);
                    let logratio = newlogprob - &mb.logprobs[start];
                    let ratio = logratio.exp();

                    // Core 12: debug variables: each batch's KL estimates (the last ones logged), |ratio - 1|
                    tch::no_grad(|| {
                        last_kl[batch.index] =
                            ((-&logratio).mean(Kind::Float), ((&ratio - 1.0) - &logratio).mean(Kind::Float));
                        ratio_devs.push((&ratio - 1.0).abs());
                    });

                    // Multilevel 5: each term is the parent's PPO loss (Cores 7-10) on the batch's minibatch;
                    // L^l = L(main batch of l) − L(sync batch of l−1), which follows it
                    let (term, pg, v, ent) = ppo_loss(&args, (mb, start), &ratio, entropy, newvalue, clip_coef);
                    if batch.sign > 0.0 {
                        level_loss.push(term);
                    } else {
                        let main = level_loss.pop().expect("a sync batch follows its level's main batch");
                        level_loss.push(main - term);
                    }
                    if batch.index == fine {
                        (pg_loss, v_loss, entropy_loss) = (pg, v, ent);
                    }
                }
                let level_loss = Tensor::stack(&level_loss, 0);
                loss = level_loss.sum(Kind::Float); // loss_MLMC = Σ_l L^l
                level_losses.push(level_loss.detach());

                // Aux 3, Multilevel 7: the paper's early stop (SB3's): any level's main minibatch with an approx_kl
                // above 1.5 x target_kl ends the update before its step (one host sync per minibatch)
                if let (Some(target_kl), KlRule::Sb3) = (args.target_kl, args.kl_rule) {
                    let main_kls: Vec<&Tensor> =
                        batches.iter().filter(|b| b.sign > 0.0).map(|b| &last_kl[b.index].1).collect();
                    if Tensor::stack(&main_kls, 0).max().double_value(&[]) > 1.5 * target_kl {
                        stop = true;
                        break;
                    }
                }

                if let Some(old_mus) = &old_mus {
                    // Extra 1: KL-adaptive learning rate (rsl_rl's or the TUM report's rule), from the KL of the finest
                    // main batch's minibatch (the same rows of its level's permutation)
                    let size = args.level_minibatch_size[batches[fine].level] as i64;
                    let rows = perms[batches[fine].level].narrow(0, start as i64 * size, size);
                    let kl = tch::no_grad(|| {
                        let (mu_old, mu) = (old_mus.index_select(0, &rows), agent.action_mean(&mbs[fine].obs[start]));
                        gaussian_kl(&mu_old, &old_logstd, &mu, &agent.actor_logstd)
                    });
                    adaptive_kl = kl.double_value(&[]);
                    lr = adapt_lr(&args.adaptive_lr_rule, lr, adaptive_kl, args.desired_kl);
                }

                optimizer.zero_grad();
                loss.backward();
                // Core 11: global gradient-norm clipping
                grad_norm = optimizer.clip_grad_norm(args.max_grad_norm);
                optimizer.step(lr);
                optimizer_steps += 1;
            }
            // Aux 3 (--kl-rule cleanrl): CleanRL's early stopping once the KL of the last minibatch passes the target
            // (the finest level's main batch: its data is the real environment)
            if let (Some(target_kl), KlRule::Cleanrl) = (args.target_kl, args.kl_rule) {
                stop = last_kl[fine].1.double_value(&[]) > target_kl;
            }
            if stop {
                break;
            }
        }
        // the clip fraction: how many ratios the surrogate clipped, of the finest main batch (all its minibatches) and
        // of each batch's first minibatch, the policy not moved yet (none, and every ratio exactly 1: tests check)
        let clipfrac = |devs: &Tensor| devs.gt(clip_coef).to_kind(Kind::Float).mean(Kind::Float);
        let first_minibatch: Vec<_> = ratio_devs[..batches.len()].iter().map(|d| (d.max(), clipfrac(d))).collect();
        let clip_fraction =
            clipfrac(&Tensor::cat(&ratio_devs.iter().skip(fine).step_by(batches.len()).collect::<Vec<_>>(), 0));
        // the largest deviation over all batches (torch's max: a NaN anywhere shows as NaN)
        let (devs, clips): (Vec<Tensor>, Vec<Tensor>) =
            first_minibatch.iter().map(|(d, c)| (d.shallow_clone(), c.shallow_clone())).unzip();
        let (first_mb_ratio_dev, first_mb_clipfrac) = (Tensor::stack(&devs, 0).max(), Tensor::stack(&clips, 0).max());

        // Core 12: CleanRL's metrics by its names (for the finest level's main batches), then our
        // debug and timing columns, and per level the ratio and KL columns for main and sync batches
        let (b_values, b_returns) = (&batches[fine].b_values, &batches[fine].b_returns);
        // explained variance, 1 - Var[returns - values] / Var[returns] (numpy's, as CleanRL: NaN for constant returns)
        let var_y = var(b_returns.iter().map(|&y| y as f64));
        let residuals = b_returns.iter().zip(b_values.iter()).map(|(&y, &v)| (y - v) as f64);
        let explained_var = if var_y == 0.0 { f64::NAN } else { 1.0 - var(residuals) / var_y };
        let mut row: Vec<(String, ppo_details::Logged)> = [
            ("iteration", OnHost(iteration as f64)),
            ("global_step", OnHost(global_step as f64)),
            ("charts/learning_rate", OnHost(lr)),
            ("charts/clip_coef", OnHost(clip_coef)),
            ("losses/value_loss", OnDevice(&v_loss)),
            ("losses/policy_loss", OnDevice(&pg_loss)),
            ("losses/entropy", OnDevice(&entropy_loss)),
            ("losses/old_approx_kl", OnDevice(&last_kl[fine].0)),
            ("losses/approx_kl", OnDevice(&last_kl[fine].1)),
            ("losses/clipfrac", OnDevice(&clip_fraction)),
            ("losses/explained_variance", OnHost(explained_var)),
            ("debug/first_mb_max_ratio_dev", OnDevice(&first_mb_ratio_dev)),
            ("debug/first_mb_clipfrac", OnDevice(&first_mb_clipfrac)),
            ("debug/adaptive_kl", if args.adaptive_lr { OnHost(adaptive_kl) } else { Off }),
            ("debug/unclipped_grad_norm", OnDevice(&grad_norm)),
            ("debug/epochs", OnHost(epochs as f64)),
            ("debug/optimizer_steps", OnHost(optimizer_steps as f64)),
        ]
        .map(|(name, value)| (name.to_string(), value))
        .into();
        for (batch, ((dev, clip), kl)) in batches.iter().zip(first_minibatch.iter().zip(&last_kl)) {
            let name = format!("l{}{}", batch.level + 1, if batch.sign > 0.0 { "" } else { "_sync" });
            row.push((format!("debug/{name}_first_mb_max_ratio_dev"), OnDevice(dev)));
            row.push((format!("debug/{name}_first_mb_clipfrac"), OnDevice(clip)));
            row.push((format!("losses/{name}_approx_kl"), OnDevice(&kl.1)));
        }
        // Multilevel 5: each level's L^l, its mean and its variance over the update's minibatches (the V_l of
        // MLMC's sample-size rule)
        let ls = Tensor::stack(&level_losses, 0);
        let (means, vars) = (ls.mean_dim(0, false, Kind::Float).unbind(0), ls.var_dim(0, true, false).unbind(0));
        for (l, (mean, var)) in means.iter().zip(&vars).enumerate() {
            row.push((format!("losses/l{}_loss", l + 1), OnDevice(mean)));
            row.push((format!("losses/l{}_loss_var", l + 1), OnDevice(var)));
        }
        let row: Vec<(&str, ppo_details::Logged)> = row.iter().map(|(name, value)| (name.as_str(), *value)).collect();
        let env_seconds = level_envs.iter_mut().chain(&mut sync_envs).map(|envs| envs.take_step_seconds()).sum();
        log.update(&row, &loss, env_seconds, learn_start);
        log.checkpoint(&optimizer, &all_stats);
    }

    if args.run.save_model {
        if let Some(stats) = level_stats[n_levels - 1].first() {
            let rms = stats.lock().clone(); // env 0's observation statistics go into the model file
            let rms = Tensor::from_slice(&[rms.mean, rms.var, vec![rms.count]].concat());
            tch::no_grad(|| agent.obs_rms.shallow_clone().copy_(&rms));
        }
        // CleanRL's evaluate: the saved file, read back into the agent, plays 10 episodes with sampled actions
        // on the finest level, the observations normalized with the statistics in that file
        let model_path = log.save(&vs, &args.run.exp_name);
        vs.load(&model_path).unwrap_or_else(|e| fail(1, format!("cannot load {}: {e}", model_path.display())));
        let v = Vec::<f64>::try_from(agent.obs_rms.to_device(Device::Cpu)).unwrap_or_else(|e| fail(1, e));
        let d = obs_dim as usize;
        let rms = envs::RunningMeanStd { mean: v[..d].to_vec(), var: v[d..2 * d].to_vec(), count: v[2 * d] };
        let env = make_env(&args, args.levels[n_levels - 1], Some(rms)).unwrap_or_else(|e| fail(1, e)).0;
        let mut action = vec![0f32; n_actions as usize];
        log.eval(&play(env, args.run.seed, |env| {
            let obs = Tensor::from_slice(&env.obs).view([1, obs_dim]).to_device(device);
            let [a, _, _, _] = tch::no_grad(|| agent.get_action_and_value(&obs, None));
            a.to_device(Device::Cpu).copy_data(&mut action, n_actions as usize);
            env.step(Action::Continuous(&action));
        }));
    }
}

/// Multilevel 2-4, collecting one level: `--level-steps` steps of level `l`'s envs from where they
/// stood (the main samples) and, for l > 0, level l−1's envs put in each fine state and stepped
/// with the same action (the sync samples); pushes the level's batch and its sync batch.
#[allow(clippy::too_many_arguments)] // the run's state a level advances, each named
fn collect_level(
    args: &Args,
    agent: &Agent,
    device: Device,
    l: usize,
    (envs, mut coarse_envs): (&mut VecEnv<f32>, Option<&mut VecEnv<f32>>),
    next_done: &mut [f32],
    global_step: &mut u64,
    log: &mut RunLog,
    batches: &mut Vec<Batch>,
) {
    let (num_envs, num_steps, n_levels) = (args.num_envs, args.level_steps[l], args.levels.len());
    let (obs_dim, n_actions) = ((envs.obs.len() / num_envs) as i64, agent.actor_logstd.size()[1]);
    let mut action_buf = vec![0f32; num_envs * n_actions as usize];
    // storage: the main samples and the sync samples (on level l−1), same actions and dones
    let (mut main, mut sync) = (Rollout::new(num_steps, num_envs), Rollout::new(num_steps, num_envs));
    let mut actions = Vec::new();
    for step in 0..num_steps {
        *global_step += num_envs as u64;
        let next_obs = Tensor::from_slice(&envs.obs).view([num_envs as i64, obs_dim]).to_device(device);
        main.dones[step].copy_from_slice(next_done);
        let [action, logprob, _, value] = tch::no_grad(|| agent.get_action_and_value(&next_obs, None));
        action.to_device(Device::Cpu).copy_data(&mut action_buf, num_envs * n_actions as usize);
        if let Some(coarse) = coarse_envs.as_deref_mut() {
            // Multilevel 3: level l−1 in this level's state, valued and stepped with the same
            // action; V~ and log π~ come from a forward pass that samples nothing (the
            // reference drew an extra action for V~)
            map_envs(coarse, envs, num_envs);
            let coarse_obs = Tensor::from_slice(&coarse.obs).view([num_envs as i64, obs_dim]).to_device(device);
            let [_, sync_logprob, _, sync_value] =
                tch::no_grad(|| agent.get_action_and_value(&coarse_obs, Some(&action)));
            coarse.step(Action::Continuous(&action_buf));
            sync.rewards[step].copy_from_slice(&coarse.rewards);
            sync.dones[step].copy_from_slice(next_done); // Multilevel 4: the fine episode boundaries
            sync.obs.push(coarse_obs);
            sync.logprobs.push(sync_logprob);
            sync.value_ts.push(sync_value.view([-1]));
        }
        main.obs.push(next_obs);
        actions.push(action);
        main.logprobs.push(logprob);
        main.value_ts.push(value.view([-1]));

        envs.step(Action::Continuous(&action_buf)); // Continuous 5: the unclipped sample is stored
        main.rewards[step].copy_from_slice(&envs.rewards);
        // termination and truncation both end the episode (ressim has no truncation)
        for (done, (term, trunc)) in next_done.iter_mut().zip(envs.terminated.iter().zip(&envs.truncated)) {
            *done = (*term || *trunc) as u8 as f32;
        }
        if l == n_levels - 1 {
            log.episodes(*global_step, &envs.finished);
        }
    }

    // bootstrap value if not done
    let next_obs = Tensor::from_slice(&envs.obs).view([num_envs as i64, obs_dim]).to_device(device);
    let next_value = to_host(&tch::no_grad(|| agent.get_value(&next_obs)));
    main.values_to_host();
    let advantages = gae(args, &main, next_done, &next_value);
    let b_actions = Tensor::cat(&actions, 0);
    batches.push(Batch::new((l, batches.len()), 1.0, main, advantages, &b_actions, device));
    if let Some(coarse) = coarse_envs {
        // Multilevel 4: GAE on the sync samples with the fine episode boundaries,
        // bootstrapped from level l−1 put in the fine state after the last step
        map_envs(coarse, envs, num_envs);
        let next_obs = Tensor::from_slice(&coarse.obs).view([num_envs as i64, obs_dim]).to_device(device);
        let next_value = to_host(&tch::no_grad(|| agent.get_value(&next_obs)));
        sync.values_to_host();
        let advantages = gae(args, &sync, next_done, &next_value);
        batches.push(Batch::new((l, batches.len()), -1.0, sync, advantages, &b_actions, device));
    }
}

/// One batch's PPO loss on its minibatch `start`, as the parent computes it (Cores 7-10), from the
/// ratios, entropies and values of the shared forward pass; returns (loss, pg_loss, v_loss, entropy_loss).
fn ppo_loss(
    args: &Args,
    (mb, start): (&Minibatches, usize),
    ratio: &Tensor,
    entropy: &Tensor,
    newvalue: &Tensor,
    clip_coef: f64,
) -> (Tensor, Tensor, Tensor, Tensor) {
    let mut mb_advantages = mb.advantages[start].shallow_clone();
    if args.norm_adv {
        // Core 7: per-minibatch advantage normalization (torch's std: unbiased, n - 1, as CleanRL's)
        mb_advantages = (&mb_advantages - mb_advantages.mean(Kind::Float)) / (mb_advantages.std(true) + 1e-8);
    }

    // Core 8: clipped surrogate objective
    let pg_loss1 = -&mb_advantages * ratio;
    let pg_loss2 = -&mb_advantages * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef);
    let pg_loss = pg_loss1.max_other(&pg_loss2).mean(Kind::Float);

    let newvalue = newvalue.view([-1]);
    let mb_returns = &mb.returns[start];
    let v_loss = if args.clip_vloss {
        // Core 9: value-function loss clipping
        let mb_values = &mb.values[start];
        let v_loss_unclipped = (&newvalue - mb_returns).square();
        let v_clipped = mb_values + (&newvalue - mb_values).clamp(-clip_coef, clip_coef);
        let v_loss_clipped = (v_clipped - mb_returns).square();
        0.5 * v_loss_unclipped.max_other(&v_loss_clipped).mean(Kind::Float)
    } else {
        0.5 * (&newvalue - mb_returns).square().mean(Kind::Float)
    };

    // Core 10: one loss with an entropy bonus, one optimizer
    let entropy_loss = entropy.mean(Kind::Float);
    let loss: Tensor = &pg_loss - &entropy_loss * args.ent_coef + &v_loss * args.vf_coef;
    (loss, pg_loss, v_loss, entropy_loss)
}

/// One level's samples, main or synchronized: a tensor per step on the device, a row per step on the host.
struct Rollout {
    obs: Vec<Tensor>,
    logprobs: Vec<Tensor>,
    /// each step's values, on the device; `values` has them on the host after `values_to_host`
    value_ts: Vec<Tensor>,
    rewards: Vec<Vec<f32>>,
    dones: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
}

impl Rollout {
    fn new(num_steps: usize, num_envs: usize) -> Rollout {
        let rows = vec![vec![0f32; num_envs]; num_steps];
        Rollout {
            obs: vec![],
            logprobs: vec![],
            value_ts: vec![],
            rewards: rows.clone(),
            dones: rows.clone(),
            values: rows,
        }
    }

    /// The rollout's values come down in one copy, for GAE on the host.
    fn values_to_host(&mut self) {
        let num_envs = self.values[0].len();
        let flat = to_host(&Tensor::cat(&self.value_ts, 0));
        for (row, values) in self.values.iter_mut().zip(flat.chunks(num_envs)) {
            row.copy_from_slice(values);
        }
    }
}

/// Core 5: GAE, as a plain loop on the host; `dones[t]` says an episode ended before step t,
/// `next_done` and `next_value` describe the step after the last.
fn gae(args: &Args, r: &Rollout, next_done: &[f32], next_value: &[f32]) -> Vec<Vec<f32>> {
    let (rewards, dones, values, num_steps, num_envs) =
        (&r.rewards, &r.dones, &r.values, r.rewards.len(), next_done.len());
    let (gamma, gae_lambda) = (args.gamma as f32, args.gae_lambda as f32);
    let mut advantages = vec![vec![0f32; num_envs]; num_steps];
    let mut lastgaelam = vec![0f32; num_envs];
    for t in (0..num_steps).rev() {
        for e in 0..num_envs {
            let (nextnonterminal, nextvalues) = if t == num_steps - 1 {
                (1.0 - next_done[e], next_value[e])
            } else {
                (1.0 - dones[t + 1][e], values[t + 1][e])
            };
            let delta = rewards[t][e] + gamma * nextvalues * nextnonterminal - values[t][e];
            lastgaelam[e] = delta + gamma * gae_lambda * nextnonterminal * lastgaelam[e];
            advantages[t][e] = lastgaelam[e];
        }
    }
    advantages
}

/// One batch of the MLMC loss (`sign` +1 for a level's main samples, −1 for its sync samples),
/// flattened as the parent flattens its batch: row step * num_envs + env.
struct Batch {
    level: usize,
    index: usize,
    sign: f64,
    b_obs: Tensor,
    b_actions: Tensor,
    b_logprobs: Tensor,
    b_values: Vec<f32>,
    b_returns: Vec<f32>,
    b_advantages_t: Tensor,
    b_returns_t: Tensor,
    b_values_t: Tensor,
}

impl Batch {
    /// Level `level`'s main batch (`sign` 1) or its sync batch (−1), the `index`th batch of the update.
    fn new(
        (level, index): (usize, usize),
        sign: f64,
        r: Rollout,
        advantages: Vec<Vec<f32>>,
        b_actions: &Tensor,
        device: Device,
    ) -> Batch {
        let (b_obs, b_logprobs) = (Tensor::cat(&r.obs, 0), Tensor::cat(&r.logprobs, 0));
        let (b_advantages, b_values) = (advantages.concat(), r.values.concat());
        let b_returns: Vec<f32> = b_advantages.iter().zip(&b_values).map(|(a, v)| a + v).collect();
        let to_device = |x: &[f32]| Tensor::from_slice(x).to_device(device);
        let (b_advantages_t, b_returns_t, b_values_t) =
            (to_device(&b_advantages), to_device(&b_returns), Tensor::cat(&r.value_ts, 0));
        let b_actions = b_actions.shallow_clone();
        Batch {
            level,
            index,
            sign,
            b_obs,
            b_actions,
            b_logprobs,
            b_values,
            b_returns,
            b_advantages_t,
            b_returns_t,
            b_values_t,
        }
    }
}

/// One batch's samples in an epoch's shuffled order, cut into minibatches.
struct Minibatches {
    obs: Vec<Tensor>,
    actions: Vec<Tensor>,
    logprobs: Vec<Tensor>,
    advantages: Vec<Tensor>,
    returns: Vec<Tensor>,
    values: Vec<Tensor>,
}

impl Batch {
    /// The batch's rows in the order `perm`, as minibatches of `size` rows (views).
    fn shuffled(&self, perm: &Tensor, size: usize) -> Minibatches {
        let cut = |t: &Tensor| t.index_select(0, perm).split(size as i64, 0);
        Minibatches {
            obs: cut(&self.b_obs),
            actions: cut(&self.b_actions),
            logprobs: cut(&self.b_logprobs),
            advantages: cut(&self.b_advantages_t),
            returns: cut(&self.b_returns_t),
            values: cut(&self.b_values_t),
        }
    }
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
