//! # ppo_multidiscrete_mask: PPO with invalid action masking, a diff of `ppo_atari.rs`
//!
//! The blog's `ppo_multidiscrete_mask.py`: `ppo_atari.rs` with a `MultiDiscrete` action (one
//! categorical per component, `// MultiDiscrete 1`) whose invalid entries are masked out
//! (`// Aux 4`), the env's masks stored and minibatched with the observations, and the blog's
//! small CNN on a one-hot grid (no Atari wrappers): MicroRTS's real engine (`envs::microrts`),
//! or the native GridHarvest-v0. `--invalid-action-masking false` is the ablation.
//!
//! Run: `cargo run --release --bin ppo_multidiscrete_mask -- --env-id MicrortsMining-v1 --seed 1`
//! Writes `runs/<env-id>__<exp-name>__<seed>__<unix-time>/`: args.json, episodes.csv and
//! updates.csv (CleanRL's metric names, plus debug columns), TensorBoard events, and with
//! `--save-model` the weights and eval.csv.
//!
//! Read from here to the plumbing banner: below it, code identical in every binary (the
//! optimizer, the run log, argument parsing), no PPO.

use clap::Parser;
use envs::{Action, Env, RecordEpisodeStatistics, Space, VecEnv};
use std::time::Instant;
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};

/// Each numeric flag's range is checked by its value parser (see the plumbing).
#[derive(Parser, Debug, serde::Serialize)]
#[command(allow_negative_numbers = true)]
#[command(about = "PPO with invalid action masking (MicrortsMining-v1), after the blog's ppo_multidiscrete_mask.py")]
struct Args {
    /// the name of this experiment (part of the run directory's name)
    #[arg(long, default_value = env!("CARGO_BIN_NAME"), value_parser = plain_name)]
    exp_name: String,
    /// seed of the experiment (envs get seed + i, torch gets seed)
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// turn cuDNN's autotuner off (tch offers no switch for deterministic algorithms; CPU runs are deterministic)
    #[arg(long, default_value_t = true)]
    torch_deterministic: bool,
    /// use CUDA when a GPU is present (`--cuda false` for the CPU)
    #[arg(long, default_value_t = true)]
    cuda: bool,
    /// libtorch intra-op threads (1 is fastest for small networks, every core for a CNN)
    #[arg(long, default_value_t = all_cores(), value_parser = at_least_one)]
    torch_threads: usize,
    /// threads stepping the envs (results do not depend on it)
    #[arg(long, default_value_t = all_cores(), value_parser = at_least_one)]
    env_threads: usize,
    /// save the weights to the run directory, then evaluate them for 10 episodes
    #[arg(long, default_value_t = false)]
    save_model: bool,
    /// the id of the environment (MicroRTS: MicrortsMining-v1, ...; or the native GridHarvest-v0)
    #[arg(long, default_value = "MicrortsMining-v1")]
    env_id: String,
    /// total timesteps of the experiment
    #[arg(long, default_value_t = 2_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    total_timesteps: u64,
    /// the learning rate of the optimizer
    #[arg(long, default_value_t = 2.5e-4, value_parser = positive)]
    learning_rate: f64,
    /// the number of parallel game environments
    #[arg(long, default_value_t = 8, value_parser = at_least_one)]
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
    #[arg(long, default_value_t = 0.1, value_parser = positive)]
    clip_coef: f64,
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
    /// mask the invalid actions out (`false`: sample from every action, the blog's ablation)
    #[arg(long, default_value_t = true)]
    invalid_action_masking: bool,
}

