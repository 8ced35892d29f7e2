//! # ppo_lstm: PPO with an LSTM policy on Atari games, a diff of `ppo_atari.rs`
//!
//! CleanRL's `ppo_atari_lstm.py`: `ppo_atari.rs` with one frame instead of four and an LSTM
//! after the trunk, its 5 details tagged `// LSTM N: ...`; a 1-D observation (the velocity-masked
//! CartPoleNoVel-v1) gets a small MLP encoder instead of the CNN, to check the memory on a CPU.
//!
//! Run: `cargo run --release --bin ppo_lstm -- --env-id BreakoutNoFrameskip-v4 --seed 1`
//! Writes `runs/<run-name>/`: arguments, CleanRL's metrics, checkpoints, the model (docs/runs.md).
//!
//! Read from here to the plumbing banner: below it, code identical in every binary (optimizer, run log, flags), no PPO.

use clap::Parser;
use envs::atari::*; // the Atari env and its wrappers
use envs::{Action, Env, RecordEpisodeStatistics, Space, VecEnv};
use std::time::Instant;
use tch::nn::{LSTMState, RNN};
use tch::{nn, nn::Module, Device, Kind, Tensor};

#[derive(Parser, Debug, serde::Serialize, serde::Deserialize)]
#[command(about = "PPO with an LSTM (BreakoutNoFrameskip-v4), after CleanRL's ppo_atari_lstm.py")]
struct Args {
    // the experiment's flags (seed, cuda, threads, checkpoints), the same in every binary: RunArgs
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
    /// record env 0's games, every frame, on CleanRL's schedule, as GIFs in videos/<run-name>/
    #[arg(long, default_value_t = false)]
    capture_video: bool,
    /// the id of the environment (<Game>NoFrameskip-v4, e.g. BreakoutNoFrameskip-v4; or a 1-D one,
    /// e.g. CartPoleNoVel-v1)
    #[arg(long, default_value = "BreakoutNoFrameskip-v4")]
    env_id: String,
    /// total timesteps of the experiment
    #[arg(long, default_value_t = 10_000_000, value_parser = clap::value_parser!(u64).range(1..))]
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

/// `--torch-threads` and `--env-threads` by default: every core, for the CNN and the envs.
fn default_threads() -> (usize, usize) {
    let all_cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (all_cores, all_cores)
}

/// The combinations of flags that cannot run (each flag's own range is checked by clap).
fn check_args(a: &Args) -> Result<(), String> {
    let batch_size = a.num_envs * a.num_steps;
    if !a.num_envs.is_multiple_of(a.num_minibatches) {
        let (envs, n) = (a.num_envs, a.num_minibatches);
        Err(format!("--num-envs ({envs}) must be divisible by --num-minibatches ({n}): minibatches are whole envs"))
    } else if a.total_timesteps < batch_size as u64 {
        let total = a.total_timesteps;
        Err(format!("--total-timesteps ({total}) is below one batch (--num-envs x --num-steps = {batch_size})"))
    } else if a.norm_adv && batch_size / a.num_minibatches < 2 {
        Err("--norm-adv needs minibatches of 2 or more samples (the std of one is NaN); lower --num-minibatches".into())
    } else {
        Ok(())
    }
}

/// CleanRL's `make_env`: the game through native ALE, wrapped as CleanRL wraps it (innermost first),
/// its pixels as f32; a 1-D env (not in CleanRL) as `ppo.rs` makes it.
fn make_env(env_id: &str, video_dir: Option<std::path::PathBuf>) -> Result<Box<dyn Env<Obs = f32>>, envs::EnvError> {
    if rom_name(env_id).is_none() {
        return Ok(Box::new(RecordEpisodeStatistics::new(envs::make(env_id)?)));
    }
    let env = AtariEnv::new(env_id)?;
    let has_fire = env.has_fire();
    let env = RecordEpisodeStatistics::new(RecordVideo::new(env, video_dir)); // innermost: raw game scores
    let env = NoopReset::new(env, 30); // Atari 1: NoopResetEnv
    let env = MaxAndSkip::new(env, 4); // Atari 2: MaxAndSkipEnv
    let env = EpisodicLife::new(env); // Atari 3: EpisodicLifeEnv
    let env: Box<dyn Env<Obs = u8>> = match has_fire {
        true => Box::new(FireReset::new(env)), // Atari 4: FireResetEnv
        false => Box::new(env),
    };
    let env = ClipReward::new(env); // Atari 6: ClipRewardEnv
    let env = GrayScale::new(ResizeObservation::new(env, 84, 84)); // Atari 5: WarpFrame (84x84 gray)
    Ok(Box::new(envs::ObsAsF32::new(FrameStack::new(env, 1)))) // Atari 7: FrameStack (one frame: the LSTM remembers)
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

// Atari 8: one trunk shared by the policy and value heads (Core 13's other choice), then the LSTM
struct Agent {
    network: nn::Sequential,
    lstm: nn::LSTM,
    critic: nn::Linear,
    actor: nn::Linear,
    pixels: bool,
}

impl Agent {
    fn new(p: &nn::Path, obs_dim: i64, n_actions: i64) -> Agent {
        let (s2, net, pixels) = (2f64.sqrt(), p / "network", obs_dim == 84 * 84);
        let network = if pixels {
            nn::seq()
                .add(conv_init(&net / 0, 1, 32, 8, 4))
                .add_fn(|x| x.relu())
                .add(conv_init(&net / 2, 32, 64, 4, 2))
                .add_fn(|x| x.relu())
                .add(conv_init(&net / 4, 64, 64, 3, 1))
                .add_fn(|x| x.relu().flatten(1, -1))
                .add(layer_init(&net / 7, 64 * 7 * 7, 512, s2))
                .add_fn(|x| x.relu())
        } else {
            // a vector observation gets a small tanh MLP instead of the CNN (not in CleanRL)
            nn::seq().add(layer_init(&net / 0, obs_dim, 64, s2)).add_fn(|x| x.tanh())
        };
        // LSTM 1: orthogonal weights with gain 1, zero biases
        let (orthogonal, input_size) = (nn::Init::Orthogonal { gain: 1.0 }, if pixels { 512 } else { 64 });
        let config =
            nn::RNNConfig { w_ih_init: orthogonal, w_hh_init: orthogonal, batch_first: false, ..Default::default() };
        let lstm = nn::lstm(p / "lstm", input_size, 128, config); // tch makes the biases zero
        let (critic, actor) = (layer_init(p / "critic", 128, 1, 1.0), layer_init(p / "actor", 128, n_actions, 0.01));
        Agent { network, lstm, critic, actor, pixels }
    }

    /// The LSTM's outputs for T steps of B envs (row t * B + b of `x` and `done`) from `lstm_state`,
    /// and the state after the last step; `ended[t]`, on the host, says whether an episode of these
    /// envs ended before step t (`done` on the host, so finding where to cut costs no device sync).
    fn get_states(&self, x: &Tensor, lstm_state: &LSTMState, done: &Tensor, ended: &[bool]) -> (Tensor, LSTMState) {
        // Atari 9: scale pixels to [0, 1]
        let hidden = if self.pixels {
            self.network.forward(&(x.view([-1, 1, 84, 84]) / 255.0))
        } else {
            self.network.forward(x)
        };
        let batch = lstm_state.h().size()[1];
        let (hidden, done) = (hidden.view([-1, batch, hidden.size()[1]]), done.view([-1, batch, 1]));
        let (mut h, mut c) = (lstm_state.h(), lstm_state.c());
        let steps = hidden.size()[0];
        let (mut new_hidden, mut t) = (Vec::new(), 0);
        while t < steps {
            // one libtorch call for each run of steps in which no episode ends (CleanRL calls the LSTM
            // once per step; the result is the same)
            let run = (t + 1..steps).find(|&u| ended[u as usize]).unwrap_or(steps) - t;
            // LSTM 3: the state is reset where an episode ended, before the step that begins the next
            let keep = (1f64 - done.get(t)).view([1, batch, 1]);
            let (out, state) = self.lstm.seq_init(&hidden.narrow(0, t, run), &LSTMState((&h * &keep, &c * &keep)));
            (h, c) = (state.h(), state.c());
            new_hidden.push(out.flatten(0, 1));
            t += run;
        }
        (Tensor::cat(&new_hidden, 0), LSTMState((h, c)))
    }

    fn get_value(&self, x: &Tensor, lstm_state: &LSTMState, done: &Tensor, ended: &[bool]) -> Tensor {
        self.critic.forward(&self.get_states(x, lstm_state, done, ended).0)
    }

    /// Samples an action when none is given; returns (action, log-prob, entropy, value, LSTM state).
    fn get_action_and_value(
        &self,
        x: &Tensor,
        lstm_state: &LSTMState,
        done: &Tensor,
        ended: &[bool],
        action: Option<&Tensor>,
    ) -> (Tensor, Tensor, Tensor, Tensor, LSTMState) {
        let (hidden, lstm_state) = self.get_states(x, lstm_state, done, ended);
        let logits = self.actor.forward(&hidden);
        let log_probs = logits.log_softmax(-1, Kind::Float);
        let probs = log_probs.exp();
        let action = action.map_or_else(|| sample(&probs), |a| a.shallow_clone());
        let log_prob = log_probs.gather(-1, &action.unsqueeze(-1), false).squeeze_dim(-1);
        let entropy = -(probs * &log_probs).sum_dim_intlist(-1, false, Kind::Float);
        (action, log_prob, entropy, self.critic.forward(&hidden), lstm_state)
    }
}

/// Puts the LSTM's weights first among the trainable variables, in cuDNN's order for one layer:
/// weight_ih, weight_hh, bias_ih, bias_hh (the others keep their order after them).
fn lstm_weights_first(vs: &nn::VarStore) {
    let mut vars = vs.variables_.lock().expect("the VarStore's lock (one thread)");
    let names = ["lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0"];
    let lstm: Vec<usize> = names.iter().map(|n| vars.named_variables[*n].data_ptr() as usize).collect();
    vars.trainable_variables
        .sort_by_key(|v| lstm.iter().position(|&p| p == v.tensor.data_ptr() as usize).unwrap_or(names.len()));
}

/// One action per row of `probs` (a Categorical sample), by inverting the CDF: the first action
/// whose cumulative probability exceeds a uniform draw (5 us here; multinomial takes 15).
fn sample(probs: &Tensor) -> Tensor {
    let u = Tensor::rand([probs.size()[0], 1], (Kind::Float, probs.device()));
    let last = probs.size()[1] - 1; // a rounding shortfall of the CDF must not pick past it
    probs.cumsum(-1, Kind::Float).lt_tensor(&u).sum_dim_intlist(-1, false, Kind::Int64).clamp_max(last)
}

fn main() {
    let args = parse_args();
    // bad input: one line naming the problem, exit code 2, nothing written
    check_args(&args).unwrap_or_else(|e| fail(2, e));
    let (num_envs, num_steps) = (args.num_envs, args.num_steps);
    let batch_size = num_envs * num_steps;
    let envsperbatch = num_envs / args.num_minibatches;
    let num_iterations = args.total_timesteps as usize / batch_size;
    let run_name = format!("{}__{}__{}__{}", args.env_id, args.run.exp_name, args.run.seed, unix_time());
    let video_dir: Option<std::path::PathBuf> = args.capture_video.then(|| ["videos", &run_name].iter().collect());
    let make = |i: usize| make_env(&args.env_id, video_dir.clone().filter(|_| i == 0));
    let env_fns: Vec<_> = (0..args.num_envs).map(|i| make(i).unwrap_or_else(|e| fail(2, e))).collect();

    // seeding
    tch::manual_seed(args.run.seed as i64);
    tch::Cuda::cudnn_set_benchmark(!args.run.torch_deterministic);
    let (device, device_name) = pick_device(args.run.cuda);
    println!("device: {device_name}");

    // env setup. Core 1: vectorized architecture
    let mut envs = VecEnv::new(env_fns).with_threads(args.run.env_threads);
    let (obs_dim, n_actions) = match (envs.single_observation_space(), envs.single_action_space()) {
        (Space::Box { shape, .. }, Space::Discrete(n)) if shape == [1, 84, 84] || shape.len() == 1 => {
            (shape.iter().product::<usize>() as i64, n as i64)
        }
        (o, a) => {
            fail(2, format!("{}: {o} observations, {a} actions; ppo_lstm needs 1x84x84 or 1-D, Discrete", args.env_id))
        }
    };
    let vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), obs_dim, n_actions);
    // cuDNN runs the LSTM on its weights in place only when they are one block at the start of their
    // storage, in cuDNN's order (PyTorch warns and copies them at every call otherwise); FlatAdam
    // lays the parameters out in the VarStore's order, so the LSTM's go first
    lstm_weights_first(&vs);
    // Core 3: Adam with epsilon 1e-5
    let mut optimizer = FlatAdam::new(&vs, 1e-5);
    // PPO_TRACE=FILE: the first update, for tests/parity.rs
    let mut trace = Trace::start(&vs);
    // --resume: the checkpoint's weights, optimizer state and counters; its run's logs cut back to it
    let start = Start::new(&args, num_iterations, &mut optimizer, &[]);
    let mut log = RunLog::create(&run_name, &args, &device_name, (num_iterations * batch_size) as u64, &start);

