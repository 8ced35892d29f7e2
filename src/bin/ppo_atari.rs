//! # ppo_atari: PPO on Atari games, a diff of `ppo.rs`
//!
//! CleanRL's `ppo_atari.py`: `ppo.rs` plus the 9 Atari details, each tagged `// Atari N: ...`:
//! DeepMind's env wrappers (native ALE, `envs::atari`), a shared Nature-CNN, pixels scaled to [0, 1].
//!
//! Run: `cargo run --release --bin ppo_atari -- --env-id BreakoutNoFrameskip-v4 --seed 1`
//! Writes `runs/<env-id>__<exp-name>__<seed>__<unix-time>/`: args.json, episodes.csv and
//! updates.csv (CleanRL's metric names, plus debug columns), and with `--save-model` the
//! weights and eval.csv.

use clap::{ArgAction, Parser};
use envs::atari::*; // the Atari env and its wrappers
use envs::{Action, Env, RecordEpisodeStatistics, Space, VecEnv};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

#[rustfmt::skip]
#[derive(Parser, Debug, serde::Serialize)]
#[command(about = "PPO on Atari games (BreakoutNoFrameskip-v4), after CleanRL's ppo_atari.py", allow_negative_numbers = true)]
struct Args {
    /// the name of this experiment (part of the run directory's name)
    #[arg(long, default_value = "ppo_atari")] exp_name: String,
    /// seed of the experiment (envs get seed + i, torch gets seed)
    #[arg(long, default_value_t = 1)] seed: u64,
    /// ask libtorch for deterministic algorithms (`--torch-deterministic false` to allow others)
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] torch_deterministic: bool,
    /// use CUDA when a GPU is present (`--cuda false` for the CPU)
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] cuda: bool,
    /// libtorch intra-op threads (the CNN uses every core)
    #[arg(long, default_value_t = std::thread::available_parallelism().map_or(1, |n| n.get() as i32))] torch_threads: i32,
    /// threads stepping the envs (results do not depend on it; default: every core)
    #[arg(long, default_value_t = std::thread::available_parallelism().map_or(1, |n| n.get()))] env_threads: usize,
    /// save the weights to the run directory, then evaluate them for 10 episodes
    #[arg(long)] save_model: bool,
    /// record env 0's games, every frame, on CleanRL's schedule, as GIFs in videos/<run-name>/
    #[arg(long)] capture_video: bool,
    /// the id of the environment (<Game>NoFrameskip-v4: BreakoutNoFrameskip-v4, PongNoFrameskip-v4, ...)
    #[arg(long, default_value = "BreakoutNoFrameskip-v4")] env_id: String,
    /// total timesteps of the experiment
    #[arg(long, default_value_t = 10_000_000)] total_timesteps: u64,
    /// the learning rate of the optimizer
    #[arg(long, default_value_t = 2.5e-4)] learning_rate: f64,
    /// the number of parallel game environments
    #[arg(long, default_value_t = 8)] num_envs: usize,
    /// the number of steps to run in each environment per policy rollout
    #[arg(long, default_value_t = 128)] num_steps: usize,
    /// anneal the learning rate linearly to 0 over the run
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] anneal_lr: bool,
    /// the discount factor gamma
    #[arg(long, default_value_t = 0.99)] gamma: f64,
    /// the lambda for the general advantage estimation
    #[arg(long, default_value_t = 0.95)] gae_lambda: f64,
    /// the number of mini-batches
    #[arg(long, default_value_t = 4)] num_minibatches: usize,
    /// the K epochs to update the policy
    #[arg(long, default_value_t = 4)] update_epochs: usize,
    /// normalize the advantages per minibatch
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] norm_adv: bool,
    /// the surrogate clipping coefficient
    #[arg(long, default_value_t = 0.1)] clip_coef: f64,
    /// use a clipped loss for the value function, as in the paper
    #[arg(long, value_name = "BOOL", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = ArgAction::Set)] clip_vloss: bool,
    /// coefficient of the entropy bonus
    #[arg(long, default_value_t = 0.01)] ent_coef: f64,
    /// coefficient of the value function loss
    #[arg(long, default_value_t = 0.5)] vf_coef: f64,
    /// the maximum norm for the gradient clipping
    #[arg(long, default_value_t = 0.5)] max_grad_norm: f64,
    /// the target KL divergence threshold (off when not given)
    #[arg(long)] target_kl: Option<f64>,
}