/// Every core of the machine: the default for a CNN's libtorch threads and for the envs.
fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The combinations of flags that cannot run (each flag's own range is checked by clap).
fn check_args(a: &Args) -> Result<(), String> {
    envs::check_id(env!("CARGO_BIN_NAME"), &a.env_id)?;
    let batch_size = a.num_envs * a.num_steps;
    if !batch_size.is_multiple_of(a.num_minibatches) {
        let n = a.num_minibatches;
        Err(format!("--num-envs x --num-steps ({batch_size}) must be divisible by --num-minibatches ({n})"))
    } else if a.total_timesteps < batch_size as u64 {
        let total = a.total_timesteps;
        Err(format!("--total-timesteps ({total}) is below one batch (--num-envs x --num-steps = {batch_size})"))
    } else if a.norm_adv && batch_size / a.num_minibatches < 2 {
        Err("--norm-adv needs minibatches of 2 or more samples (the std of one is NaN); lower --num-minibatches".into())
    } else {
        Ok(())
    }
}

/// The blog's `make_env`: the env with its episode statistics, no other wrapper.
fn make_env(env_id: &str) -> Result<Box<dyn Env<Obs = f32>>, envs::EnvError> {
    Ok(Box::new(RecordEpisodeStatistics::new(envs::make(env_id)?)))
}

/// Core 2: orthogonal weight init with the given gain, zero biases.
fn layer_init(p: nn::Path, in_dim: i64, out_dim: i64, std: f64) -> nn::Linear {
    let init = nn::Init::Orthogonal { gain: std };
    nn::linear(p, in_dim, out_dim, nn::LinearConfig { ws_init: init, bs_init: Some(nn::Init::Const(0.0)), bias: true })
}

/// Core 2 for convolutions: orthogonal (out, in*k*k) kernels as torch makes them, zero biases.
fn conv_init(p: nn::Path, c_in: i64, c_out: i64, k: i64, stride: i64) -> nn::Conv2D {
    let config = nn::ConvConfig { stride, bs_init: nn::Init::Const(0.0), ..Default::default() };
    let mut conv = nn::conv2d(p, c_in, c_out, k, config);
    let q = nn::init(nn::Init::Orthogonal { gain: 2f64.sqrt() }, &[c_out, c_in * k * k], conv.ws.device());
    tch::no_grad(|| conv.ws.copy_(&q.view_as(&conv.ws)));
    conv
}

// one trunk shared by the policy and value heads (Core 13's other choice): the blog's small CNN
struct Agent {
    network: nn::Sequential,
    critic: nn::Linear,
    actor: nn::Linear,
    /// the grid's (height, width, planes), and the number of choices of each action component
    grid: [i64; 3],
    nvec: Vec<i64>,
}

impl Agent {
    fn new(p: &nn::Path, grid: [i64; 3], nvec: Vec<i64>) -> Agent {
        let (s2, net, [h, w, c]) = (2f64.sqrt(), p / "network", grid);
        let (h2, w2) = ((h - 3) / 2, (w - 3) / 2); // the second convolution's output size
        let network = nn::seq()
            .add(conv_init(&net / 1, c, 16, 3, 2))
            .add_fn(|x| x.relu())
            .add(conv_init(&net / 3, 16, 32, 2, 1))
            .add_fn(|x| x.relu().flatten(1, -1))
            .add(layer_init(&net / 6, 32 * h2 * w2, 128, s2))
            .add_fn(|x| x.relu());
        let actor = layer_init(p / "actor", 128, nvec.iter().sum(), 0.01);
        Agent { network, critic: layer_init(p / "critic", 128, 1, 1.0), actor, grid, nvec }
    }

    /// The shared features of one-hot grids, one row of height * width * planes values per
    /// observation (planes last, as the env writes them; no scaling: the values are 0 or 1).
    fn hidden(&self, x: &Tensor) -> Tensor {
        let [h, w, c] = self.grid;
        self.network.forward(&x.view([-1, h, w, c]).permute([0, 3, 1, 2]))
    }

    fn get_value(&self, x: &Tensor) -> Tensor {
        self.critic.forward(&self.hidden(x))
    }

    /// Samples an action (one value per component) when none is given, from the valid entries
    /// only when a mask is given; returns (action, log-prob, entropy, value).
    fn get_action_and_value(
        &self,
        x: &Tensor,
        action: Option<&Tensor>,
        mask: Option<&Tensor>,
    ) -> (Tensor, Tensor, Tensor, Tensor) {
        let hidden = self.hidden(x);
        let logits = self.actor.forward(&hidden);
        // MultiDiscrete 1: one categorical per component; log-probs and entropies summed
        let split = |t: &Tensor| t.split_with_sizes(self.nvec.as_slice(), 1);
        let masks = mask.map(split);
        let (mut actions, mut log_prob, mut entropy) = (Vec::new(), Vec::new(), Vec::new());
        for (i, logits) in split(&logits).iter().enumerate() {
            let a = action.map(|a| a.select(1, i as i64));
            let (a, lp, h) = categorical_masked(logits, masks.as_ref().map(|m| &m[i]), a.as_ref());
            actions.push(a);
            log_prob.push(lp);
            entropy.push(h);
        }
        let sum = |xs: Vec<Tensor>| Tensor::stack(&xs, 0).sum_dim_intlist(0, false, Kind::Float);
        (Tensor::stack(&actions, 1), sum(log_prob), sum(entropy), self.critic.forward(&hidden))
    }
}

/// The blog's `CategoricalMasked` for one component: samples when no action is given; returns
/// (action, log-prob, entropy).
fn categorical_masked(logits: &Tensor, mask: Option<&Tensor>, action: Option<&Tensor>) -> (Tensor, Tensor, Tensor) {
    // Aux 4: invalid action masking, invalid logits replaced by -1e8 (probability 0, no gradient)
    let logits = match mask {
        Some(mask) => logits.where_scalarother(mask, -1e8), // a scalar: no copy to the device
        None => logits.shallow_clone(),
    };
    let log_probs = logits.log_softmax(-1, Kind::Float);
    let probs = log_probs.exp();
    let action = match action {
        Some(a) => a.shallow_clone(),
        None => sample(&probs),
    };
    let log_prob = log_probs.gather(-1, &action.unsqueeze(-1), false).squeeze_dim(-1);
    let p_log_p = match mask {
        // Aux 4: the entropy sums over the valid entries only
        Some(mask) => (&probs * &log_probs).where_scalarother(mask, 0.0),
        None => &probs * &log_probs,
    };
    (action, log_prob, -p_log_p.sum_dim_intlist(-1, false, Kind::Float))
}

/// One action per row of `probs` (a Categorical sample), by inverting the CDF: the first action
/// whose cumulative probability exceeds a uniform draw (5 us here; multinomial takes 15).
fn sample(probs: &Tensor) -> Tensor {
    let cdf = probs.cumsum(-1, Kind::Float);
    // the draw is scaled by the CDF's total, so a rounding shortfall never picks past the last
    // action with a probability above 0 (a masked action after it would be picked otherwise)
    let u = Tensor::rand([probs.size()[0], 1], (Kind::Float, probs.device())) * cdf.narrow(1, probs.size()[1] - 1, 1);
    cdf.lt_tensor(&u).sum_dim_intlist(-1, false, Kind::Int64)
}

/// Core 12: at epoch 0, minibatch 0 the policy has not moved yet, so the ratio must be exactly 1
/// and nothing clipped; logged every update and checked by the tests.
struct FirstMinibatch {
    max_ratio_dev: Tensor,
    clipfrac: Tensor,
}

/// The last minibatch's losses and statistics: CleanRL logs those of the last one.
struct LastMinibatch {
    pg_loss: Tensor,
    v_loss: Tensor,
    entropy_loss: Tensor,
    old_approx_kl: Tensor,
    approx_kl: Tensor,
    grad_norm: Tensor,
    loss: Tensor,
}

fn main() {
    let args = parse_args();
    // bad input: one line naming the problem, exit code 2, nothing written
    check_args(&args).unwrap_or_else(|e| fail(2, e));
    let (num_envs, num_steps) = (args.num_envs, args.num_steps);
    let batch_size = num_envs * num_steps;
    let minibatch_size = batch_size / args.num_minibatches;
    let num_iterations = args.total_timesteps as usize / batch_size;
    let unix_time = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let run_name = format!("{}__{}__{}__{unix_time}", args.env_id, args.exp_name, args.seed);
    let env_fns: Result<Vec<_>, _> = (0..args.num_envs).map(|_| make_env(&args.env_id)).collect();
    let env_fns = env_fns.unwrap_or_else(|e| fail(2, e));

    // seeding
    tch::manual_seed(args.seed as i64);
    tch::set_num_threads(args.torch_threads as i32);
    tch::Cuda::cudnn_set_benchmark(!args.torch_deterministic);
    let (device, device_name) = pick_device(args.cuda);
    println!("device: {device_name}");

    // env setup. Core 1: vectorized architecture
    let mut envs = VecEnv::new(env_fns).with_threads(args.env_threads);
    let (grid, nvec) = match (envs.single_observation_space(), envs.single_action_space()) {
        (Space::Box { shape, .. }, Space::MultiDiscrete(nvec))
            if shape.len() == 3 && shape[0] >= 5 && shape[1] >= 5 =>
        {
            ([shape[0] as i64, shape[1] as i64, shape[2] as i64], nvec.iter().map(|&n| n as i64).collect::<Vec<_>>())
        }
        (o, a) => fail(2, format!("{}: {o} observations, {a} actions; needs a grid and MultiDiscrete", args.env_id)),
    };
    let (obs_dim, mask_dim) = (grid.iter().product::<i64>(), envs.mask_dim as i64);
    let vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), grid, nvec.clone());
    // Core 3: Adam with epsilon 1e-5
    let mut optimizer = FlatAdam::new(&vs, 1e-5);
    let mut log = RunLog::create(&run_name, &args, &device_name, (num_iterations * batch_size) as u64);

    // storage: obs, actions, logprobs and values on the device; rewards and dones on the host,
    // where the envs write them and GAE reads them
    let (steps, n) = (num_steps as i64, num_envs as i64);
    let obs = Tensor::zeros([steps, n, obs_dim], (Kind::Float, device));
    let actions = Tensor::zeros([steps, n, nvec.len() as i64], (Kind::Int64, device));
    let masks = Tensor::zeros([steps, n, mask_dim], (Kind::Bool, device)); // Aux 4: each observation's mask
    let logprobs = Tensor::zeros([steps, n], (Kind::Float, device));
    let values = Tensor::zeros([steps, n], (Kind::Float, device));
    let mut rewards = vec![vec![0f32; num_envs]; num_steps];
    let mut dones = vec![vec![0f32; num_envs]; num_steps];

    // start the game
    let mut global_step = 0u64;
    let start_time = Instant::now();
    envs.reset(Some(args.seed));
    let mut next_done = vec![0f32; num_envs];
    let mut action_buf = vec![0i64; num_envs * nvec.len()];
    // where each component's entries start in a mask row
    let offsets: Vec<usize> = (0..nvec.len()).map(|i| nvec[..i].iter().sum::<i64>() as usize).collect();

    for iteration in 1..=num_iterations {
        // Core 4: learning-rate annealing, linearly to 0
        let frac = if args.anneal_lr { 1.0 - (iteration as f64 - 1.0) / num_iterations as f64 } else { 1.0 };
        let lr = frac * args.learning_rate;

        let mut invalid_actions = 0;
        for step in 0..num_steps {
            global_step += num_envs as u64;
            let next_obs = Tensor::from_slice(&envs.obs).view([n, obs_dim]).to_device(device);
            obs.get(step as i64).copy_(&next_obs);
            let next_mask = Tensor::from_slice(&envs.masks).view([n, mask_dim]).to_device(device);
            masks.get(step as i64).copy_(&next_mask);
            dones[step].copy_from_slice(&next_done);

            let mask = args.invalid_action_masking.then_some(&next_mask);
            let (action, logprob, _, value) = tch::no_grad(|| agent.get_action_and_value(&next_obs, None, mask));
            values.get(step as i64).copy_(&value.flatten(0, -1));
            actions.get(step as i64).copy_(&action);
            logprobs.get(step as i64).copy_(&logprob);
            // the step's one copy down: the actions, for the envs
            action.to_device(Device::Cpu).copy_data(&mut action_buf, num_envs * nvec.len());
            // sampled actions with a masked component: none while masking is on
            let rows = action_buf.chunks(nvec.len()).zip(envs.masks.chunks(envs.mask_dim));
            invalid_actions += rows.filter(|(a, m)| a.iter().zip(&offsets).any(|(&a, &o)| !m[o + a as usize])).count();

            // CleanRL's `next_obs, reward, terminations, truncations, infos = envs.step(action)`: the
            // envs write envs.obs, envs.rewards, envs.terminated, envs.truncated, envs.finished
            envs.step(Action::Discrete(&action_buf));
            rewards[step].copy_from_slice(&envs.rewards);
            // termination and truncation both end the episode (CleanRL does not bootstrap truncation)
            for (done, (term, trunc)) in next_done.iter_mut().zip(envs.terminated.iter().zip(&envs.truncated)) {
                *done = (*term || *trunc) as u8 as f32;
            }
            for ep in &envs.finished {
                log.episode(global_step, ep.r, ep.l);
            }
        }

        // bootstrap value if not done; the values come down to the host once per rollout, for GAE
        let next_obs = Tensor::from_slice(&envs.obs).view([n, obs_dim]).to_device(device);
        let next_value = to_host(&tch::no_grad(|| agent.get_value(&next_obs)));
        let b_values_host = to_host(&values); // row step * num_envs + env
        let values_host: Vec<&[f32]> = b_values_host.chunks(num_envs).collect();
        // Core 5: GAE, as a plain loop on the host
        let (gamma, gae_lambda) = (args.gamma as f32, args.gae_lambda as f32);
        let mut advantages = vec![vec![0f32; num_envs]; num_steps];
        let mut lastgaelam = vec![0f32; num_envs];
        for t in (0..num_steps).rev() {
            for e in 0..num_envs {
                let (nextnonterminal, nextvalues) = if t == num_steps - 1 {
                    (1.0 - next_done[e], next_value[e])
                } else {
                    (1.0 - dones[t + 1][e], values_host[t + 1][e])
                };
                let delta = rewards[t][e] + gamma * nextvalues * nextnonterminal - values_host[t][e];
                lastgaelam[e] = delta + gamma * gae_lambda * nextnonterminal * lastgaelam[e];
                advantages[t][e] = lastgaelam[e];
            }
        }
        let advantages = advantages.concat();
        let returns: Vec<f32> = advantages.iter().zip(&b_values_host).map(|(a, v)| a + v).collect();

        // flatten the batch: row step * num_envs + env, as CleanRL's reshape
        let (b_obs, b_logprobs) = (obs.view([-1, obs_dim]), logprobs.view([-1]));
        let b_actions = actions.view([-1, nvec.len() as i64]);
        let b_masks = masks.view([-1, mask_dim]);
        let b_advantages = Tensor::from_slice(&advantages).to_device(device);
        let (b_returns, b_values) = (Tensor::from_slice(&returns).to_device(device), values.view([-1]));

        // Optimizing the policy and value network
        let learning_start = Instant::now();
        let (mut first, mut last) = (None, None);
        let mut ratios = Vec::new();
        for epoch in 0..args.update_epochs {
            // Core 6: shuffled mini-batches that cover the whole batch each epoch (the batch is
            // gathered in the shuffled order once per epoch; minibatches are slices of it)
            let b_inds = Tensor::randperm(batch_size as i64, (Kind::Int64, device));
            let shuffled = |t: &Tensor| t.index_select(0, &b_inds).split(minibatch_size as i64, 0);
            let (obs_mbs, actions_mbs, logprobs_mbs) = (shuffled(&b_obs), shuffled(&b_actions), shuffled(&b_logprobs));
            let (advantages_mbs, returns_mbs) = (shuffled(&b_advantages), shuffled(&b_returns));
            let values_mbs = shuffled(&b_values);
            // Aux 4: the masks minibatched with the same indices
            let masks_mbs = args.invalid_action_masking.then(|| shuffled(&b_masks));
            for (mb, start) in (0..batch_size).step_by(minibatch_size).enumerate() {
                let mb_masks = masks_mbs.as_ref().map(|m| &m[mb]);
                let (_, newlogprob, entropy, newvalue) =
                    agent.get_action_and_value(&obs_mbs[mb], Some(&actions_mbs[mb]), mb_masks);
                let logratio = &newlogprob - &logprobs_mbs[mb];
                let ratio = logratio.exp();

                // Core 12: debug variables (the clip fraction from all ratios after the update; the
                // KL estimates below, of each epoch's last minibatch: the ones logged and checked)
                ratios.push(ratio.detach());
                if epoch == 0 && start == 0 {
                    let max_ratio_dev = tch::no_grad(|| (&ratio - 1.0).abs().max());
                    first = Some(FirstMinibatch { max_ratio_dev, clipfrac: clipfrac(&ratios, args.clip_coef) });
                }

                let mut mb_advantages = advantages_mbs[mb].shallow_clone();
                if args.norm_adv {
                    // Core 7: per-minibatch advantage normalization
                    mb_advantages =
                        (&mb_advantages - mb_advantages.mean(Kind::Float)) / (mb_advantages.std(true) + 1e-8);
                }

                // Core 8: clipped surrogate objective
                let pg_loss1 = -&mb_advantages * &ratio;
                let pg_loss2 = -&mb_advantages * ratio.clamp(1.0 - args.clip_coef, 1.0 + args.clip_coef);
                let pg_loss = pg_loss1.max_other(&pg_loss2).mean(Kind::Float);

                let newvalue = newvalue.view([-1]);
                let mb_returns = &returns_mbs[mb];
                let v_loss = if args.clip_vloss {
                    // Core 9: value-function loss clipping
                    let mb_values = &values_mbs[mb];
                    let v_loss_unclipped = (&newvalue - mb_returns).square();
                    let v_clipped = mb_values + (&newvalue - mb_values).clamp(-args.clip_coef, args.clip_coef);
                    let v_loss_clipped = (v_clipped - mb_returns).square();
                    0.5 * v_loss_unclipped.max_other(&v_loss_clipped).mean(Kind::Float)
                } else {
                    0.5 * (&newvalue - mb_returns).square().mean(Kind::Float)
                };

                // Core 10: one loss with an entropy bonus, one optimizer
                let entropy_loss = entropy.mean(Kind::Float);
                let loss: Tensor = &pg_loss - &entropy_loss * args.ent_coef + &v_loss * args.vf_coef;

                optimizer.zero_grad();
                loss.backward();
                // Core 11: global gradient-norm clipping
                let grad_norm = optimizer.clip_grad_norm(args.max_grad_norm);
                optimizer.step(lr);
                if start + minibatch_size == batch_size {
                    let old_approx_kl = tch::no_grad(|| (-&logratio).mean(Kind::Float));
                    let approx_kl = tch::no_grad(|| ((&ratio - 1.0) - &logratio).mean(Kind::Float));
                    last = Some(LastMinibatch {
                        pg_loss,
                        v_loss,
                        entropy_loss,
                        old_approx_kl,
                        approx_kl,
                        grad_norm,
                        loss,
                    });
                }
            }
            // Aux 3: early stopping once the KL of the last minibatch passes the target
            if let (Some(target_kl), Some(last)) = (args.target_kl, &last) {
                if last.approx_kl.double_value(&[]) > target_kl {
                    break;
                }
            }
        }
        let (first, last) = (first.expect("epoch 0 has a first minibatch"), last.expect("at least one minibatch"));

        // Core 12: CleanRL's metrics by its names, then our debug and timing columns
        let (v_loss, pg_loss, entropy) =
            (last.v_loss.double_value(&[]), last.pg_loss.double_value(&[]), last.entropy_loss.double_value(&[]));
        let sps = (global_step as f64 / start_time.elapsed().as_secs_f64()).floor();
        let row = [
            ("iteration", iteration as f64),
            ("global_step", global_step as f64),
            ("charts/learning_rate", lr),
            ("losses/value_loss", v_loss),
            ("losses/policy_loss", pg_loss),
            ("losses/entropy", entropy),
            ("losses/old_approx_kl", last.old_approx_kl.double_value(&[])),
            ("losses/approx_kl", last.approx_kl.double_value(&[])),
            ("losses/clipfrac", clipfrac(&ratios, args.clip_coef).double_value(&[])),
            ("losses/explained_variance", explained_variance(&b_values_host, &returns)),
            ("charts/SPS", sps),
            ("debug/first_mb_max_ratio_dev", first.max_ratio_dev.double_value(&[])),
            ("debug/first_mb_clipfrac", first.clipfrac.double_value(&[])),
            ("debug/unclipped_grad_norm", last.grad_norm.double_value(&[])),
            ("debug/invalid_actions", invalid_actions as f64),
        ];
        log.update(&row, num_iterations, envs.take_step_seconds(), learning_start);
        if !last.loss.double_value(&[]).is_finite() {
            let losses = format!("policy loss {pg_loss}, value loss {v_loss}, entropy {entropy}");
            log.fail(format!("the loss became non-finite at update {iteration} ({losses})"));
        }
    }

    if args.save_model {
        let model_path = log.save(&vs, &args.exp_name);
        let returns = evaluate(&model_path, &args, grid, &nvec, device, 10).unwrap_or_else(|e| fail(1, e));
        log.eval(&returns);
    }
}

