//! # your_env: `ppo` on an env of your own, a copy of src/bin/ppo.rs with its `make_env` edited (docs/your-env.md)
//!
//! As CleanRL users copy `ppo.py` and edit `make_env`: the env is `GridWalk-v0`, at the end; the rest is `ppo`'s.
//! Run: `cargo run --release --example your_env -- --env-id GridWalk-v0`; it writes `runs/<run-name>/` (docs/runs.md).
//! What is not PPO comes from the package's library (`src/lib.rs`), as CleanRL's from torch, tyro and cleanrl_utils.

use clap::Parser;
use envs::{Action, Env, RecordEpisodeStatistics, RecordVideo, Space, VecEnv};
use ppo_details::distributions::Categorical;
use ppo_details::{fail, parse_args, pick_device, play, to_host, var, FlatAdam, OrExit, RunArgs, RunLog, Start, Trace};
use ppo_details::{flags::*, Logged::*}; // value parsers (each numeric flag's range); a logged value, host or device
use tch::{nn, nn::Module, Device, IndexOp, Kind, Tensor};

#[derive(Parser, Debug, serde::Serialize, serde::Deserialize)]
#[command(about = "PPO on classic control (CartPole-v1), after CleanRL's ppo.py")]
struct Args {
    // the experiment's flags (seed, cuda, threads, checkpoints), the same in every binary: RunArgs
    #[command(flatten)]
    #[serde(flatten)]
    run: RunArgs,
    /// record env 0's games, every frame, on CleanRL's schedule, as GIFs in videos/<run-name>/
    #[arg(long, default_value_t = false)]
    capture_video: bool,
    /// the id of the environment (CartPole-v1, Acrobot-v1, MountainCar-v0; without velocities: CartPoleNoVel-v1, ...)
    #[arg(long, default_value = "GridWalk-v0")]
    env_id: String,
    /// total timesteps of the experiment
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..))]
    total_timesteps: u64,
    /// the learning rate of the optimizer
    #[arg(long, default_value_t = 2.5e-4, value_parser = positive)]
    learning_rate: f64,
    /// the number of parallel game environments
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

// TRY NOT TO MODIFY: Args to the library (one-line errors, --resume, the batch's checks); one_core: 1 thread each
ppo_details::experiment!(Args, one_core);

/// CleanRL's `make_env`, edited: `GridWalk-v0` is ours (checked against the Env contract first), any other id
/// `gym.make`'s; wrapped in `RecordVideo` (for env 0) and `RecordEpisodeStatistics`.
fn make_env(env_id: &str, video_dir: Option<std::path::PathBuf>) -> Result<Box<dyn Env<Obs = f32>>, envs::EnvError> {
    let env: Box<dyn Env<Obs = f32>> = match env_id {
        "GridWalk-v0" => Box::new(envs::TimeLimit::new(GridWalk::checked()?, 50)), // gymnasium's max_episode_steps
        _ => envs::make(env_id)?,
    };
    Ok(Box::new(RecordEpisodeStatistics::new(RecordVideo::new(env, video_dir)?)))
}

/// Core 2: orthogonal weight init with the given gain, zero biases (over nn.Linear's own init: the RNG draws both)
fn layer_init(p: nn::Path, in_dim: i64, out_dim: i64, std: f64) -> nn::Linear {
    let mut layer = nn::linear(p, in_dim, out_dim, Default::default());
    nn::Init::Orthogonal { gain: std }.set(&mut layer.ws);
    tch::no_grad(|| layer.bs.as_mut().map(|bias| bias.fill_(0.0)));
    layer
}