/// Rejects flag combinations that cannot run, before anything is written.
fn check_args(a: &Args) -> Result<(), String> {
    let batch = a.num_envs * a.num_steps;
    if a.num_envs == 0 || a.num_steps == 0 || a.num_minibatches == 0 || a.update_epochs == 0 {
        return Err("--num-envs, --num-steps, --num-minibatches and --update-epochs must be positive".into());
    }
    if !batch.is_multiple_of(a.num_minibatches) {
        return Err(format!("--num-envs x --num-steps ({batch}) must be divisible by --num-minibatches ({})", a.num_minibatches));
    }
    if a.total_timesteps < batch as u64 {
        return Err(format!("--total-timesteps ({}) is below one batch (--num-envs x --num-steps = {batch})", a.total_timesteps));
    }
    if a.learning_rate.is_nan() || a.learning_rate <= 0.0 {
        return Err(format!("--learning-rate must be positive, got {}", a.learning_rate));
    }
    if a.torch_threads < 1 || a.env_threads < 1 {
        return Err("--torch-threads and --env-threads must be at least 1".into());
    }
    Ok(())
}

/// CleanRL's `make_env`: the game through native ALE, wrapped as CleanRL wraps it (innermost first).
fn make_env(env_id: &str, video_dir: Option<std::path::PathBuf>) -> Result<Box<dyn Env<Obs = u8>>, envs::EnvError> {
    let env = AtariEnv::new(env_id)?;
    let has_fire = env.has_fire();
    let env = RecordEpisodeStatistics::new(RecordVideo::new(env, video_dir)); // innermost: raw game scores
    let env = NoopReset::new(env, 30); // Atari 1: NoopResetEnv
    let env = MaxAndSkip::new(env, 4); // Atari 2: MaxAndSkipEnv
    let env = EpisodicLife::new(env); // Atari 3: EpisodicLifeEnv
    let env: Box<dyn Env<Obs = u8>> = if has_fire { Box::new(FireReset::new(env)) } else { Box::new(env) }; // Atari 4: FireResetEnv
    let env = ClipReward::new(env); // Atari 6: ClipRewardEnv
    let env = GrayScale::new(ResizeObservation::new(env, 84, 84)); // Atari 5: WarpFrame (84x84 gray)
    Ok(Box::new(FrameStack::new(env, 4))) // Atari 7: FrameStack
}

/// Core 2: orthogonal weight init with the given gain, zero biases.
fn layer_init(p: nn::Path, in_dim: i64, out_dim: i64, std: f64) -> nn::Linear {
    let config = nn::LinearConfig { ws_init: nn::Init::Orthogonal { gain: std }, bs_init: Some(nn::Init::Const(0.0)), bias: true };
    nn::linear(p, in_dim, out_dim, config)
}

/// Core 2 for convolutions: orthogonal (out, in*k*k) kernels as torch makes them, zero biases.
fn conv_init(p: nn::Path, c_in: i64, c_out: i64, k: i64, stride: i64) -> nn::Conv2D {
    let mut conv = nn::conv2d(p, c_in, c_out, k, nn::ConvConfig { stride, bs_init: nn::Init::Const(0.0), ..Default::default() });
    let q = nn::init(nn::Init::Orthogonal { gain: 2f64.sqrt() }, &[c_out, c_in * k * k], conv.ws.device());
    tch::no_grad(|| conv.ws.copy_(&q.view_as(&conv.ws)));
    conv
}