/// The fraction of the update's ratios that the surrogate clipped, |ratio - 1| > clip_coef (the
/// mean over minibatches of their fractions: all minibatches have the same size).
fn clipfrac(ratios: &[Tensor], clip_coef: f64) -> Tensor {
    (Tensor::cat(ratios, 0) - 1.0).abs().gt(clip_coef).to_kind(Kind::Float).mean(Kind::Float)
}

/// Loads the saved weights into a fresh agent and plays `episodes` episodes with sampled actions
/// (from the valid ones, unless masking is off).
fn evaluate(
    path: &std::path::Path,
    args: &Args,
    grid: [i64; 3],
    nvec: &[i64],
    device: Device,
    episodes: usize,
) -> Result<Vec<f64>, String> {
    let mut vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), grid, nvec.to_vec());
    vs.load(path).map_err(|e| format!("cannot load {}: {e}", path.display()))?;
    let mut env = VecEnv::new(vec![make_env(&args.env_id).map_err(|e| e.to_string())?]);
    env.reset(Some(args.seed));
    let mut returns = Vec::new();
    let mut action = vec![0i64; nvec.len()];
    while returns.len() < episodes {
        let obs = Tensor::from_slice(&env.obs).view([1, grid.iter().product::<i64>()]).to_device(device);
        let mask = Tensor::from_slice(&env.masks).view([1, env.mask_dim as i64]).to_device(device);
        let (a, _, _, _) =
            tch::no_grad(|| agent.get_action_and_value(&obs, None, args.invalid_action_masking.then_some(&mask)));
        a.to_device(Device::Cpu).copy_data(&mut action, nvec.len());
        env.step(Action::Discrete(&action));
        returns.extend(env.finished.iter().map(|ep| ep.r));
    }
    Ok(returns)
}

