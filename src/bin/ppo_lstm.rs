//! # ppo_lstm: PPO with an LSTM policy on Atari games, a diff of `ppo_atari.rs`
//!
//! CleanRL's `ppo_atari_lstm.py`: `ppo_atari.rs` with one frame, not four, and an LSTM after the CNN (`// LSTM N`);
//! a 1-D observation (CartPoleNoVel-v1) gets an MLP instead of the CNN, to test memory on CPU.
//! Run: `cargo run --release --bin ppo_lstm -- --env-id BreakoutNoFrameskip-v4 --seed 1`; writes `runs/<run-name>/`.
//! What is not PPO comes from the package's library (`src/lib.rs`), as CleanRL's from torch, tyro and cleanrl_utils.

use clap::Parser;
use envs::atari::*; // the Atari env and its wrappers
use envs::{Action, Env, RecordEpisodeStatistics, RecordVideo, Space, VecEnv};
use ppo_details::distributions::Categorical;
use ppo_details::{fail, parse_args, pick_device, play, to_host, var, FlatAdam, OrExit, RunArgs, RunLog, Start, Trace};
use ppo_details::{flags::*, Logged::*}; // value parsers (each numeric flag's range); a logged value, host or device
use tch::nn::{LSTMState, RNN};
use tch::{nn, nn::Module, Device, IndexOp, Kind, Tensor};

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
    /// the id of the environment (<Game>NoFrameskip-v4: BreakoutNoFrameskip-v4, ...; or a 1-D one: CartPoleNoVel-v1)
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

// TRY NOT TO MODIFY: Args to the library (one-line errors, --resume, the batch's checks); one_core: 1 thread each
ppo_details::experiment!(Args, all_cores, check = check_args);

/// LSTM's flag combination, beside the batch's that the library checks: minibatches of whole envs.
fn check_args(a: &Args) -> Result<(), String> {
    let (envs, n) = (a.num_envs, a.num_minibatches);
    let err = format!("--num-envs ({envs}) must be divisible by --num-minibatches ({n}): minibatches are whole envs");
    envs.is_multiple_of(n).then_some(()).ok_or(err)
}

/// CleanRL's `make_env`: the game (native ALE, else Gymnasium's), wrapped as CleanRL wraps it (innermost first).
/// Its pixels as f32; a 1-D env (not in CleanRL) as `ppo.rs` makes it.
fn make_env(env_id: &str, video_dir: Option<std::path::PathBuf>) -> Result<Box<dyn Env<Obs = f32>>, envs::EnvError> {
    let Some(_) = rom_name(env_id) else { return Ok(Box::new(RecordEpisodeStatistics::new(envs::make(env_id)?))) };
    let env = Game::new(env_id)?;
    let has_fire = env.has_fire();
    let env = RecordEpisodeStatistics::new(RecordVideo::new(env, video_dir)?); // innermost: raw game scores
    let env = NoopReset::new(env, 30); // Atari 1: NoopResetEnv
    let env = MaxAndSkip::new(env, 4); // Atari 2: MaxAndSkipEnv
    let env = EpisodicLife::new(env); // Atari 3: EpisodicLifeEnv
    let env = FireReset::new(env, has_fire); // Atari 4: FireResetEnv (without FIRE: passes through, as if unwrapped)
    let env = ClipReward::new(env); // Atari 6: ClipRewardEnv
    let env = GrayScale::new(ResizeObservation::new(env, 84, 84)); // Atari 5: WarpFrame (84x84 gray)
    Ok(Box::new(envs::ObsAsF32::new(FrameStack::new(env, 1)))) // Atari 7: FrameStack (one frame: the LSTM remembers)
}

/// Core 2: orthogonal weight init with the given gain, zero biases (over nn.Linear's own init: the RNG draws both)
fn layer_init(p: nn::Path, in_dim: i64, out_dim: i64, std: f64) -> nn::Linear {
    let mut layer = nn::linear(p, in_dim, out_dim, Default::default());
    nn::Init::Orthogonal { gain: std }.set(&mut layer.ws);
    tch::no_grad(|| layer.bs.as_mut().map(|bias| bias.fill_(0.0)));
    layer
}