    // storage: obs, actions, logprobs and values on the device, a tensor per step, joined into the
    // batch after the rollout; rewards and dones on the host, where the envs write them and GAE reads them
    let per_step = || (0..num_steps).map(|_| Tensor::new()).collect::<Vec<_>>();
    let (mut obs, mut actions, mut logprobs, mut values) = (per_step(), per_step(), per_step(), per_step());
    let mut rewards = vec![vec![0f32; num_envs]; num_steps];
    let mut dones = vec![vec![0f32; num_envs]; num_steps];

    // start the game (with --resume: where the checkpoint stood, in fresh episodes)
    let mut global_step = start.global_step;
    envs.reset(Some(start.seed));
    let mut next_done = vec![0f32; num_envs];
    let mut action_buf = vec![0i64; num_envs];
    // LSTM 2: zero initial hidden and cell state
    let mut next_lstm_state = agent.lstm.zero_state(num_envs as i64);

    for iteration in start.iteration + 1..=num_iterations {
        // Core 4: learning-rate annealing, linearly to 0
        let frac = 1.0 - (iteration as f64 - 1.0) / num_iterations as f64;
        let lr = if args.anneal_lr { frac } else { 1.0 } * args.learning_rate;
        // Aux 1: clip-range annealing, with the same fraction
        let clip_coef = if args.anneal_clip { frac } else { 1.0 } * args.clip_coef;

        // LSTM 5: the state before the rollout, from which the update replays the sequences
        let initial_lstm_state = LSTMState((next_lstm_state.h(), next_lstm_state.c()));
        for step in 0..num_steps {
            global_step += num_envs as u64;
            let next_obs = Tensor::from_slice(&envs.obs).view([-1, obs_dim]).to_device(device);
            obs[step] = next_obs.shallow_clone();
            dones[step].copy_from_slice(&next_done);
            let next_done_t = Tensor::from_slice(&next_done).to_device(device);

            let (action, logprob, _, value, lstm_state) =
                tch::no_grad(|| agent.get_action_and_value(&next_obs, &next_lstm_state, &next_done_t, &[false], None));
            next_lstm_state = lstm_state;
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
        let next_obs = Tensor::from_slice(&envs.obs).view([-1, obs_dim]).to_device(device);
        let next_done_t = Tensor::from_slice(&next_done).to_device(device);
        let next_value =
            to_host(&tch::no_grad(|| agent.get_value(&next_obs, &next_lstm_state, &next_done_t, &[false])));
        let b_values = Tensor::cat(&values, 0).view([-1]); // row step * num_envs + env
        let b_values_host = to_host(&b_values);
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
        let (b_obs, b_logprobs) = (Tensor::cat(&obs, 0), Tensor::cat(&logprobs, 0));
        let b_actions = Tensor::cat(&actions, 0);
        let b_advantages = Tensor::from_slice(&advantages).to_device(device);
        let b_returns = Tensor::from_slice(&returns).to_device(device);
        let b_dones = Tensor::from_slice(&dones.concat()).to_device(device);

        // Optimizing the policy and value network
        let learning_start = Instant::now();
        let (mut first_mb_max_ratio_dev, mut first_mb_clipfrac, mut last) = (Tensor::new(), Tensor::new(), None);
        let mut ratios = Vec::new();
        for epoch in 0..args.update_epochs {
            // Core 6: shuffled mini-batches that cover the whole batch each epoch
            // LSTM 4: a minibatch is whole envs' sequences, in time order (rows step * envs + env);
            // the envs are drawn on the host, as CleanRL's np.random.shuffle: their dones are read there
            let envinds = Tensor::randperm(num_envs as i64, (Kind::Int64, Device::Cpu));
            trace.order(&envinds);
            let mut envinds_host = vec![0i64; num_envs];
            envinds.copy_data(&mut envinds_host, num_envs);
            let envinds = envinds.to_device(device);
            let flatinds = Tensor::arange(batch_size as i64, (Kind::Int64, device)).view([num_steps as i64, -1]);
            for start in (0..num_envs).step_by(envsperbatch) {
                let mbenvinds = envinds.narrow(0, start as i64, envsperbatch as i64);
                let mb_inds = flatinds.index_select(1, &mbenvinds).flatten(0, -1);
                let mb = |t: &Tensor| t.index_select(0, &mb_inds);
                // LSTM 5: the states are rebuilt from the state saved before the rollout
                let (h, c) = (initial_lstm_state.h(), initial_lstm_state.c());
                let mb_state = LSTMState((h.index_select(1, &mbenvinds), c.index_select(1, &mbenvinds)));
                let mb_envs = &envinds_host[start..start + envsperbatch];
                let ended: Vec<bool> = dones.iter().map(|row| mb_envs.iter().any(|&e| row[e as usize] > 0.0)).collect();
                let (_, newlogprob, entropy, newvalue, _) =
                    agent.get_action_and_value(&mb(&b_obs), &mb_state, &mb(&b_dones), &ended, Some(&mb(&b_actions)));
                let logratio = &newlogprob - mb(&b_logprobs);
                let ratio = logratio.exp();

                // Core 12: debug variables: the clip fraction from all ratios after the update, the KL
                // estimates below (the last minibatch's are logged). At epoch 0, minibatch 0 the policy has
                // not moved yet, so the ratio must be exactly 1 and nothing clipped (checked by the tests)
                ratios.push(ratio.detach());
                if epoch == 0 && start == 0 {
                    first_mb_max_ratio_dev = tch::no_grad(|| (&ratio - 1.0).abs().max());
                    first_mb_clipfrac = clipfrac(&ratios, clip_coef);
                }

                let mut mb_advantages = mb(&b_advantages);
                if args.norm_adv {
                    // Core 7: per-minibatch advantage normalization
                    mb_advantages =
                        (&mb_advantages - mb_advantages.mean(Kind::Float)) / (mb_advantages.std(true) + 1e-8);
                }

                // Core 8: clipped surrogate objective
                let pg_loss1 = -&mb_advantages * &ratio;
                let pg_loss2 = -&mb_advantages * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef);
                let pg_loss = pg_loss1.max_other(&pg_loss2).mean(Kind::Float);

                let newvalue = newvalue.view([-1]);
                let mb_returns = &mb(&b_returns);
                let v_loss = if args.clip_vloss {
                    // Core 9: value-function loss clipping
                    let mb_values = &mb(&b_values);
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

                optimizer.zero_grad();
                loss.backward();
                // Core 11: global gradient-norm clipping
                let grad_norm = optimizer.clip_grad_norm(args.max_grad_norm);
                optimizer.step(lr);
                let old_approx_kl = tch::no_grad(|| (-&logratio).mean(Kind::Float));
                let approx_kl = tch::no_grad(|| ((&ratio - 1.0) - &logratio).mean(Kind::Float));
                last = Some(LastMinibatch { pg_loss, v_loss, entropy_loss, old_approx_kl, approx_kl, grad_norm, loss });
            }
            // Aux 3: early stopping once the KL of the last minibatch passes the target
            if let (Some(target_kl), Some(last)) = (args.target_kl, &last) {
                if last.approx_kl.double_value(&[]) > target_kl {
                    break;
                }
            }
        }
        let last = last.expect("at least one minibatch");

        // Core 12: CleanRL's metrics by its names, then our debug and timing columns
        let row = [
            ("iteration", iteration as f64),
            ("global_step", global_step as f64),
            ("charts/learning_rate", lr),
            ("charts/clip_coef", clip_coef),
            ("losses/value_loss", last.v_loss.double_value(&[])),
            ("losses/policy_loss", last.pg_loss.double_value(&[])),
            ("losses/entropy", last.entropy_loss.double_value(&[])),
            ("losses/old_approx_kl", last.old_approx_kl.double_value(&[])),
            ("losses/approx_kl", last.approx_kl.double_value(&[])),
            ("losses/clipfrac", clipfrac(&ratios, clip_coef).double_value(&[])),
            ("losses/explained_variance", explained_variance(&b_values_host, &returns)),
            ("debug/first_mb_max_ratio_dev", first_mb_max_ratio_dev.double_value(&[])),
            ("debug/first_mb_clipfrac", first_mb_clipfrac.double_value(&[])),
            ("debug/unclipped_grad_norm", last.grad_norm.double_value(&[])),
        ];
        trace.finish(&vs, &row, [&b_obs, &b_actions, &next_obs], [&rewards, &dones], &next_done);
        log.update(&row, &last.loss, num_iterations, envs.take_step_seconds(), learning_start);
        log.checkpoint(iteration, num_iterations, global_step, lr, &optimizer, &[]);
    }

    if args.run.save_model {
        let model_path = log.save(&vs, &args.run.exp_name);
        log.eval(&evaluate(&model_path, &args, obs_dim, n_actions, device));
    }
}

/// The fraction of the update's ratios that the surrogate clipped, |ratio - 1| > clip_coef (the
/// mean over minibatches of their fractions: all minibatches have the same size).
fn clipfrac(ratios: &[Tensor], clip_coef: f64) -> Tensor {
    (Tensor::cat(ratios, 0) - 1.0).abs().gt(clip_coef).to_kind(Kind::Float).mean(Kind::Float)
}

/// Loads the saved weights into a fresh agent and plays 10 episodes with sampled actions,
/// the LSTM state carried from step to step.
fn evaluate(path: &std::path::Path, args: &Args, obs_dim: i64, n_actions: i64, device: Device) -> Vec<f64> {
    let mut vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), obs_dim, n_actions);
    vs.load(path).unwrap_or_else(|e| fail(1, format!("cannot load {}: {e}", path.display())));
    let mut action = [0i64];
    let (mut lstm_state, mut done) = (agent.lstm.zero_state(1), Tensor::zeros([1], (Kind::Float, device)));
    play(make_env(&args.env_id, None).unwrap_or_else(|e| fail(1, e)), args.run.seed, |env| {
        let obs = Tensor::from_slice(&env.obs).view([1, obs_dim]).to_device(device);
        let (a, _, _, _, state) = tch::no_grad(|| agent.get_action_and_value(&obs, &lstm_state, &done, &[false], None));
        a.to_device(Device::Cpu).copy_data(&mut action, 1);
        env.step(Action::Discrete(&action));
        (lstm_state, done) =
            (state, Tensor::from_slice(&[(env.terminated[0] || env.truncated[0]) as u8 as f32]).to_device(device));
    })
}