#[cfg(test)]
mod tests {
    /// Aux 4, checked by hand: masked entries get probability exactly 0 and no gradient, are
    /// never sampled, and the entropy is that of the valid entries' distribution.
    #[test]
    fn masked_entries_have_probability_0_no_gradient_and_no_entropy() {
        use super::categorical_masked;
        use tch::{Kind, Tensor};
        let logits = Tensor::from_slice(&[0.5f32, 2.0, -1.0, 1.0, 0.0]).view([1, 5]).set_requires_grad(true);
        let mask = Tensor::from_slice(&[true, false, true, false, true]).view([1, 5]);
        // every action's log-prob: the masked ones' probabilities are exactly 0
        let all: Vec<f64> = (0..5)
            .map(|a| {
                categorical_masked(&logits, Some(&mask), Some(&Tensor::from_slice(&[a as i64])))
                    .1
                    .double_value(&[0])
                    .exp()
            })
            .collect();
        let z = 0.5f64.exp() + (-1.0f64).exp() + 1.0;
        let want = [0.5f64.exp() / z, 0.0, (-1.0f64).exp() / z, 0.0, 1.0 / z];
        for (got, want) in all.iter().zip(want) {
            assert!((got - want).abs() < 1e-6, "{all:?} vs {want:?}");
        }
        assert_eq!((all[1], all[3]), (0.0, 0.0));
        // the entropy of the valid entries' distribution, and gradients only on valid logits
        let (_, log_prob, entropy) = categorical_masked(&logits, Some(&mask), Some(&Tensor::from_slice(&[0i64])));
        let h: f64 = -want.iter().filter(|&&p| p > 0.0).map(|p| p * p.ln()).sum::<f64>();
        assert!((entropy.double_value(&[0]) - h).abs() < 1e-6, "entropy {} vs {h}", entropy.double_value(&[0]));
        (log_prob + entropy).sum(Kind::Float).backward();
        let grad = Vec::<f32>::try_from(logits.grad().view([-1])).expect("a float gradient");
        assert_eq!((grad[1], grad[3]), (0.0, 0.0), "{grad:?}");
        assert!(grad[0] != 0.0 && grad[2] != 0.0 && grad[4] != 0.0, "{grad:?}");
        // 20,000 draws: never a masked entry; without the mask, every entry
        let many = logits.detach().expand([20_000, 5], false);
        let (drawn, _, _) = categorical_masked(&many, Some(&mask.expand([20_000, 5], false)), None);
        let counts = Vec::<i64>::try_from(drawn.bincount(None::<Tensor>, 5)).expect("counts");
        assert_eq!((counts[1], counts[3]), (0, 0), "{counts:?}");
        let counts =
            Vec::<i64>::try_from(categorical_masked(&many, None, None).0.bincount(None::<Tensor>, 5)).expect("counts");
        assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    }
}