/// Core 2 for convolutions: orthogonal (out, in*k*k) kernels as torch makes them, zero biases (over nn.Conv2d's own
/// init: the RNG draws both)
fn conv_init(p: nn::Path, c_in: i64, c_out: i64, k: i64, stride: i64) -> nn::Conv2D {
    let bound = 1.0 / ((c_in * k * k) as f64).sqrt(); // nn.Conv2d's bias range
    let config = nn::ConvConfig { stride, bs_init: nn::Init::Uniform { lo: -bound, up: bound }, ..Default::default() };
    let mut conv = nn::conv2d(p, c_in, c_out, k, config);
    conv.ws.init(nn::Init::Orthogonal { gain: 2f64.sqrt() });
    tch::no_grad(|| conv.bs.as_mut().map(|bias| bias.fill_(0.0)));
    conv
}

/// Atari 8's Nature CNN on c_in frames; layers 0, 2, 4, 7 (ReLU, Flatten between): CleanRL's names (network.0.weight)
fn nature_cnn(net: &nn::Path, c_in: i64) -> nn::Sequential {
    nn::seq()
        .add(conv_init(net / 0, c_in, 32, 8, 4))
        .add_fn(|x| x.relu())
        .add(conv_init(net / 2, 32, 64, 4, 2))
        .add_fn(|x| x.relu())
        .add(conv_init(net / 4, 64, 64, 3, 1))
        .add_fn(|x| x.relu().flatten(1, -1))
        .add(layer_init(net / 7, 64 * 7 * 7, 512, 2f64.sqrt()))
        .add_fn(|x| x.relu())
}

// Atari 8: one trunk shared by the policy and value heads (Core 13's other choice), then the LSTM
struct Agent {
    network: nn::Sequential,
    lstm: nn::LSTM,
    actor: nn::Linear,
    critic: nn::Linear,
    pixels: bool,
}

impl Agent {
    fn new(p: &nn::Path, obs_dim: i64, n_actions: i64) -> Agent {
        let pixels = obs_dim == 84 * 84;
        // a vector observation gets a small tanh MLP instead of the CNN (not in CleanRL)
        let mlp = |net: nn::Path| nn::seq().add(layer_init(&net / 0, obs_dim, 64, 2f64.sqrt())).add_fn(|x| x.tanh());
        let network = if pixels { nature_cnn(&(p / "network"), 1) } else { mlp(p / "network") };
        // nn.LSTM's own init first: the RNG draws its four tensors in order, uniform in 1/sqrt(hidden size)
        let draw = nn::Init::Uniform { lo: -1.0 / 128f64.sqrt(), up: 1.0 / 128f64.sqrt() };
        let (w_ih_init, w_hh_init, b_ih_init, b_hh_init) = (draw, draw, Some(draw), Some(draw));
        let config =
            nn::RNNConfig { w_ih_init, w_hh_init, b_ih_init, b_hh_init, batch_first: false, ..Default::default() };
        let lstm = nn::lstm(p / "lstm", if pixels { 512 } else { 64 }, 128, config);
        // LSTM 1: orthogonal weights with gain 1 (weight_ih first: the RNG's order), zero biases
        for name in ["weight_ih_l0", "weight_hh_l0"] {
            if let Some(mut w) = (p / "lstm").get(name) {
                nn::Init::Orthogonal { gain: 1.0 }.set(&mut w);
            }
        }
        for name in ["bias_ih_l0", "bias_hh_l0"] {
            if let Some(mut b) = (p / "lstm").get(name) {
                let _ = tch::no_grad(|| b.fill_(0.0));
            }
        }
        let actor = layer_init(p / "actor", 128, n_actions, 0.01); // before the critic: CleanRL's order (the RNG's)
        let critic = layer_init(p / "critic", 128, 1, 1.0);
        Agent { network, lstm, actor, critic, pixels }
    }