#[cfg(test)]
mod tests {
    /// What ATen's `try_get_weight_buf` checks before cuDNN may use an LSTM's weights in place: one
    /// storage, starting at its offset 0 with weight_ih, then weight_hh, bias_ih, bias_hh, each
    /// contiguous and right after the one before. No GPU here shows the warning, so the layout is
    /// asserted after FlatAdam has moved every parameter into its flat vector.
    #[test]
    fn the_lstm_weights_are_laid_out_as_cudnn_checks() {
        use tch::{nn, Device, Tensor};
        for obs_dim in [4, 84 * 84] {
            let vs = nn::VarStore::new(Device::Cpu);
            let _agent = super::Agent::new(&vs.root(), obs_dim, 6);
            super::lstm_weights_first(&vs);
            let optimizer = super::FlatAdam::new(&vs, 1e-5);
            let vars = vs.variables();
            let (base, mut offset) = (optimizer.flat.data_ptr() as usize, 0);
            for name in ["lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0"] {
                let w: &Tensor = &vars[name];
                assert!(w.is_contiguous(), "{name} is not contiguous");
                assert_eq!(
                    w.data_ptr() as usize,
                    base + 4 * offset,
                    "{name} (obs_dim {obs_dim}) is not at element {offset}"
                );
                offset += w.numel();
            }
            let input = if obs_dim == 4 { 64 } else { 512 };
            assert_eq!(offset, 4 * 128 * (input + 128 + 2), "the LSTM's four tensors");
            // and the gradients, which cuDNN writes, follow the same layout in FlatAdam's flat gradient
            let grad_base = optimizer.grad.data_ptr() as usize;
            assert_eq!(vars["lstm.weight_ih_l0"].grad().data_ptr() as usize, grad_base);
        }
    }
}