// ==== plumbing: identical in every binary, no PPO below ========================================
// (tests/fence.rs checks that it stays identical; edit ppo.rs's and run scripts/sync-plumbing)

use clap::{ArgAction, CommandFactory, FromArgMatches};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

// libtorch allocates and frees memory for every tensor it makes, several per operation: mimalloc,
// which replaces malloc for the whole process (libtorch included), does that faster than glibc's
// (same results; HalfCheetah-v4 learning time -13%)
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A float tensor's values on the host, in one copy (on a GPU, one wait for it).
fn to_host(t: &Tensor) -> Vec<f32> {
    let numel = t.numel();
    let mut host = vec![0f32; numel];
    t.to_device(Device::Cpu).copy_data(&mut host, numel);
    host
}

/// 1 - Var[y_true - y_pred] / Var[y_true] (population variances), NaN when Var[y_true] is 0
/// (numpy's, as CleanRL).
fn explained_variance(y_pred: &[f32], y_true: &[f32]) -> f64 {
    let var = |xs: Vec<f64>| {
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64
    };
    let var_y = var(y_true.iter().map(|&y| y as f64).collect());
    if var_y == 0.0 {
        return f64::NAN;
    }
    1.0 - var(y_true.iter().zip(y_pred).map(|(&y, &p)| (y - p) as f64).collect()) / var_y
}