    /// The LSTM's outputs for T steps of B envs (row t * B + b of `x` and `done`) from `lstm_state`, and the state
    /// after the last: one LSTM call per step, as CleanRL's loop (one call over many steps rounds otherwise).
    fn get_states(&self, x: &Tensor, lstm_state: &LSTMState, done: &Tensor) -> (Tensor, LSTMState) {
        // Atari 9: scale pixels to [0, 1]
        let x = if self.pixels { x.view([-1, 1, 84, 84]) / 255.0 } else { x.shallow_clone() };
        let hidden = self.network.forward(&x);
        let batch = lstm_state.h().size()[1];
        let (hidden, done) = (hidden.view([-1, batch, hidden.size()[1]]), done.view([-1, batch]));
        let (mut h, mut c) = (lstm_state.h(), lstm_state.c());
        let mut new_hidden = Vec::new();
        for (x, d) in hidden.unbind(0).iter().zip(done.unbind(0)) {
            // LSTM 3: the state is reset where an episode ended, before the step that begins the next
            let keep = d.rsub_scalar(1.0).view([1, -1, 1]); // 1.0 - done, as torch's rsub (1 - 1: +0, not -0)
            let (out, state) = self.lstm.seq_init(&x.unsqueeze(0), &LSTMState((&keep * &h, &keep * &c)));
            (h, c) = (state.h(), state.c());
            new_hidden.push(out);
        }
        (Tensor::cat(&new_hidden, 0).flatten(0, 1), LSTMState((h, c)))
    }

    fn get_value(&self, x: &Tensor, lstm_state: &LSTMState, done: &Tensor) -> Tensor {
        self.critic.forward(&self.get_states(x, lstm_state, done).0)
    }

    /// torch's Categorical(logits) written out; samples when given no action: (action, logprob, entropy, value, state)
    fn get_action_and_value(
        &self,
        x: &Tensor,
        lstm_state: &LSTMState,
        done: &Tensor,
        action: Option<&Tensor>,
    ) -> (Tensor, Tensor, Tensor, Tensor, LSTMState) {
        let (hidden, lstm_state) = self.get_states(x, lstm_state, done);
        let logits = self.actor.forward(&hidden);
        let probs = Categorical::new(&logits);
        let action = action.map_or_else(|| probs.sample(), |a| a.shallow_clone());
        let (log_prob, entropy) = (probs.log_prob(&action), probs.entropy());
        (action, log_prob, entropy, self.critic.forward(&hidden), lstm_state)
    }
}