// Atari 8: one Nature-CNN trunk shared by the policy and value heads (Core 13's other choice)
struct Agent {
    network: nn::Sequential,
    critic: nn::Linear,
    actor: nn::Linear,
}

impl Agent {
    fn new(p: &nn::Path, n_actions: i64) -> Agent {
        let (s2, net) = (2f64.sqrt(), p / "network");
        let network = nn::seq()
            .add(conv_init(&net / 0, 4, 32, 8, 4))
            .add_fn(|x| x.relu())
            .add(conv_init(&net / 2, 32, 64, 4, 2))
            .add_fn(|x| x.relu())
            .add(conv_init(&net / 4, 64, 64, 3, 1))
            .add_fn(|x| x.relu().flatten(1, -1))
            .add(layer_init(&net / 7, 64 * 7 * 7, 512, s2))
            .add_fn(|x| x.relu());
        Agent { network, critic: layer_init(p / "critic", 512, 1, 1.0), actor: layer_init(p / "actor", 512, n_actions, 0.01) }
    }

    /// The shared features of stacked u8 frames, one row of 4 * 84 * 84 values per observation.
    fn hidden(&self, x: &Tensor) -> Tensor {
        // Atari 9: scale pixels to [0, 1]
        self.network.forward(&(x.view([-1, 4, 84, 84]).to_kind(Kind::Float) / 255.0))
    }

    fn get_value(&self, x: &Tensor) -> Tensor {
        self.critic.forward(&self.hidden(x))
    }

    /// Samples an action when none is given; returns (action, log-prob, entropy, value).
    fn get_action_and_value(&self, x: &Tensor, action: Option<&Tensor>) -> (Tensor, Tensor, Tensor, Tensor) {
        let hidden = self.hidden(x);
        let logits = self.actor.forward(&hidden);
        let log_probs = logits.log_softmax(-1, Kind::Float);
        let probs = log_probs.exp();
        let action = match action {
            Some(a) => a.shallow_clone(),
            None => sample(&probs),
        };
        let log_prob = log_probs.gather(-1, &action.unsqueeze(-1), false).squeeze_dim(-1);
        let entropy = -(probs * &log_probs).sum_dim_intlist(-1, false, Kind::Float);
        (action, log_prob, entropy, self.critic.forward(&hidden))
    }
}

/// One action per row of `probs` (a Categorical sample), by inverting the CDF: the first action
/// whose cumulative probability exceeds a uniform draw (5 us here; multinomial takes 15).
fn sample(probs: &Tensor) -> Tensor {
    let u = Tensor::rand([probs.size()[0], 1], (Kind::Float, probs.device()));
    let last = probs.size()[1] - 1; // a rounding shortfall of the CDF must not pick past it
    probs.cumsum(-1, Kind::Float).lt_tensor(&u).sum_dim_intlist(-1, false, Kind::Int64).clamp_max(last)
}

