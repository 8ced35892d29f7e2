//! # ppo_continuous: PPO for continuous actions (MuJoCo), a diff of `ppo.rs`
//!
//! CleanRL's `ppo_continuous_action.py`: `ppo.rs` plus the 9 continuous-action details (`// Continuous N: ...`).
//! Beyond it: the model keeps its observation statistics (cleanrl#425), `--bootstrap-truncation`, `--adaptive-lr`.
//! Run: `cargo run --release --bin ppo_continuous -- --env-id HalfCheetah-v4 --seed 1`; writes `runs/<run-name>/`.
//! What is not PPO comes from the package's library (`src/lib.rs`), as CleanRL's from torch, tyro and cleanrl_utils.

use clap::Parser;
use envs::{Action, Env, RecordEpisodeStatistics, RecordVideo, RunningMeanStd, Space, VecEnv};
use ppo_details::distributions::Normal;
use ppo_details::{fail, parse_args, pick_device, play, to_host, var, FlatAdam, OrExit, RunArgs, RunLog, Start, Trace};
use ppo_details::{flags::*, Logged::*}; // value parsers (each numeric flag's range); a logged value, host or device
use tch::{nn, nn::Module, Device, IndexOp, Kind, Tensor};

#[derive(Parser, Debug, serde::Serialize, serde::Deserialize)]
#[command(about = "PPO for continuous actions (HalfCheetah-v4), after CleanRL's ppo_continuous_action.py")]
struct Args {
    // the experiment's flags (seed, cuda, threads, checkpoints), the same in every binary: RunArgs
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
    /// record env 0's games, every frame, on CleanRL's schedule, as GIFs in videos/<run-name>/ (not MuJoCo's)
    #[arg(long, default_value_t = false)]
    capture_video: bool,
    /// the id of the environment (HalfCheetah-v4 or another of gymnasium's MuJoCo v4 ids, Pendulum-v1, ...)
    #[arg(long, default_value = "HalfCheetah-v4")]
    env_id: String,
    /// total timesteps of the experiment
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    total_timesteps: u64,
    /// the learning rate of the optimizer
    #[arg(long, default_value_t = 3e-4, value_parser = positive)]
    learning_rate: f64,
    /// the number of parallel game environments
    #[arg(long, default_value_t = 1, value_parser = at_least_one)]
    num_envs: usize,
    /// the number of steps to run in each environment per policy rollout
    #[arg(long, default_value_t = 2048, value_parser = at_least_one)]
    num_steps: usize,
    /// anneal the learning rate linearly to 0 over the run (--adaptive-lr sets the rate itself instead)
    #[arg(long, default_value_t = true)]
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
    /// the number of mini-batches
    #[arg(long, default_value_t = 32, value_parser = at_least_one)]
    num_minibatches: usize,
    /// the K epochs to update the policy
    #[arg(long, default_value_t = 10, value_parser = at_least_one)]
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
    #[arg(long, default_value_t = 0.0, value_parser = finite)]
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
    /// bootstrap the value at time-limit truncations instead of treating them as terminations (not in CleanRL)
    #[arg(long, default_value_t = false)]
    bootstrap_truncation: bool,
}

// TRY NOT TO MODIFY: Args to the library (one-line errors, --resume, the batch's checks); one_core: 1 thread each
// --adaptive-lr-rule came after runs were made: theirs resume with rsl_rl's rule, the only one then
ppo_details::experiment!(Args, one_core, added_later = &[("adaptive_lr_rule", "rsl-rl")]);

/// CleanRL's `make_env` (ours are flat: no FlattenObservation), with the running statistics the checkpoints keep.
type EnvAndStats = Result<(Box<dyn Env<Obs = f32>>, [envs::SharedRms; 2]), envs::EnvError>;
fn make_env(env_id: &str, gamma: f64, rms: Option<RunningMeanStd>, video: Option<std::path::PathBuf>) -> EnvAndStats {
    let env = RecordEpisodeStatistics::new(RecordVideo::new(envs::make(env_id)?, video)?);
    // Continuous 5: clip actions to the valid range for the env
    let env = envs::ClipAction::new(env);
    let env = envs::NormalizeObservation::new(env).frozen_with(rms); // Continuous 6: observation normalization
    let stats = env.stats();
    // Continuous 7: observation clipping (±10)
    let env = envs::TransformObservation::new(env, |o: &mut [f32]| o.iter_mut().for_each(|x| *x = x.clamp(-10., 10.)));
    // Continuous 8: reward scaling (divide by std of discounted return)
    let env = envs::NormalizeReward::new(env, gamma);
    let stats = [stats, env.stats()];
    let env = envs::TransformReward::new(env, |r: f64| r.clamp(-10.0, 10.0)); // Continuous 9: reward clipping (±10)
    Ok((Box::new(env), stats))
}