// ==== plumbing: identical in every binary, no PPO below ========================================
// (tests/fence.rs checks that it stays identical; edit ppo.rs's and run scripts/sync-plumbing)

/// The last minibatch's losses and statistics, the ones logged (CleanRL logs those of the last one).
struct LastMinibatch {
    pg_loss: Tensor,
    v_loss: Tensor,
    entropy_loss: Tensor,
    old_approx_kl: Tensor,
    approx_kl: Tensor,
    grad_norm: Tensor,
    loss: Tensor,
}

/// The experiment's flags, the same in every binary (each `Args` flattens them in).
#[derive(clap::Args, Debug, serde::Serialize, serde::Deserialize)]
struct RunArgs {
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
    #[arg(long, default_value_t = default_threads().0, value_parser = at_least_one)]
    torch_threads: usize,
    /// threads stepping the envs (results do not depend on it)
    #[arg(long, default_value_t = default_threads().1, value_parser = at_least_one)]
    env_threads: usize,
    /// save the weights to the run directory, then evaluate them for 10 episodes
    #[arg(long, default_value_t = false)]
    save_model: bool,
    /// write a checkpoint (weights, optimizer, statistics) every N updates and after the last; 0: never
    #[arg(long, default_value_t = 10)]
    checkpoint_interval: usize,
    /// continue the run in RUN_DIR from its checkpoint, with its arguments; only --total-timesteps (to
    /// extend it), --checkpoint-interval, --save-model, --cuda and thread counts may be given anew.
    /// The envs start fresh episodes (an LSTM from a zero state)
    #[arg(long, value_name = "RUN_DIR")]
    resume: Option<std::path::PathBuf>,
}

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
    /// the number of processes whose episodes this log records (ppo_atari_multigpu's ranks): above
    /// one, episodes.csv gets a fourth column naming each episode's rank
    ranks: usize,
    episodes_header: bool,
    recent: std::collections::VecDeque<f64>,
    tb: tboard::EventWriter<std::fs::File>,
    /// a progress bar on a terminal; a plain line every 2% of the run otherwise
    bar: Option<ProgressBar>,
    /// when the previous update was logged (or the run started): the iteration's wall time
    last_update: Instant,
    /// when the run started, as if it had never stopped (for the checkpoint's elapsed time)
    start_time: Instant,
    checkpoint_interval: usize,
    /// the time the last checkpoint took to write, logged with the next update
    checkpoint_seconds: f64,
    env_id: String,
}