fn main() {
    // bad input (a flag out of range, flags that cannot work together): one line, exit code 2, nothing written
    let args: Args = parse_args();
    let (num_envs, num_steps) = (args.num_envs, args.num_steps);
    let batch_size = num_envs * num_steps;
    let envsperbatch = num_envs / args.num_minibatches;
    let num_iterations = args.total_timesteps as usize / batch_size;
    let run_name = format!("{}__{}__{}__{}", args.env_id, args.run.exp_name, args.run.seed, ppo_details::unix_time());
    let video_dir: Option<std::path::PathBuf> = args.capture_video.then(|| ["videos", &run_name].iter().collect());
    let make = |i: usize| make_env(&args.env_id, video_dir.clone().filter(|_| i == 0));
    let env_fns: Vec<_> = (0..args.num_envs).map(|i| make(i).unwrap_or_else(|e| fail(2, e))).collect();

    // seeding: torch's generator, and numpy's legacy one for the minibatches (np.random.seed takes 32 bits)
    tch::manual_seed(args.run.seed as i64);
    let mut np_random = envs::numpy::RandomState::new(args.run.seed as u32);
    ppo_details::torch_deterministic(args.run.torch_deterministic); // cuDNN: deterministic algorithms, no autotuner
    let (device, device_name) = pick_device(args.run.cuda, ppo_details::Network::Cnn);
    println!("device: {device_name}");

    // env setup. Core 1: vectorized architecture
    let mut envs = VecEnv::new(env_fns).with_threads(args.run.env_threads);
    let (obs_dim, n_actions) = match (envs.single_observation_space(), envs.single_action_space()) {
        (Space::Box { shape, .. }, Space::Discrete(n)) if shape == [1, 84, 84] || shape.len() == 1 => {
            (shape.iter().product::<usize>() as i64, n as i64)
        }
        (o, a) => fail(2, format!("{}: {o} observations, {a} actions; ppo_lstm: 1x84x84/1-D, Discrete", args.env_id)),
    };
    let mut vs = nn::VarStore::new(device);
    let agent = Agent::new(&vs.root(), obs_dim, n_actions);
    // Core 3: Adam with epsilon 1e-5 (torch.optim.Adam's steps, per parameter; the rate comes at step(lr))
    let mut optimizer = FlatAdam::new(&vs, 1e-5);
    // TRY NOT TO MODIFY: --resume loads the checkpoint's weights, Adam, counters, statistics (&[]: none), cuts logs
    let from = Start::new(&args, num_iterations, &mut optimizer, &[]).or_exit();
    if from.iteration > 0 {
        tch::manual_seed(from.seed as i64); // --resume: the checkpoint's seed, as the envs' fresh episodes get
        np_random = envs::numpy::RandomState::new(from.seed as u32);
    }
    let mut log = RunLog::create(&run_name, &args, &device_name, &from).or_exit();
    let mut trace = Trace::start(&vs); // PPO_TRACE=FILE: the first updates, for tests/parity.rs

    // storage: obs, actions, logprobs, values on the device, a tensor per step; rewards, dones on the host, for GAE
    let per_step = || (0..num_steps).map(|_| Tensor::new()).collect::<Vec<_>>();
    let (mut obs, mut actions, mut logprobs, mut values) = (per_step(), per_step(), per_step(), per_step());
    let mut rewards = vec![vec![0f32; num_envs]; num_steps];
    let mut dones = vec![vec![0f32; num_envs]; num_steps];

    // start the game (with --resume: where the checkpoint stood, in fresh episodes)
    let mut global_step = from.global_step;
    envs.reset(Some(from.seed));
    let mut next_done = vec![0f32; num_envs];
    let mut action_buf = vec![0i64; num_envs];
    // LSTM 2: zero initial hidden and cell state
    let mut next_lstm_state = agent.lstm.zero_state(num_envs as i64);

    for iteration in from.iteration + 1..=num_iterations {
        // Core 4: learning-rate annealing, linearly to 0
        let frac = 1.0 - (iteration as f64 - 1.0) / num_iterations as f64;
        let lr = if args.anneal_lr { frac * args.learning_rate } else { args.learning_rate };
        // Aux 1: clip-range annealing, with the same fraction
        let clip_coef = if args.anneal_clip { frac * args.clip_coef } else { args.clip_coef };

        // LSTM 5: the state before the rollout, from which the update replays the sequences
        let initial_lstm_state = LSTMState((next_lstm_state.h(), next_lstm_state.c()));
        for step in 0..num_steps {
            global_step += num_envs as u64;
            let next_obs = ppo_details::upload(&envs.obs, obs_dim, agent.pixels, device); // pixels as bytes
            obs[step] = next_obs.shallow_clone();
            dones[step].copy_from_slice(&next_done);

            let next_done_t = Tensor::from_slice(&next_done).to_device(device);
            let (action, logprob, _, value, lstm_state) =
                tch::no_grad(|| agent.get_action_and_value(&next_obs, &next_lstm_state, &next_done_t, None));
            next_lstm_state = lstm_state;
            values[step] = value;
            action.to_device(Device::Cpu).copy_data(&mut action_buf, num_envs); // one copy per step
            actions[step] = action;
            logprobs[step] = logprob;

            // CleanRL's `envs.step(action)`: it writes envs.obs, .rewards, .terminated, .truncated, .finished
            envs.step(Action::Discrete(&action_buf));
            rewards[step].copy_from_slice(&envs.rewards);
            // termination and truncation both end the episode (CleanRL does not bootstrap truncation)
            for (done, (term, trunc)) in next_done.iter_mut().zip(envs.terminated.iter().zip(&envs.truncated)) {
                *done = (*term || *trunc) as u8 as f32;
            }
            log.episodes(global_step, &envs.finished);
        }

        // bootstrap value if not done; the values come down to the host once per rollout, for GAE
        let next_obs = ppo_details::upload(&envs.obs, obs_dim, agent.pixels, device); // pixels as bytes
        let next_done_t = Tensor::from_slice(&next_done).to_device(device);
        let next_value = to_host(&tch::no_grad(|| agent.get_value(&next_obs, &next_lstm_state, &next_done_t)));
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
        let b_advantages = Tensor::from_slice(&advantages).to_device(device);
        let b_returns = Tensor::from_slice(&returns).to_device(device);
        let b_values = Tensor::cat(&values, 0).view([-1]);
        let b_dones = Tensor::from_slice(&dones.concat()).to_device(device);

        // Optimizing the policy and value network (the last minibatch's values are logged, as CleanRL's)
        let learning_start = std::time::Instant::now();
        let (mut pg_loss, mut v_loss, mut entropy_loss) = (Tensor::new(), Tensor::new(), Tensor::new());
        let (mut old_approx_kl, mut approx_kl) = (Tensor::new(), Tensor::new());
        let (mut loss, mut grad_norm) = (Tensor::new(), Tensor::new());
        let mut ratio_devs = Vec::new(); // |ratio - 1| of every minibatch, for the clip fractions
        let mut envinds_host: Vec<i64> = (0..num_envs as i64).collect();
        for _epoch in 0..args.update_epochs {
            // Core 6: shuffled mini-batches that cover the whole batch each epoch (numpy's shuffle, PPO_TRACE keeps it)
            // LSTM 4: minibatches of whole envs' sequences in time order
            np_random.shuffle(&mut envinds_host);
            let envinds = trace.order(Tensor::from_slice(&envinds_host)).to_device(device);
            let flatinds = Tensor::arange(batch_size as i64, (Kind::Int64, device)).view([num_steps as i64, -1]);
            for start in (0..num_envs).step_by(envsperbatch) {
                let mbenvinds = envinds.narrow(0, start as i64, envsperbatch as i64);
                let mb_inds = flatinds.index_select(1, &mbenvinds).flatten(0, -1);
                // LSTM 5: the states are rebuilt from the state saved before the rollout
                let (h, c) = (initial_lstm_state.h(), initial_lstm_state.c());
                let mb_state = LSTMState((h.index_select(1, &mbenvinds), c.index_select(1, &mbenvinds)));
                let (mb_obs, mb_dones, mb_actions) = (b_obs.i(&mb_inds), b_dones.i(&mb_inds), b_actions.i(&mb_inds));
                let (_, newlogprob, entropy, newvalue, _) =
                    agent.get_action_and_value(&mb_obs, &mb_state, &mb_dones, Some(&mb_actions));
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
            ("debug/unclipped_grad_norm", OnDevice(&grad_norm)),
        ];
        trace.finish(&row, [&b_obs, &b_actions, &next_obs], [&rewards, &dones], &next_done).or_exit();
        log.update(&row, &loss, envs.take_step_seconds(), learning_start).or_exit();
        log.checkpoint(&optimizer, &[]).or_exit();
    }

    if args.run.save_model {
        // CleanRL's evaluate: the saved file, read back into the agent, plays 10 episodes with sampled actions
        let model_path = log.save(&vs, &args.run.exp_name).or_exit();
        vs.load(&model_path).unwrap_or_else(|e| fail(1, format!("cannot load {}: {e}", model_path.display())));
        let mut action = [0i64];
        let (mut lstm_state, mut done) = (agent.lstm.zero_state(1), Tensor::zeros([1], (Kind::Float, device)));
        let returns = play(make_env(&args.env_id, None).unwrap_or_else(|e| fail(1, e)), args.run.seed, |env| {
            let obs = Tensor::from_slice(&env.obs).view([1, obs_dim]).to_device(device);
            let (a, _, _, _, state) = tch::no_grad(|| agent.get_action_and_value(&obs, &lstm_state, &done, None));
            a.to_device(Device::Cpu).copy_data(&mut action, 1);
            env.step(Action::Discrete(&action));
            (lstm_state, done) =
                (state, Tensor::from_slice(&[(env.terminated[0] || env.truncated[0]) as u8 as f32]).to_device(device));
        });
        log.eval(&returns).or_exit();
    }
}