fn main() {
    let args = Args::parse();
    let start_unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let run_name = format!("{}__{}__{}__{}", args.env_id, args.exp_name, args.seed, start_unix);
    // Bad input: one line naming the problem, exit code 2, nothing written.
    let video_dir: Option<std::path::PathBuf> = args.capture_video.then(|| ["videos", &run_name].iter().collect());
    let make = |i: usize| make_env(&args.env_id, video_dir.clone().filter(|_| i == 0)).map_err(|e| e.to_string());
    let env_fns = check_args(&args).and_then(|()| (0..args.num_envs).map(make).collect());
    let env_fns: Vec<Box<dyn Env<Obs = u8>>> = env_fns.unwrap_or_else(|e| fail(2, e));
    let batch_size = args.num_envs * args.num_steps;
    let minibatch_size = batch_size / args.num_minibatches;
    let num_iterations = args.total_timesteps as usize / batch_size;

    // seeding
    tch::manual_seed(args.seed as i64);
    tch::set_num_threads(args.torch_threads);
    tch::Cuda::cudnn_set_benchmark(!args.torch_deterministic);
    let device = if args.cuda { Device::cuda_if_available() } else { Device::Cpu };

    // env setup: Core 1: vectorized architecture
    let mut envs = VecEnv::new(env_fns).with_threads(args.env_threads);
    let (obs_dim, n_actions) = match (envs.single_observation_space(), envs.single_action_space()) {
        (Space::Box { shape, .. }, Space::Discrete(n)) if shape == [4, 84, 84] => (4 * 84 * 84, n as i64),
        (o, a) => fail(2, format!("ppo_atari needs 4x84x84 frames and a Discrete action space, {} has {o:?} and {a:?}", args.env_id)),
    };
    let vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), n_actions);
    // Core 3: Adam with epsilon 1e-5
    let mut optimizer = FlatAdam::new(&vs, 1e-5);

    let run_dir = std::path::Path::new("runs").join(&run_name);
    let mut log = RunLog::create(&run_dir, &args, (num_iterations * batch_size) as u64)
        .unwrap_or_else(|e| fail(1, format!("cannot write {}: {e}", run_dir.display())));

    // storage: each step's tensors stay on the device and are joined after the rollout;
    // rewards and dones are made and used on the host (env, GAE), so they stay there
    let (n, ne) = (args.num_envs as i64, args.num_envs);
    let mut rewards = vec![0f32; batch_size];
    let mut dones = vec![0f32; batch_size];

    // start the game
    let mut global_step = 0u64;
    let start_time = Instant::now();
    envs.reset(Some(args.seed));
    let mut next_done = vec![0f32; ne];
    let mut action_buf = vec![0i64; ne];

    for iteration in 1..=num_iterations {
        let (collect_start, mut env_seconds) = (Instant::now(), 0.0);
        // Core 4: learning-rate annealing, linearly to 0
        let frac = if args.anneal_lr { 1.0 - (iteration as f64 - 1.0) / num_iterations as f64 } else { 1.0 };
        let lr = frac * args.learning_rate;

        let (mut obs, mut actions, mut logprobs, mut values) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for step in 0..args.num_steps {
            global_step += ne as u64;
            let next_obs = Tensor::from_slice(&envs.obs).view([n, obs_dim]).to_device(device);
            dones[step * ne..(step + 1) * ne].copy_from_slice(&next_done);
            let (action, logprob, _, value) = tch::no_grad(|| agent.get_action_and_value(&next_obs, None));
            action.to_device(Device::Cpu).copy_data(&mut action_buf, ne);
            obs.push(next_obs);
            actions.push(action);
            logprobs.push(logprob);
            values.push(value.view([n]));

            let env_start = Instant::now();
            envs.step(Action::Discrete(&action_buf));
            env_seconds += env_start.elapsed().as_secs_f64();
            rewards[step * ne..(step + 1) * ne].copy_from_slice(&envs.rewards);
            // termination and truncation both end the episode (CleanRL does not bootstrap truncation)
            for (d, (term, trunc)) in next_done.iter_mut().zip(envs.terminated.iter().zip(&envs.truncated)) {
                *d = (*term || *trunc) as u8 as f32;
            }
            for ep in &envs.finished {
                log.episode(global_step, ep.r, ep.l);
            }
        }

        // the flattened batch, step-major (row step * num_envs + env), as CleanRL reshapes it
        let (b_obs, b_actions) = (Tensor::cat(&obs, 0), Tensor::cat(&actions, 0));
        let (b_logprobs, b_values) = (Tensor::cat(&logprobs, 0), Tensor::cat(&values, 0));
        let next_obs = Tensor::from_slice(&envs.obs).view([n, obs_dim]).to_device(device);
        let next_value = tch::no_grad(|| agent.get_value(&next_obs)).view([-1]);

        // Core 5: GAE, as a plain loop over host copies
        let host = |x: &Tensor| Vec::<f32>::try_from(x.to_device(Device::Cpu)).unwrap_or_else(|e| fail(1, e));
        let (v, nv) = (host(&b_values), host(&next_value));
        let mut adv = vec![0f32; batch_size];
        let (gamma, lambda) = (args.gamma as f32, args.gae_lambda as f32);
        for e in 0..ne {
            let mut lastgaelam = 0f32;
            for s in (0..args.num_steps).rev() {
                let i = s * ne + e;
                // bootstrap from the next value unless the episode ended before the next step
                let (nextnonterminal, nextvalues) =
                    if s == args.num_steps - 1 { (1.0 - next_done[e], nv[e]) } else { (1.0 - dones[i + ne], v[i + ne]) };
                let delta = rewards[i] + gamma * nextvalues * nextnonterminal - v[i];
                lastgaelam = delta + gamma * lambda * nextnonterminal * lastgaelam;
                adv[i] = lastgaelam;
            }
        }
        let ret: Vec<f32> = adv.iter().zip(&v).map(|(a, v)| a + v).collect();
        let b_advantages = Tensor::from_slice(&adv).to_device(device);
        let b_returns = Tensor::from_slice(&ret).to_device(device);
        let collection_seconds = collect_start.elapsed().as_secs_f64();

        // Optimizing the policy and value network
        let learn_start = Instant::now();
        let mut clipfracs = Vec::new();
        let mut first_mb = (Tensor::from(0f32), Tensor::from(0f32));
        let mut last = None;
        for epoch in 0..args.update_epochs {
            // Core 6: shuffled mini-batches that cover the whole batch each epoch
            let b_inds = Tensor::randperm(batch_size as i64, (Kind::Int64, device));
            for start in (0..batch_size).step_by(minibatch_size) {
                let mb_inds = b_inds.narrow(0, start as i64, minibatch_size as i64);
                let mb_obs = b_obs.index_select(0, &mb_inds);
                let mb_actions = b_actions.index_select(0, &mb_inds);
                let (_, newlogprob, entropy, newvalue) = agent.get_action_and_value(&mb_obs, Some(&mb_actions));
                let logratio = &newlogprob - b_logprobs.index_select(0, &mb_inds);
                let ratio = logratio.exp();

                // Core 12: debug variables
                let (old_approx_kl, approx_kl, clipfrac) = tch::no_grad(|| {
                    let old_approx_kl = (-&logratio).mean(Kind::Float);
                    let approx_kl = ((&ratio - 1.0) - &logratio).mean(Kind::Float);
                    let clipfrac = (&ratio - 1.0).abs().gt(args.clip_coef).to_kind(Kind::Float).mean(Kind::Float);
                    if epoch == 0 && start == 0 {
                        // the policy has not moved yet: the ratio must be exactly 1 here
                        first_mb = ((&ratio - 1.0).abs().max(), clipfrac.shallow_clone());
                    }
                    (old_approx_kl, approx_kl, clipfrac)
                });
                clipfracs.push(clipfrac);

                let mut mb_advantages = b_advantages.index_select(0, &mb_inds);
                if args.norm_adv {
                    // Core 7: per-minibatch advantage normalization
                    mb_advantages = (&mb_advantages - mb_advantages.mean(Kind::Float)) / (mb_advantages.std(true) + 1e-8);
                }

                // Core 8: clipped surrogate objective
                let pg_loss1 = -&mb_advantages * &ratio;
                let pg_loss2 = -&mb_advantages * ratio.clamp(1.0 - args.clip_coef, 1.0 + args.clip_coef);
                let pg_loss = pg_loss1.max_other(&pg_loss2).mean(Kind::Float);

                let newvalue = newvalue.view([-1]);
                let mb_returns = b_returns.index_select(0, &mb_inds);
                let v_loss = if args.clip_vloss {
                    // Core 9: value-function loss clipping
                    let mb_values = b_values.index_select(0, &mb_inds);
                    let v_loss_unclipped = (&newvalue - &mb_returns).square();
                    let v_clipped = &mb_values + (&newvalue - &mb_values).clamp(-args.clip_coef, args.clip_coef);
                    let v_loss_clipped = (v_clipped - &mb_returns).square();
                    0.5 * v_loss_unclipped.max_other(&v_loss_clipped).mean(Kind::Float)
                } else {
                    0.5 * (&newvalue - &mb_returns).square().mean(Kind::Float)
                };

                // Core 10: one loss with an entropy bonus, one optimizer
                let entropy_loss = entropy.mean(Kind::Float);
                let loss: Tensor = &pg_loss - &entropy_loss * args.ent_coef + &v_loss * args.vf_coef;

                optimizer.zero_grad();
                loss.backward();
                let grad_norm = optimizer.clip_and_step(lr, args.max_grad_norm);
                last = Some((pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, grad_norm, loss));
            }
            // Aux 3: early stopping once the KL of the last minibatch passes the target
            if let (Some(target), Some(l)) = (args.target_kl, &last) {
                if f64::try_from(&l.4).unwrap_or(f64::NAN) > target {
                    break;
                }
            }
        }
        let Some((pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, grad_norm, loss)) = last else {
            unreachable!("at least one minibatch")
        };

        // Core 12: debug variables, logged under CleanRL's names, plus our debug and timing columns
        let scalar = |x: &Tensor| f64::try_from(x).unwrap_or(f64::NAN);
        let sps = (global_step as f64 / start_time.elapsed().as_secs_f64()).floor();
        let row = [
            ("iteration", iteration as f64),
            ("global_step", global_step as f64),
            ("charts/learning_rate", lr),
            ("losses/value_loss", scalar(&v_loss)),
            ("losses/policy_loss", scalar(&pg_loss)),
            ("losses/entropy", scalar(&entropy_loss)),
            ("losses/old_approx_kl", scalar(&old_approx_kl)),
            ("losses/approx_kl", scalar(&approx_kl)),
            ("losses/clipfrac", scalar(&Tensor::stack(&clipfracs, 0).mean(Kind::Float))),
            ("losses/explained_variance", explained_variance(&v, &ret)),
            ("charts/SPS", sps),
            ("debug/first_mb_max_ratio_dev", scalar(&first_mb.0)),
            ("debug/first_mb_clipfrac", scalar(&first_mb.1)),
            ("debug/unclipped_grad_norm", scalar(&grad_norm)),
            ("timing/collection_seconds", collection_seconds),
            ("timing/env_seconds", env_seconds),
            ("timing/learning_seconds", learn_start.elapsed().as_secs_f64()),
        ];
        log.update(&row, num_iterations).unwrap_or_else(|e| fail(1, format!("cannot write {}: {e}", run_dir.display())));
        if !scalar(&loss).is_finite() {
            let dir = run_dir.display();
            fail(1, format!("the loss became non-finite at update {iteration}; metrics so far are in {dir}; try a lower --learning-rate"));
        }
    }

    if args.save_model {
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

/// Loads the saved weights into a fresh agent and plays `episodes` episodes with sampled actions.
fn evaluate(
    path: &std::path::Path,
    args: &Args,
    obs_dim: i64,
    n_actions: i64,
    device: Device,
    episodes: usize,
) -> Result<Vec<f64>, String> {
    let mut vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), n_actions);
    vs.load(path).map_err(|e| format!("cannot load {}: {e}", path.display()))?;
    let mut env = VecEnv::new(vec![make_env(&args.env_id, None).map_err(|e| e.to_string())?]);
    env.reset(Some(args.seed));
    let mut returns = Vec::new();
    let mut action = [0i64];
    while returns.len() < episodes {
        let obs = Tensor::from_slice(&env.obs).view([1, obs_dim]).to_device(device);
        let (a, _, _, _) = tch::no_grad(|| agent.get_action_and_value(&obs, None));
        a.to_device(Device::Cpu).copy_data(&mut action, 1);
        env.step(Action::Discrete(&action));
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