impl RunLog {
    /// Makes a directory of the run's own: `runs/<run_name>`, or `<run_name>-2`, `-3`, ... when
    /// another run (e.g. one started in the same second) has that name; with `--resume`, opens the
    /// run's directory again. Fails with exit code 1.
    fn create(run_name: &str, args: &Args, device: &str, total_steps: u64, start: &Start) -> RunLog {
        let created = match &args.run.resume {
            Some(dir) => Ok(dir.clone()),
            None => std::fs::create_dir_all("runs").and_then(|()| {
                let mut suffix = 1;
                loop {
                    let name = if suffix == 1 { run_name.to_string() } else { format!("{run_name}-{suffix}") };
                    let dir = std::path::Path::new("runs").join(name);
                    match std::fs::create_dir(&dir) {
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => suffix += 1,
                        created => break created.map(|()| dir),
                    }
                }
            }),
        };
        let log = created.and_then(|dir| RunLog::open(dir, args, device, total_steps, start));
        log.unwrap_or_else(|e| fail(1, format!("cannot write runs/{run_name}: {e}")))
    }

    /// With `--resume` the CSVs are cut back to the checkpoint (what was logged after it goes) and
    /// TensorBoard's events are written anew from them, so that no row is missing or repeated.
    fn open(
        dir: std::path::PathBuf,
        args: &Args,
        device: &str,
        total_steps: u64,
        start: &Start,
    ) -> std::io::Result<RunLog> {
        let mut json = serde_json::to_value(args)?;
        json["binary"] = env!("CARGO_BIN_NAME").into(); // what --resume checks
        json["device"] = device.into(); // the device the run used, as the line at start says
        let tmp = dir.join("args.tmp.json");
        std::fs::write(&tmp, serde_json::to_string_pretty(&json)? + "\n")?;
        std::fs::rename(tmp, dir.join("args.json"))?;
        let (iteration, global_step) = (start.iteration as f64, start.global_step as f64);
        let updates_kept = cut_back(&dir.join("updates.csv"), "iteration", iteration)?;
        let episodes_kept = cut_back(&dir.join("episodes.csv"), "global_step", global_step)?;
        let old_events: Vec<_> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("events.out.tfevents.")))
            .collect();
        if start.iteration > 0 {
            println!("resuming {} at iteration {}, global_step {}", dir.display(), start.iteration, start.global_step);
        }
        let mut tb = tboard::EventWriter::create(&dir).map_err(std::io::Error::other)?;
        for (header, rows) in [&updates_kept, &episodes_kept] {
            let step = header.iter().position(|h| h == "global_step").unwrap_or(0);
            for row in rows {
                let step = row[step].parse::<f64>().unwrap_or(0.0) as i64;
                for (tag, value) in header.iter().zip(row).filter(|(tag, _)| tag.contains('/')) {
                    let value = value.parse::<f64>().unwrap_or(f64::NAN) as f32;
                    tb.write_scalar(step, tag, value).map_err(std::io::Error::other)?;
                }
            }
        }
        for old in old_events {
            std::fs::remove_file(old)?;
        }
        let append = |name: &str| -> std::io::Result<csv::Writer<std::fs::File>> {
            let file = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(name))?;
            Ok(csv::Writer::from_writer(file))
        };
        let (episodes, updates) = (append("episodes.csv")?, append("updates.csv")?);
        let bar = std::io::stderr().is_terminal().then(|| {
            let template = "{elapsed_precise} [{wide_bar}] {pos}/{len} steps {msg}";
            let style = ProgressStyle::with_template(template).expect("valid template");
            ProgressBar::new(total_steps).with_style(style).with_position(start.global_step)
        });
        let return_column = episodes_kept.0.iter().position(|h| h == "charts/episodic_return").unwrap_or(1);
        let returns = episodes_kept.1.iter().rev().take(20).rev();
        let recent = returns.map(|row| row[return_column].parse().unwrap_or(f64::NAN)).collect();
        Ok(RunLog {
            dir,
            episodes,
            updates,
            rows: updates_kept.1.len(),
            ranks: 1,
            episodes_header: !episodes_kept.0.is_empty(),
            recent,
            tb,
            bar,
            last_update: Instant::now(),
            start_time: start.start_time,
            checkpoint_interval: args.run.checkpoint_interval,
            checkpoint_seconds: 0.0,
            env_id: args.env_id.clone(),
        })
    }

    /// The episodes that ended at this step: CleanRL's `charts/episodic_return` and `episodic_length`.
    #[allow(dead_code)] // ppo_atari_multigpu logs every episode with its rank
    fn episodes(&mut self, global_step: u64, finished: &[envs::FinishedEpisode]) {
        for ep in finished {
            self.episode_of_rank(0, global_step, ep.r, ep.l);
        }
    }

    fn episode_of_rank(&mut self, rank: usize, global_step: u64, r: f64, l: u64) {
        self.episodes_header();
        let mut record = vec![global_step.to_string(), r.to_string(), l.to_string()];
        if self.ranks > 1 {
            record.push(rank.to_string());
        }
        // a failed write surfaces at the next update's flush
        let _ = self.episodes.write_record(&record);
        let _ = self.tb.write_scalar(global_step as i64, "charts/episodic_return", r as f32);
        let _ = self.tb.write_scalar(global_step as i64, "charts/episodic_length", l as f32);
        self.recent.push_back(r);
        if self.recent.len() > 20 {
            self.recent.pop_front();
        }
    }

    /// Appends one row of (column, value) pairs (the header first) and the timing columns:
    /// the iteration's collection time (its wall time less learning), env stepping, learning, and
    /// writing the checkpoint after the previous update.
    /// Flushes, and shows progress. A non-finite `loss` (the last minibatch's) then ends the run,
    /// its rows kept.
    fn update(&mut self, row: &[(&str, f64)], loss: &Tensor, iterations: usize, env_seconds: f64, learning: Instant) {
        let (iteration_seconds, now) = (self.last_update.elapsed().as_secs_f64(), Instant::now());
        let learning_seconds = learning.elapsed().as_secs_f64();
        let checkpoint_seconds = std::mem::take(&mut self.checkpoint_seconds);
        let mut row = row.to_vec();
        // CleanRL's charts/SPS: steps per second since the run started, after explained_variance
        let global_step = row.iter().find(|(n, _)| *n == "global_step").map_or(0.0, |(_, v)| *v);
        let sps = (global_step / self.start_time.elapsed().as_secs_f64()).floor();
        let at = row.iter().position(|(n, _)| *n == "losses/explained_variance").map_or(row.len(), |i| i + 1);
        row.insert(at, ("charts/SPS", sps));
        row.push(("timing/collection_seconds", iteration_seconds - learning_seconds - checkpoint_seconds));
        row.push(("timing/env_seconds", env_seconds));
        row.push(("timing/learning_seconds", learning_seconds));
        row.push(("timing/checkpoint_seconds", checkpoint_seconds));
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
            None if self.rows.is_multiple_of(iterations.div_ceil(50)) || self.rows == iterations => {
                println!("update {}/{iterations}, global_step {}, {msg}", self.rows, get("global_step"));
            }
            None => {}
        }
        if !loss.double_value(&[]).is_finite() {
            let losses =
                ["losses/policy_loss", "losses/value_loss", "losses/entropy"].map(|c| format!("{c} {}", get(c)));
            self.fail(format!("the loss became non-finite at update {} ({})", get("iteration"), losses.join(", ")));
        }
    }

    /// episodes.csv's header, once: before its first row or at the first update, whichever comes first
    fn episodes_header(&mut self) {
        if !self.episodes_header {
            self.episodes_header = true;
            let rank = (self.ranks > 1).then_some("rank");
            let header = ["global_step", "charts/episodic_return", "charts/episodic_length"].into_iter().chain(rank);
            let _ = self.episodes.write_record(header); // a failed write surfaces at the next flush
        }
    }

    fn write(&mut self, row: &[(&str, f64)]) -> std::io::Result<()> {
        self.episodes_header();
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

    /// Every `--checkpoint-interval` updates and after the last: the weights, Adam's state, the
    /// running statistics and the counters in `checkpoint.safetensors`, written to a temporary file
    /// and renamed, so that a crash while writing leaves the previous one. Fails with exit code 1.
    fn checkpoint(
        &mut self,
        iteration: usize,
        num_iterations: usize,
        global_step: u64,
        learning_rate: f64,
        optimizer: &FlatAdam,
        stats: &[envs::SharedRms],
    ) {
        let every = self.checkpoint_interval;
        if every == 0 || !(iteration.is_multiple_of(every) || iteration == num_iterations) {
            return;
        }
        let write_start = Instant::now();
        let mut tensors = std::collections::BTreeMap::new();
        for (name, t) in [("weights", &optimizer.flat), ("adam.m", &optimizer.m), ("adam.v", &optimizer.v)] {
            tensors.insert(name.to_string(), t.to_device(Device::Cpu));
        }
        for (i, handle) in stats.iter().enumerate() {
            let rms = handle.lock();
            tensors
                .insert(format!("rms.{i}"), Tensor::from_slice(&[&rms.mean[..], &rms.var[..], &[rms.count]].concat()));
        }
        let meta = CheckpointMeta {
            binary: env!("CARGO_BIN_NAME").into(),
            env_id: self.env_id.clone(),
            iteration,
            global_step,
            adam_step: optimizer.t,
            learning_rate,
            elapsed_seconds: self.start_time.elapsed().as_secs_f64(),
            stats: stats.len(),
            checksum: checksum(&tensors),
        };
        let json = serde_json::to_vec(&meta).expect("numbers and strings");
        tensors.insert("meta".into(), Tensor::from_slice(&json));
        let (path, tmp) = (self.dir.join("checkpoint.safetensors"), self.dir.join("checkpoint.tmp.safetensors"));
        let written = Tensor::write_safetensors(&tensors.iter().collect::<Vec<_>>(), &tmp)
            .map_err(std::io::Error::other)
            .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            self.fail(format!("cannot write {}: {e}", path.display()));
        }
        self.checkpoint_seconds = write_start.elapsed().as_secs_f64();
    }

    /// Ends the progress bar where it stands, then fails with exit code 1 (metrics so far are kept).
    fn fail(&self, msg: String) -> ! {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
        fail(1, format!("{msg}; the metrics so far are in {}", self.dir.display()))
    }
}