/// Adam (torch.optim.Adam's update: betas 0.9 and 0.999, no weight decay) over all parameters
/// as one flat vector: each parameter keeps its shape and name but its storage becomes a slice
/// of `flat`. For networks this small libtorch's per-call overhead dominates, and a handful of
/// large ops replace ~200 tiny per-parameter ones (about a quarter of the update's time).
struct FlatAdam {
    flat: Tensor,
    /// the gradients as one vector too: each parameter's `.grad()` is a view of its slice, so
    /// backward accumulates into it and zeroing or clipping is one operation on the whole
    grad: Tensor,
    m: Tensor,
    v: Tensor,
    t: i32,
    eps: f64,
}

impl FlatAdam {
    fn new(vs: &nn::VarStore, eps: f64) -> FlatAdam {
        let mut params = vs.trainable_variables();
        let (flat, grad) = tch::no_grad(|| {
            let flat = Tensor::cat(&params.iter().map(|p| p.flatten(0, -1)).collect::<Vec<_>>(), 0);
            let grad = flat.zeros_like();
            (flat, grad)
        });
        // every parameter gets a gradient (backward of 0 * the sum of all), then both become views
        let zero =
            Tensor::stack(&params.iter().map(|p| p.sum(Kind::Float)).collect::<Vec<_>>(), 0).sum(Kind::Float) * 0.0;
        zero.backward();
        tch::no_grad(|| {
            let mut offset = 0;
            for p in params.iter_mut() {
                let (numel, shape) = (p.numel() as i64, p.size());
                p.set_data(&flat.narrow(0, offset, numel).view(shape.as_slice()));
                p.grad().set_data(&grad.narrow(0, offset, numel).view(shape.as_slice()));
                offset += numel;
            }
        });
        FlatAdam { m: flat.zeros_like(), v: flat.zeros_like(), flat, grad, t: 0, eps }
    }

    fn zero_grad(&mut self) {
        let _ = self.grad.zero_();
    }

    /// Scales the gradients so that their norm is at most `max_norm`; returns the norm before,
    /// left on the device (no sync per minibatch).
    fn clip_grad_norm(&mut self, max_norm: f64) -> Tensor {
        tch::no_grad(|| {
            let norm = self.grad.norm();
            let _ = self.grad.g_mul_(&(max_norm / (&norm + 1e-6)).clamp_max(1.0));
            norm
        })
    }

    /// One Adam step: m and v are running means of g and g², and each parameter moves by
    /// lr * m_hat / (sqrt(v_hat) + eps), with the bias-corrected m_hat = m / (1 - beta1^t)
    /// and v_hat = v / (1 - beta2^t).
    fn step(&mut self, lr: f64) {
        let (beta1, beta2) = (0.9f64, 0.999f64);
        self.t += 1;
        let (bias_correction1, bias_correction2) = (1.0 - beta1.powi(self.t), 1.0 - beta2.powi(self.t));
        tch::no_grad(|| {
            let _ = self.m.lerp_(&self.grad, 1.0 - beta1); // m = beta1 m + (1 - beta1) g
            let _ = self.v.lerp_(&self.grad.square(), 1.0 - beta2); // v = beta2 v + (1 - beta2) g^2
            let denom = self.v.sqrt() / bias_correction2.sqrt() + self.eps;
            let _ = self.flat.g_sub_(&(&self.m / denom * (lr / bias_correction1)));
        })
    }
}

/// The run directory `runs/<run-name>/` and what goes in it: args.json, episodes.csv and
/// updates.csv (flushed every update), TensorBoard events with the CSVs' tags and steps
/// (`tensorboard --logdir runs`), the model and eval.csv; and the progress on the terminal.
struct RunLog {
    dir: std::path::PathBuf,
    episodes: csv::Writer<std::fs::File>,
    updates: csv::Writer<std::fs::File>,
    rows: usize,
    recent: std::collections::VecDeque<f64>,
    tb: tboard::EventWriter<std::fs::File>,
    /// a progress bar on a terminal; a plain line every 2% of the run otherwise
    bar: Option<ProgressBar>,
    /// when the previous update was logged (or the run started): the iteration's wall time
    last_update: Instant,
}