/// Core 2: orthogonal weight init with the given gain, zero biases (over nn.Linear's own init: the RNG draws both)
fn layer_init(p: nn::Path, in_dim: i64, out_dim: i64, std: f64) -> nn::Linear {
    let mut layer = nn::linear(p, in_dim, out_dim, Default::default());
    nn::Init::Orthogonal { gain: std }.set(&mut layer.ws);
    tch::no_grad(|| layer.bs.as_mut().map(|bias| bias.fill_(0.0)));
    layer
}

// Core 13: separate policy and value networks
// Continuous 4: separate policy and value MLPs
struct Agent {
    critic: nn::Sequential,
    actor_mean: nn::Sequential,
    actor_logstd: Tensor,
    obs_rms: Tensor, // observation statistics (mean, var, count), saved with the weights (cleanrl#425)
}

impl Agent {
    fn new(p: &nn::Path, obs_dim: i64, n_actions: i64) -> Agent {
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
        let (critic, actor_mean) = (mlp(p / "critic", 1, 1.0), mlp(p / "actor_mean", n_actions, 0.01));
        // Continuous 2: state-independent log std, initialized to 0
        let actor_logstd = p.zeros("actor_logstd", &[1, n_actions]);
        let obs_rms = p.add("obs_rms", Tensor::zeros([2 * obs_dim + 1], (Kind::Double, p.device())), false);
        Agent { critic, actor_mean, actor_logstd, obs_rms }
    }

    fn get_value(&self, x: &Tensor) -> Tensor {
        self.critic.forward(x)
    }

    /// torch's Normal(mean, std), as CleanRL's; samples an action when none is given: (action, logprob, entropy, value)
    fn get_action_and_value(&self, x: &Tensor, action: Option<&Tensor>) -> [Tensor; 4] {
        // Continuous 1: Normal action distribution
        let action_mean = self.actor_mean.forward(x);
        let action_logstd = self.actor_logstd.expand_as(&action_mean);
        let action_std = action_logstd.exp();
        let probs = Normal::new(&action_mean, &action_std);
        let action = action.map_or_else(|| probs.sample(), |a| a.shallow_clone());
        // Continuous 3: independent action components (log-probs and entropies summed)
        let log_prob = probs.log_prob(&action).sum_dim_intlist(1, false, Kind::Float);
        let entropy = probs.entropy().sum_dim_intlist(1, false, Kind::Float);
        [action, log_prob, entropy, self.get_value(x)]
    }
}