/// `--resume`: keeps a CSV file's rows up to the last whose `column` is at most `limit` (a row cut
/// short by a crash goes too), rewritten atomically; returns the header and the rows kept (none
/// when the file does not exist: a new run).
fn cut_back(
    path: &std::path::Path,
    column: &str,
    limit: f64,
) -> std::io::Result<(csv::StringRecord, Vec<csv::StringRecord>)> {
    if !path.exists() {
        return Ok(Default::default());
    }
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_path(path)?;
    let header = reader.headers()?.clone();
    let i = header.iter().position(|h| h == column).unwrap_or(0);
    let fits = |r: &csv::StringRecord| r.len() == header.len() && r[i].parse::<f64>().is_ok_and(|x| x <= limit);
    let rows: Vec<_> = reader.records().map_while(|r| r.ok().filter(fits)).collect();
    let tmp = path.with_extension("tmp.csv");
    let mut writer = csv::Writer::from_path(&tmp)?;
    if !header.is_empty() {
        writer.write_record(&header)?;
    }
    for row in &rows {
        writer.write_record(row)?;
    }
    writer.flush()?;
    std::fs::rename(tmp, path)?;
    Ok((header, rows))
}
/// Where the loop starts: a new run at iteration 0 with `--seed`; with `--resume`, where the run's
/// checkpoint stood.
struct Start {
    /// the last iteration done: the loop goes on with the next
    iteration: usize,
    global_step: u64,
    /// when the run started, as if it had never stopped (SPS counts the time before the checkpoint)
    start_time: Instant,
    /// the envs' seed: `--seed`, or when resuming one derived from it and the iteration
    seed: u64,
    /// the learning rate of the last update (`--learning-rate` for a new run), where a variant adapts it
    #[allow(dead_code)] // read by --adaptive-lr (ppo_continuous, ppo_multilevel)
    learning_rate: f64,
}