// Core 13: separate policy and value networks
struct Agent {
    critic: nn::Sequential,
    actor: nn::Sequential,
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
        Agent { critic: mlp(p / "critic", 1, 1.0), actor: mlp(p / "actor", n_actions, 0.01) }
    }

    fn get_value(&self, x: &Tensor) -> Tensor {
        self.critic.forward(x)
    }

    /// samples an action when none is given: (action, logprob, entropy, value)
    fn get_action_and_value(&self, x: &Tensor, action: Option<&Tensor>) -> [Tensor; 4] {
        let logits = self.actor.forward(x);
        let probs = Categorical::new(&logits);
        let action = action.map_or_else(|| probs.sample(), |a| a.shallow_clone());
        let (log_prob, entropy) = (probs.log_prob(&action), probs.entropy());
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
    let make = |i: usize| make_env(&args.env_id, video_dir.clone().filter(|_| i == 0));
    let env_fns: Vec<_> = (0..args.num_envs).map(|i| make(i).unwrap_or_else(|e| fail(2, e))).collect();

    // seeding: torch's generator, and numpy's legacy one for the minibatches (np.random.seed takes 32 bits)
    tch::manual_seed(args.run.seed as i64);
    let mut np_random = envs::numpy::RandomState::new(args.run.seed as u32);
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

    for iteration in from.iteration + 1..=num_iterations {
        // Core 4: learning-rate annealing, linearly to 0
        let frac = 1.0 - (iteration as f64 - 1.0) / num_iterations as f64;
        let lr = if args.anneal_lr { frac * args.learning_rate } else { args.learning_rate };
        // Aux 1: clip-range annealing, with the same fraction
        let clip_coef = if args.anneal_clip { frac * args.clip_coef } else { args.clip_coef };

        for step in 0..num_steps {
            global_step += num_envs as u64;
            let next_obs = Tensor::from_slice(&envs.obs).view([-1, obs_dim]).to_device(device);
            obs[step] = next_obs.shallow_clone();
            dones[step].copy_from_slice(&next_done);

            let [action, logprob, _, value] = tch::no_grad(|| agent.get_action_and_value(&next_obs, None));
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
        let b_advantages = Tensor::from_slice(&advantages).to_device(device);
        let b_returns = Tensor::from_slice(&returns).to_device(device);
        let b_values = Tensor::cat(&values, 0).view([-1]);

        // Optimizing the policy and value network (the last minibatch's values are logged, as CleanRL's)
        let learning_start = std::time::Instant::now();
        let (mut pg_loss, mut v_loss, mut entropy_loss) = (Tensor::new(), Tensor::new(), Tensor::new());
        let (mut old_approx_kl, mut approx_kl) = (Tensor::new(), Tensor::new());
        let (mut loss, mut grad_norm) = (Tensor::new(), Tensor::new());
        let mut ratio_devs = Vec::new(); // |ratio - 1| of every minibatch, for the clip fractions
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
        let returns = play(make_env(&args.env_id, None).unwrap_or_else(|e| fail(1, e)), args.run.seed, |env| {
            let obs = Tensor::from_slice(&env.obs).view([1, obs_dim]).to_device(device);
            let [a, _, _, _] = tch::no_grad(|| agent.get_action_and_value(&obs, None));
            a.to_device(Device::Cpu).copy_data(&mut action, 1);
            env.step(Action::Discrete(&action));
        });
        log.eval(&returns).or_exit();
    }
}

/// Your env: a 5 x 5 grid, the agent starts in a random cell and walks (0: up, 1: down, 2: left, 3: right; a wall
/// stops it) to the goal in the corner (4, 4): reward 1 there, and the episode terminates; -0.01 for every other
/// step. It observes its position, each coordinate scaled to [0, 1].
struct GridWalk {
    x: i32,
    y: i32,
    rng: rand::rngs::StdRng,
}

impl GridWalk {
    /// The env, once checked against the contract every binary relies on (`envs::check_env`: spaces, seeding,
    /// finite observations within the box, finite rewards): a broken env is one clear error, not a panic later.
    fn checked() -> Result<GridWalk, envs::EnvError> {
        let mut env = GridWalk { x: 0, y: 0, rng: rand::SeedableRng::seed_from_u64(0) };
        envs::check_env(&mut env, 200)?;
        Ok(env)
    }

    fn observe(&self, obs: &mut [f32]) {
        obs.copy_from_slice(&[self.x as f32 / 4.0, self.y as f32 / 4.0]);
    }
}

impl Env for GridWalk {
    type Obs = f32;

    fn observation_space(&self) -> Space {
        Space::bounded_box(vec![0.0; 2], vec![1.0; 2])
    }

    fn action_space(&self) -> Space {
        Space::Discrete(4)
    }

    /// With a seed, the env's own generator starts anew from it (gymnasium's `reset(seed=...)`).
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        use rand::Rng;
        if let Some(seed) = seed {
            self.rng = rand::SeedableRng::seed_from_u64(seed);
        }
        (self.x, self.y) = (4, 4);
        while (self.x, self.y) == (4, 4) {
            (self.x, self.y) = (self.rng.gen_range(0..5), self.rng.gen_range(0..5));
        }
        self.observe(obs);
    }

    fn step(&mut self, action: Action, obs: &mut [f32]) -> envs::Step {
        let (dx, dy) = [(0, -1), (0, 1), (-1, 0), (1, 0)][action.discrete()];
        (self.x, self.y) = ((self.x + dx).clamp(0, 4), (self.y + dy).clamp(0, 4));
        self.observe(obs);
        let terminated = (self.x, self.y) == (4, 4);
        envs::Step { reward: if terminated { 1.0 } else { -0.01 }, terminated, truncated: false, episode: None }
    }
}