impl RunLog {
    /// Makes a directory of the run's own: `runs/<run_name>`, or `<run_name>-2`, `-3`, ... when
    /// another run (e.g. one started in the same second) has that name. Fails with exit code 1.
    fn create(run_name: &str, args: &Args, device: &str, total_steps: u64) -> RunLog {
        let created = std::fs::create_dir_all("runs").and_then(|()| {
            let mut suffix = 1;
            loop {
                let name = if suffix == 1 { run_name.to_string() } else { format!("{run_name}-{suffix}") };
                let dir = std::path::Path::new("runs").join(name);
                match std::fs::create_dir(&dir) {
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => suffix += 1,
                    created => break created.map(|()| dir),
                }
            }
        });
        let log = created.and_then(|dir| RunLog::open(dir, args, device, total_steps));
        log.unwrap_or_else(|e| fail(1, format!("cannot write runs/{run_name}: {e}")))
    }

    fn open(dir: std::path::PathBuf, args: &Args, device: &str, total_steps: u64) -> std::io::Result<RunLog> {
        let mut json = serde_json::to_value(args)?;
        json["device"] = device.into(); // the device the run used, as the line at start says
        std::fs::write(dir.join("args.json"), serde_json::to_string_pretty(&json)? + "\n")?;
        let mut episodes = csv::Writer::from_path(dir.join("episodes.csv"))?;
        episodes.write_record(["global_step", "charts/episodic_return", "charts/episodic_length"])?;
        let updates = csv::Writer::from_path(dir.join("updates.csv"))?;
        let tb = tboard::EventWriter::create(&dir).map_err(std::io::Error::other)?;
        let bar = std::io::stderr().is_terminal().then(|| {
            let template = "{elapsed_precise} [{wide_bar}] {pos}/{len} steps {msg}";
            ProgressBar::new(total_steps).with_style(ProgressStyle::with_template(template).expect("valid template"))
        });
        let recent = Default::default();
        Ok(RunLog { dir, episodes, updates, rows: 0, recent, tb, bar, last_update: Instant::now() })
    }

    fn episode(&mut self, global_step: u64, r: f64, l: u64) {
        // a failed write surfaces at the next update's flush
        let _ = self.episodes.write_record(&[global_step.to_string(), r.to_string(), l.to_string()]);
        let _ = self.tb.write_scalar(global_step as i64, "charts/episodic_return", r as f32);
        let _ = self.tb.write_scalar(global_step as i64, "charts/episodic_length", l as f32);
        self.recent.push_back(r);
        if self.recent.len() > 20 {
            self.recent.pop_front();
        }
    }

    /// Appends one row of (column, value) pairs (the header first) and the timing columns:
    /// the iteration's collection time (its wall time less learning), env stepping and learning.
    /// Flushes, and shows progress.
    fn update(&mut self, row: &[(&str, f64)], num_iterations: usize, env_seconds: f64, learning_start: Instant) {
        let (iteration_seconds, now) = (self.last_update.elapsed().as_secs_f64(), Instant::now());
        let learning_seconds = learning_start.elapsed().as_secs_f64();
        let mut row = row.to_vec();
        row.push(("timing/collection_seconds", iteration_seconds - learning_seconds));
        row.push(("timing/env_seconds", env_seconds));
        row.push(("timing/learning_seconds", learning_seconds));
        self.last_update = now;
        if let Err(e) = self.write(&row) {
            self.fail(format!("cannot write the metrics: {e}"));
        }
        self.rows += 1;
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
    }

    fn write(&mut self, row: &[(&str, f64)]) -> std::io::Result<()> {
        if self.rows == 0 {
            self.updates.write_record(row.iter().map(|(name, _)| name))?;
        }
        self.updates.write_record(row.iter().map(|(_, value)| value.to_string()))?;
        let step = row.iter().find(|(name, _)| *name == "global_step").map_or(0, |(_, v)| *v as i64);
        for (tag, value) in row.iter().filter(|(name, _)| name.contains('/')) {
            // TensorBoard keeps f32, as CleanRL's SummaryWriter does
            self.tb.write_scalar(step, tag, *value as f32).map_err(std::io::Error::other)?;
        }
        self.updates.flush()?;
        self.episodes.flush()
    }

    /// Saves the weights as `<name>.safetensors` in the run directory: written to a temporary
    /// file, then renamed, so a crash never leaves a half-written model. Fails with exit code 1.
    fn save(&self, vs: &nn::VarStore, name: &str) -> std::path::PathBuf {
        let (path, tmp) =
            (self.dir.join(format!("{name}.safetensors")), self.dir.join(format!("{name}.tmp.safetensors")));
        let saved = vs.save(&tmp).and_then(|()| Ok(std::fs::rename(&tmp, &path)?));
        saved.unwrap_or_else(|e| fail(1, format!("cannot save {}: {e}", path.display())));
        println!("model saved to {}", path.display());
        path
    }

    /// Writes eval.csv (one row per episode, CleanRL's tag) and prints the mean.
    fn eval(&self, returns: &[f64]) {
        let write = || -> std::io::Result<()> {
            let mut w = csv::Writer::from_path(self.dir.join("eval.csv"))?;
            w.write_record(["episode", "eval/episodic_return"])?;
            for (i, r) in returns.iter().enumerate() {
                w.write_record(&[i.to_string(), r.to_string()])?;
            }
            w.flush()
        };
        write().unwrap_or_else(|e| fail(1, format!("cannot write eval.csv: {e}")));
        let mean = returns.iter().sum::<f64>() / returns.len() as f64;
        println!("eval: mean episodic return {mean:.1} over {} episodes", returns.len());
    }

    /// Ends the progress bar where it stands, then fails with exit code 1 (metrics so far are kept).
    fn fail(&self, msg: String) -> ! {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
        fail(1, format!("{msg}; the metrics so far are in {}", self.dir.display()))
    }
}