impl Start {
    /// With `--resume`: reads the run's checkpoint into the optimizer (weights and Adam's state) and
    /// the statistics, and seeds libtorch with `seed + 1,000,003 x iteration` (two resumes from one
    /// checkpoint give the same metrics); the envs start fresh episodes from that seed. Bad
    /// checkpoints: one line, exit code 2, nothing written.
    fn new(args: &Args, num_iterations: usize, optimizer: &mut FlatAdam, stats: &[envs::SharedRms]) -> Start {
        let Some(dir) = &args.run.resume else {
            let (start_time, seed, learning_rate) = (Instant::now(), args.run.seed, args.learning_rate);
            return Start { iteration: 0, global_step: 0, start_time, seed, learning_rate };
        };
        let (meta, tensors) = read_checkpoint(dir, &args.env_id).unwrap_or_else(|e| fail(2, e));
        let tensor = |name: &str| tensors.get(name).ok_or_else(|| format!("{}: no {name}", dir.display()));
        let loaded = (|| -> Result<(), String> {
            for (name, into) in [("weights", &optimizer.flat), ("adam.m", &optimizer.m), ("adam.v", &optimizer.v)] {
                let saved = tensor(name)?;
                if saved.size() != into.size() {
                    let (n, m) = (saved.numel(), into.numel());
                    return Err(format!("its network has {n} parameters, this run's has {m} (another network)"));
                }
                tch::no_grad(|| into.shallow_clone().copy_(saved));
            }
            optimizer.t = meta.adam_step;
            if stats.len() != meta.stats {
                return Err(format!("it holds {} running statistics, this run has {}", meta.stats, stats.len()));
            }
            for (i, handle) in stats.iter().enumerate() {
                let v = Vec::<f64>::try_from(tensor(&format!("rms.{i}"))?).map_err(|e| e.to_string())?;
                let mut rms = handle.lock();
                let d = rms.mean.len();
                if v.len() != 2 * d + 1 {
                    return Err(format!("its statistics {i} have {} values, this run's {}", v.len(), 2 * d + 1));
                }
                *rms = envs::RunningMeanStd { mean: v[..d].to_vec(), var: v[d..2 * d].to_vec(), count: v[2 * d] };
            }
            Ok(())
        })();
        loaded.unwrap_or_else(|e| fail(2, format!("cannot resume from {}: {e}", dir.display())));
        if meta.iteration >= num_iterations {
            let (run, i) = (dir.display(), meta.iteration);
            fail(2, format!("{run} is complete ({i} of {num_iterations} iterations); a larger total extends it"));
        }
        let seed = args.run.seed.wrapping_add(1_000_003 * meta.iteration as u64);
        tch::manual_seed(seed as i64);
        let elapsed = std::time::Duration::from_secs_f64(meta.elapsed_seconds);
        let start_time = Instant::now().checked_sub(elapsed).unwrap_or_else(Instant::now);
        let (iteration, global_step, learning_rate) = (meta.iteration, meta.global_step, meta.learning_rate);
        Start { iteration, global_step, start_time, seed, learning_rate }
    }
}

/// A testing aid (tests/parity.rs): with the environment variable PPO_TRACE=FILE, the first update's
/// inputs and results go to FILE (safetensors): the initial weights (`init.<name>`), the rollout as
/// the network saw it (`rollout.obs`, `.actions`, `.rewards`, `.dones`, `.next_obs`, `.next_done`),
/// every epoch's minibatch order (`order.<epoch>`), the weights after the update (`after.<name>`)
/// and the update's logged values (`scalar.<column>`). Without the variable it does nothing.
#[allow(dead_code)] // not used by ppo_multilevel, which has no CleanRL counterpart
struct Trace {
    path: Option<std::path::PathBuf>,
    tensors: Vec<(String, Tensor)>,
    epochs: usize,
}

#[allow(dead_code)]
impl Trace {
    fn start(vs: &nn::VarStore) -> Trace {
        let mut trace = Trace { path: std::env::var_os("PPO_TRACE").map(Into::into), tensors: Vec::new(), epochs: 0 };
        trace.weights("init", vs);
        trace
    }

    fn weights(&mut self, prefix: &str, vs: &nn::VarStore) {
        if self.path.is_some() {
            for (name, t) in vs.variables() {
                self.tensors.push((format!("{prefix}.{name}"), t.to_device(Device::Cpu).copy()));
            }
        }
    }

    /// The order in which the next epoch visits the batch (rows, or envs for an LSTM).
    fn order(&mut self, inds: &Tensor) {
        if self.path.is_some() {
            self.tensors.push((format!("order.{}", self.epochs), inds.to_device(Device::Cpu).copy()));
            self.epochs += 1;
        }
    }

    /// Writes the file at the end of the first update (later calls do nothing). Fails with exit code 1.
    fn finish(
        &mut self,
        vs: &nn::VarStore,
        row: &[(&str, f64)],
        [obs, actions, next_obs]: [&Tensor; 3],
        [rewards, dones]: [&[Vec<f32>]; 2],
        next_done: &[f32],
    ) {
        self.weights("after", vs);
        let Some(path) = self.path.take() else { return };
        let host = |rows: &[Vec<f32>]| Tensor::from_slice(&rows.concat());
        let rollout = [("obs", obs.to_device(Device::Cpu)), ("actions", actions.to_device(Device::Cpu))];
        let rollout = rollout.into_iter().chain([("rewards", host(rewards)), ("dones", host(dones))]);
        let rollout =
            rollout.chain([("next_obs", next_obs.to_device(Device::Cpu)), ("next_done", host(&[next_done.to_vec()]))]);
        self.tensors.extend(rollout.map(|(name, t)| (format!("rollout.{name}"), t.contiguous())));
        self.tensors.extend(row.iter().map(|(name, v)| (format!("scalar.{name}"), Tensor::from_slice(&[*v]))));
        let written = Tensor::write_safetensors(&self.tensors, &path);
        written.unwrap_or_else(|e| fail(1, format!("cannot write the trace {}: {e}", path.display())));
    }
}

/// What a checkpoint says of itself, beside its tensors (stored as JSON in the tensor "meta").
#[derive(serde::Serialize, serde::Deserialize)]
struct CheckpointMeta {
    binary: String,
    env_id: String,
    iteration: usize,
    global_step: u64,
    adam_step: i32,
    /// the learning rate of the last update
    learning_rate: f64,
    elapsed_seconds: f64,
    /// how many running statistics (`rms.0`, `rms.1`, ...)
    stats: usize,
    /// FNV-1a over every other tensor's bytes, in name order: a damaged file does not load
    checksum: u64,
}

fn checksum(tensors: &std::collections::BTreeMap<String, Tensor>) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for t in tensors.values() {
        let numel = t.numel();
        let mut bytes = vec![0u8; numel * t.kind().elt_size_in_bytes()];
        t.copy_data_u8(&mut bytes, numel);
        hash = bytes.iter().fold(hash, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    }
    hash
}

fn read_checkpoint(
    dir: &std::path::Path,
    env_id: &str,
) -> Result<(CheckpointMeta, std::collections::BTreeMap<String, Tensor>), String> {
    let path = dir.join("checkpoint.safetensors");
    if !path.is_file() {
        let why = "it ran with --checkpoint-interval 0, or stopped before its first checkpoint";
        return Err(format!("cannot resume {}: it has no checkpoint.safetensors ({why})", dir.display()));
    }
    let damaged = |e: String| format!("cannot resume from {}: it is damaged or truncated ({e})", path.display());
    let mut tensors: std::collections::BTreeMap<String, Tensor> =
        Tensor::read_safetensors(&path).map_err(|e| damaged(e.to_string()))?.into_iter().collect();
    let meta = tensors.remove("meta").ok_or_else(|| damaged("no meta".into()))?;
    let meta: CheckpointMeta = Vec::<u8>::try_from(&meta)
        .map_err(|e| e.to_string())
        .and_then(|json| serde_json::from_slice(&json).map_err(|e| e.to_string()))
        .map_err(damaged)?;
    if checksum(&tensors) != meta.checksum {
        return Err(damaged("its checksum does not match".into()));
    }
    let bin = env!("CARGO_BIN_NAME");
    if meta.binary != bin || meta.env_id != env_id {
        let (b, e) = (&meta.binary, &meta.env_id);
        return Err(format!("{} is a checkpoint of {b} on {e}, not of {bin} on {env_id}", path.display()));
    }
    Ok((meta, tensors))
}