fn main() {
    // bad input (a flag out of range, flags that cannot work together): one line, exit code 2, nothing written
    let args: Args = parse_args();
    let (num_envs, num_steps) = (args.num_envs, args.num_steps);
    let batch_size = num_envs * num_steps;
    let minibatch_size = batch_size / args.num_minibatches;
    let num_iterations = args.total_timesteps as usize / batch_size;
    let run_name = format!("{}__{}__{}__{}", args.env_id, args.run.exp_name, args.run.seed, ppo_details::unix_time());
    let video_dir: Option<std::path::PathBuf> = args.capture_video.then(|| ["videos", &run_name].iter().collect());
    let make = |i: usize| make_env(&args.env_id, args.gamma, None, video_dir.clone().filter(|_| i == 0));
    let env_fns: Result<Vec<_>, _> = (0..args.num_envs).map(make).collect();
    let (env_fns, stats): (Vec<_>, Vec<_>) = env_fns.unwrap_or_else(|e| fail(2, e)).into_iter().unzip();

    // seeding: torch's generator, and numpy's legacy one for the minibatches (np.random.seed takes 32 bits)
    tch::manual_seed(args.run.seed as i64);
    let mut np_random = envs::numpy::RandomState::new(args.run.seed as u32);
    ppo_details::torch_deterministic(args.run.torch_deterministic); // cuDNN: deterministic algorithms, no autotuner
    let (device, device_name) = pick_device(args.run.cuda, ppo_details::Network::Mlp);
    println!("device: {device_name}");

    // env setup. Core 1: vectorized architecture
    let mut envs = VecEnv::new(env_fns).with_threads(args.run.env_threads);
    let (obs_dim, n_actions) = match (envs.single_observation_space(), envs.single_action_space()) {
        (Space::Box { shape, .. }, Space::Box { shape: a, .. }) if shape.len() == 1 && a.len() == 1 => {
            (shape[0] as i64, a[0] as i64)
        }
        (o, a) => fail(2, format!("{}: {o} observations, {a} actions; ppo_continuous needs 1-D Boxes", args.env_id)),
    };
    let mut vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), obs_dim, n_actions);
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

    // storage: obs, actions, logprobs, values on the device, a tensor per step; rewards, dones on the host, for GAE
    let per_step = || (0..num_steps).map(|_| Tensor::new()).collect::<Vec<_>>();
    let (mut obs, mut actions, mut logprobs, mut values) = (per_step(), per_step(), per_step(), per_step());
    let mut mus = per_step(); // Extra 1: the rollout's action means
    let mut rewards = vec![vec![0f32; num_envs]; num_steps];
    let mut dones = vec![vec![0f32; num_envs]; num_steps];

    // start the game (with --resume: where the checkpoint stood, in fresh episodes)
    let mut global_step = from.global_step;
    envs.reset(Some(from.seed));
    let mut next_done = vec![0f32; num_envs];
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

        let (mut truncations, mut final_obs) = (Vec::new(), Vec::new()); // (step, env) and its last observation
        for step in 0..num_steps {
            global_step += num_envs as u64;
            let next_obs = Tensor::from_slice(&envs.obs).view([-1, obs_dim]).to_device(device);
            obs[step] = next_obs.shallow_clone();
            dones[step].copy_from_slice(&next_done);

            let [action, logprob, _, value] = tch::no_grad(|| agent.get_action_and_value(&next_obs, None));
            values[step] = value;
            if args.adaptive_lr {
                mus[step] = tch::no_grad(|| agent.actor_mean.forward(&next_obs));
            }
            // the step's one copy down: the actions, for the envs
            action.to_device(Device::Cpu).copy_data(&mut action_buf, num_envs * n_actions as usize);
            actions[step] = action;
            logprobs[step] = logprob;

            // CleanRL's `envs.step(action)`: it writes envs.obs, .rewards, .terminated, .truncated, .finished
            envs.step(Action::Continuous(&action_buf)); // Continuous 5: the unclipped sample is stored
            rewards[step].copy_from_slice(&envs.rewards);
            for e in (0..num_envs).filter(|&e| args.bootstrap_truncation && envs.truncated[e] && !envs.terminated[e]) {
                truncations.push((step, e));
                final_obs.extend_from_slice(&envs.final_obs[e * envs.obs_dim..][..envs.obs_dim]);
            }
            // termination and truncation both end the episode (CleanRL does not bootstrap truncation)
            for (done, (term, trunc)) in next_done.iter_mut().zip(envs.terminated.iter().zip(&envs.truncated)) {
                *done = (*term || *trunc) as u8 as f32;
            }
            log.episodes(global_step, &envs.finished);
        }

        if !truncations.is_empty() {
            // a time limit is not a real end: add gamma * V(final observation) (cleanrl#198), valued
            // for the whole rollout in one forward pass (the policy has not changed since)
            let final_obs = Tensor::from_slice(&final_obs).view([truncations.len() as i64, obs_dim]).to_device(device);
            let final_values = to_host(&tch::no_grad(|| agent.get_value(&final_obs)));
            for (&(step, e), v) in truncations.iter().zip(final_values) {
                rewards[step][e] += (args.gamma * v as f64) as f32;
            }
        }

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
                let delta = rewards[t][e] + gamma * nextvalues * nextnonterminal - values_host[t * num_envs + e];
                lastgaelam[e] = delta + gamma_lambda * nextnonterminal * lastgaelam[e];
                advantages[t * num_envs + e] = lastgaelam[e];
            }
        }
        let returns: Vec<f32> = advantages.iter().zip(&values_host).map(|(a, v)| a + v).collect();

        // flatten the batch: row step * num_envs + env, as CleanRL's reshape
        let (b_obs, b_logprobs) = (Tensor::cat(&obs, 0), Tensor::cat(&logprobs, 0));
        let b_actions = Tensor::cat(&actions, 0);
        let b_mus = if args.adaptive_lr { Tensor::cat(&mus, 0) } else { b_actions.zeros_like() }; // Extra 1
        let b_advantages = Tensor::from_slice(&advantages).to_device(device);
        let b_returns = Tensor::from_slice(&returns).to_device(device);
        let b_values = Tensor::cat(&values, 0).view([-1]);

        // Optimizing the policy and value network (the last minibatch's values are logged, as CleanRL's)
        let learning_start = std::time::Instant::now();
        let (mut pg_loss, mut v_loss, mut entropy_loss) = (Tensor::new(), Tensor::new(), Tensor::new());
        let (mut old_approx_kl, mut approx_kl) = (Tensor::new(), Tensor::new());
        let (mut loss, mut grad_norm) = (Tensor::new(), Tensor::new());
        let mut ratio_devs = Vec::new(); // |ratio - 1| of every minibatch, for the clip fractions
        let mut adaptive_kl = f64::NAN; // Extra 1: the last KL the rule saw
        let mut b_inds: Vec<i64> = (0..batch_size as i64).collect();
        for _epoch in 0..args.update_epochs {
            // Core 6: shuffled mini-batches that cover the whole batch each epoch (numpy's shuffle, PPO_TRACE keeps it)
            np_random.shuffle(&mut b_inds);
            let b_inds = trace.order(Tensor::from_slice(&b_inds).to_device(device));
            for start in (0..batch_size).step_by(minibatch_size) {
                let mb_inds = b_inds.narrow(0, start as i64, minibatch_size as i64);
                let [_, newlogprob, entropy, newvalue] =
                    agent.get_action_and_value(&b_obs.i(&mb_inds), Some(&b_actions.i(&mb_inds)));
                let logratio = &newlogprob - b_logprobs.i(&mb_inds);
                let ratio = logratio.exp();

                // Core 12: debug variables: two KL estimates (joschu.net/blog/kl-approx.html), |ratio - 1|
                tch::no_grad(|| {
                    old_approx_kl = (-&logratio).mean(Kind::Float);
                    approx_kl = ((&ratio - 1.0) - &logratio).mean(Kind::Float);
                    ratio_devs.push((&ratio - 1.0).abs());
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

                if args.adaptive_lr {
                    // Extra 1: KL-adaptive learning rate (rsl_rl's or the TUM report's rule), from this minibatch's KL
                    let mu = tch::no_grad(|| agent.actor_mean.forward(&b_obs.i(&mb_inds)));
                    adaptive_kl =
                        gaussian_kl(&b_mus.i(&mb_inds), &old_logstd, &mu, &agent.actor_logstd).double_value(&[]);
                    lr = adapt_lr(&args.adaptive_lr_rule, lr, adaptive_kl, args.desired_kl);
                }

                optimizer.zero_grad();
                loss.backward();
                // Core 11: global gradient-norm clipping
                grad_norm = optimizer.clip_grad_norm(args.max_grad_norm);
                optimizer.step(lr);
            }
            // Aux 3: early stopping once the KL of the last minibatch passes the target
            if args.target_kl.is_some_and(|target_kl| approx_kl.double_value(&[]) > target_kl) {
                break;
            }
        }

        // explained variance, 1 - Var[returns - values] / Var[returns] (numpy's float32 var: NaN for constant returns)
        let var_y = var(&returns);
        let residuals: Vec<f32> = returns.iter().zip(&values_host).map(|(y, v)| y - v).collect();
        let explained_var = if var_y == 0.0 { f64::NAN } else { (1.0 - var(&residuals) / var_y) as f64 };

        // the clip fraction: the ratios the surrogate clipped (the first minibatch's: none, every ratio 1: tests check)
        let clipfrac = |devs: &Tensor| devs.gt(clip_coef).to_kind(Kind::Float).mean(Kind::Float);
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
            ("losses/clipfrac", OnDevice(&clipfrac(&Tensor::cat(&ratio_devs, 0)))),
            ("losses/explained_variance", OnHost(explained_var)),
            ("debug/first_mb_max_ratio_dev", OnDevice(&ratio_devs[0].max())),
            ("debug/first_mb_clipfrac", OnDevice(&clipfrac(&ratio_devs[0]))),
            ("debug/adaptive_kl", if args.adaptive_lr { OnHost(adaptive_kl) } else { Off }),
            ("debug/unclipped_grad_norm", OnDevice(&grad_norm)),
        ];
        trace.finish(&row, [&b_obs, &b_actions, &next_obs], [&rewards, &dones], &next_done).or_exit();
        log.update(&row, &loss, envs.take_step_seconds(), learning_start).or_exit();
        log.checkpoint(&optimizer, stats.as_flattened()).or_exit();
    }

    if args.run.save_model {
        let rms = stats[0][0].lock().clone(); // env 0's observation statistics go into the model file
        let rms = Tensor::from_slice(&[rms.mean, rms.var, vec![rms.count]].concat());
        tch::no_grad(|| agent.obs_rms.shallow_clone().copy_(&rms));
        // CleanRL's evaluate: the saved file, read back into the agent, plays 10 episodes with sampled actions
        let model_path = log.save(&vs, &args.run.exp_name).or_exit();
        vs.load(&model_path).unwrap_or_else(|e| fail(1, format!("cannot load {}: {e}", model_path.display())));
        let v = Vec::<f64>::try_from(agent.obs_rms.to_device(Device::Cpu)).unwrap_or_else(|e| fail(1, e));
        let d = obs_dim as usize;
        let rms = RunningMeanStd { mean: v[..d].to_vec(), var: v[d..2 * d].to_vec(), count: v[2 * d] };
        let env = make_env(&args.env_id, args.gamma, Some(rms), None).unwrap_or_else(|e| fail(1, e)).0;
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