/// `Args::parse()` with CleanRL's booleans (`--cuda` alone means true, `--cuda false` turns it
/// off) and every error in one line with exit code 2.
fn parse_args() -> Args {
    let optional_value = |arg: clap::Arg| match arg.get_action() {
        ArgAction::SetTrue => {
            let default = arg.get_default_values().first().cloned().unwrap_or_else(|| "false".into());
            arg.action(ArgAction::Set)
                .num_args(0..=1)
                .default_missing_value("true")
                .default_value(default)
                .value_name("BOOL")
        }
        _ => arg,
    };
    let matches = Args::command().args_override_self(true).mut_args(optional_value).try_get_matches();
    matches.and_then(|m| Args::from_arg_matches(&m)).unwrap_or_else(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => e.exit(),
        // clap's first paragraph (the error and the allowed values), without its usage lines
        _ => fail(
            2,
            e.to_string().split("\n\n").next().unwrap_or_default().trim_start_matches("error: ").replace("\n  ", " "),
        ),
    })
}

// value parsers: the range in which each numeric flag can work

fn at_least_one(s: &str) -> Result<usize, String> {
    s.parse().map_err(|e| format!("{e}")).and_then(|n| if n >= 1 { Ok(n) } else { Err("must be at least 1".into()) })
}

fn float_where(s: &str, ok: fn(f64) -> bool, range: &str) -> Result<f64, String> {
    s.parse().map_err(|e| format!("{e}")).and_then(|x| if ok(x) { Ok(x) } else { Err(format!("must be {range}")) })
}

fn positive(s: &str) -> Result<f64, String> {
    float_where(s, |x| x > 0.0 && x.is_finite(), "finite and > 0")
}

fn kl_target(s: &str) -> Result<f64, String> {
    float_where(s, |x| x >= 0.0, ">= 0 (inf: never stop)")
}

fn finite(s: &str) -> Result<f64, String> {
    float_where(s, f64::is_finite, "finite")
}

fn unit_interval(s: &str) -> Result<f64, String> {
    float_where(s, |x| (0.0..=1.0).contains(&x), "in [0, 1]")
}

/// `--exp-name` names a directory inside runs/, so it is a plain name.
fn plain_name(s: &str) -> Result<String, String> {
    let plain = !s.is_empty() && !s.contains(['/', '\\']) && !s.contains("..");
    plain.then(|| s.to_string()).ok_or_else(|| "must be a plain name, without '/', '\\' or '..'".into())
}

/// The device `--cuda` asks for, and why, in words for the line printed at start and args.json: the first GPU
/// when libtorch has CUDA and a GPU is visible, the CPU otherwise.
fn pick_device(cuda: bool) -> (Device, String) {
    if !cuda {
        (Device::Cpu, "cpu (--cuda false)".into())
    } else if !tch::utils::has_cudart() {
        (Device::Cpu, "cpu (this libtorch is built without CUDA)".into())
    } else if tch::Cuda::device_count() == 0 {
        (Device::Cpu, "cpu (the CUDA runtime is loaded, but no GPU is visible)".into())
    } else {
        (
            Device::Cuda(0),
            format!("cuda:0 ({})", gpu_name(0).unwrap_or_else(|| "a GPU whose name CUDA did not give".into())),
        )
    }
}

/// `cudaGetDeviceProperties` of the CUDA runtime libtorch loaded (its name in CUDA 12 and 13), found at run time:
/// libtorch does not expose the GPU's name, and nothing of ours links against CUDA.
type GetDeviceProperties = unsafe extern "C" fn(*mut std::ffi::c_void, std::ffi::c_int) -> std::ffi::c_int;
fn cuda_get_device_properties() -> Option<GetDeviceProperties> {
    extern "C" {
        fn dlsym(handle: *mut std::ffi::c_void, symbol: *const std::ffi::c_char) -> *mut std::ffi::c_void;
    }
    [c"cudaGetDeviceProperties_v2", c"cudaGetDeviceProperties"].iter().find_map(|name| {
        // SAFETY: a null handle (RTLD_DEFAULT) searches the libraries already loaded; both names have this signature
        let f = unsafe { dlsym(std::ptr::null_mut(), name.as_ptr()) };
        (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut std::ffi::c_void, GetDeviceProperties>(f) })
    })
}

/// The name of GPU `index`, as `nvidia-smi` shows it.
fn gpu_name(index: i32) -> Option<String> {
    let get = cuda_get_device_properties()?;
    // cudaDeviceProp starts with `char name[256]` in every CUDA version; the buffer exceeds any version's struct
    let mut prop = vec![0u8; 64 << 10];
    // SAFETY: the buffer is larger than cudaDeviceProp, which the call fills
    let status = unsafe { get(prop.as_mut_ptr().cast(), index) };
    let name = std::ffi::CStr::from_bytes_until_nul(&prop[..256]).ok()?.to_string_lossy();
    (status == 0 && !name.is_empty()).then(|| name.into_owned())
}

/// Prints one line and exits: 2 for bad input, 1 for failures while running.
fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    eprintln!("error: {msg}");
    std::process::exit(code)
}

#[cfg(test)]
mod plumbing_tests {
    use super::explained_variance;

    #[test]
    fn explained_variance_is_nan_for_constant_returns_as_numpy() {
        assert!(explained_variance(&[1.0, 2.0], &[3.0, 3.0]).is_nan(), "values vary, returns constant");
        assert!(explained_variance(&[3.0, 3.0], &[3.0, 3.0]).is_nan(), "both constant");
        assert_eq!(explained_variance(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]), 1.0);
        assert_eq!(explained_variance(&[0.0, 0.0], &[1.0, 3.0]), 0.0);
    }

    /// Built as the binaries are, a process with libtorch's CUDA library finds the CUDA runtime's
    /// `cudaGetDeviceProperties` (the GPU's name for the device line) and, with no GPU, gets no name.
    #[test]
    fn the_cuda_runtime_names_gpus() {
        if !tch::utils::has_cudart() {
            return; // a CPU-only libtorch: tests/cuda.rs checks the binaries say so
        }
        assert!(super::cuda_get_device_properties().is_some(), "cudaGetDeviceProperties not found");
        if tch::Cuda::device_count() == 0 {
            assert_eq!(super::gpu_name(0), None);
        } else {
            assert!(super::gpu_name(0).is_some_and(|n| !n.is_empty()));
        }
    }
}