/// `Args::parse()` with CleanRL's booleans (`--cuda` alone means true, `--cuda false` turns it
/// off) and every error in one line with exit code 2; with `--resume`, the run's own arguments.
/// Sets libtorch's threads (`--torch-threads`).
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
    let matches = Args::command().args_override_self(true).allow_negative_numbers(true).mut_args(optional_value);
    let matches = matches.try_get_matches();
    let parsed = matches.and_then(|m| Args::from_arg_matches(&m).map(|args| (args, m)));
    let (args, matches) = parsed.unwrap_or_else(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => e.exit(),
        // clap's first paragraph (the error and the allowed values), without its usage lines
        _ => fail(
            2,
            e.to_string().split("\n\n").next().unwrap_or_default().trim_start_matches("error: ").replace("\n  ", " "),
        ),
    });
    let args = match &args.run.resume {
        Some(dir) => resumed_args(dir, &args, &matches).unwrap_or_else(|e| fail(2, e)),
        None => args,
    };
    envs::check_id(env!("CARGO_BIN_NAME"), &args.env_id).unwrap_or_else(|e| fail(2, e));
    tch::set_num_threads(args.run.torch_threads as i32);
    args
}

/// Seconds since 1970, for the run's name.
fn unix_time() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The flags that `--resume` takes from the command line; the others are the run's (args.json).
const RESUME_MAY_CHANGE: [&str; 9] = [
    "resume",
    "total_timesteps",
    "num_iterations",
    "checkpoint_interval",
    "save_model",
    "cuda",
    "device_ids",
    "torch_threads",
    "env_threads",
];

/// `--resume DIR`: the arguments in the run's args.json, with those of `RESUME_MAY_CHANGE` that the
/// command line gives; another flag given with a value other than the run's is an error.
fn resumed_args(dir: &std::path::Path, given: &Args, matches: &clap::ArgMatches) -> Result<Args, String> {
    let cannot = |why: String| format!("cannot resume {}: {why}", dir.display());
    let json = std::fs::read_to_string(dir.join("args.json"))
        .map_err(|e| cannot(format!("no args.json there ({e}); --resume takes a run directory, runs/<run-name>")))?;
    let mut saved: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| cannot(format!("its args.json is damaged ({e})")))?;
    let bin = env!("CARGO_BIN_NAME");
    if saved["binary"] != bin {
        let other = saved["binary"].as_str().unwrap_or("an earlier version").to_string();
        return Err(cannot(format!("it is a run of {other}, not of {bin}")));
    }
    let given = serde_json::to_value(given).map_err(|e| e.to_string())?;
    for (key, value) in given.as_object().into_iter().flatten() {
        if matches.value_source(key) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        if RESUME_MAY_CHANGE.contains(&key.as_str()) {
            saved[key] = value.clone();
        } else if saved[key] != *value {
            let (flag, run) = (key.replace('_', "-"), &saved[key]);
            let may = "the run's length (to extend it), --checkpoint-interval, --save-model, --cuda and thread counts";
            return Err(cannot(format!(
                "--{flag} {value} is not the run's {run}; with --resume only {may} may change"
            )));
        }
    }
    serde_json::from_value(saved).map_err(|e| cannot(format!("its args.json does not fit {bin} ({e})")))
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

/// CleanRL's evaluation loop for `--save-model`: 10 episodes of `env` from `seed`, `act` choosing and
/// taking every action; their returns, for eval.csv.
fn play<O>(env: Box<dyn envs::Env<Obs = O>>, seed: u64, mut act: impl FnMut(&mut VecEnv<O>)) -> Vec<f64>
where
    O: Copy + Default + Send + Sync + 'static,
{
    let mut env = VecEnv::new(vec![env]);
    env.reset(Some(seed));
    let mut returns = Vec::new();
    while returns.len() < 10 {
        act(&mut env);
        returns.extend(env.finished.iter().map(|ep| ep.r));
    }
    returns
}

/// Prints one line and exits: 2 for bad input, 1 for failures while running.
fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    // under mpirun (ppo_atari_multigpu) every rank finds the same bad input: rank 0 alone says so
    if code != 2 || std::env::var("OMPI_COMM_WORLD_RANK").map_or(true, |rank| rank == "0") {
        eprintln!("error: {msg}");
    }
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

    /// A checkpoint gives back the weights, Adam's state and the running statistics bit for bit.
    #[test]
    fn a_checkpoint_restores_weights_adam_and_statistics_bit_for_bit() {
        use super::*;
        let dir = tempfile::tempdir().expect("temp dir");
        let make = || {
            let vs = nn::VarStore::new(Device::Cpu);
            let layer = nn::linear(vs.root() / "layer", 3, 2, Default::default());
            let optimizer = FlatAdam::new(&vs, 1e-5);
            (vs, layer, optimizer)
        };
        let (_vs, layer, mut saved) = make();
        for _ in 0..3 {
            saved.zero_grad();
            layer.forward(&Tensor::randn([4, 3], (Kind::Float, Device::Cpu))).square().sum(Kind::Float).backward();
            saved.step(1e-2);
        }
        let rms = envs::RunningMeanStd { mean: vec![0.1, -0.2], var: vec![3.0, 1e-3], count: 5.5 };
        let mut args = Args::try_parse_from([env!("CARGO_BIN_NAME")]).expect("the defaults parse");
        let start = Start { iteration: 0, global_step: 0, start_time: Instant::now(), seed: 1, learning_rate: 1e-3 };
        let mut log = RunLog::open(dir.path().to_path_buf(), &args, "cpu", 100, &start).expect("run log");
        log.checkpoint(7, 7, 700, 1e-3, &saved, &[envs::SharedRms::new(rms.clone())]);

        args.run.resume = Some(dir.path().to_path_buf());
        let (_vs, _layer, mut restored) = make();
        let restored_rms = envs::SharedRms::new(envs::RunningMeanStd::new(2));
        let start = Start::new(&args, 8, &mut restored, std::slice::from_ref(&restored_rms));
        assert_eq!((start.iteration, start.global_step), (7, 700));
        let bits = |t: &Tensor| to_host(t).iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (a, b) in [(&saved.flat, &restored.flat), (&saved.m, &restored.m), (&saved.v, &restored.v)] {
            assert_eq!(bits(a), bits(b));
        }
        assert_eq!(saved.t, restored.t);
        assert_eq!(*restored_rms.lock(), rms);
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
