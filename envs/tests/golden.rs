//! The native classic-control envs against gymnasium 0.29.1: same start state and actions,
//! identical float32 observations, rewards and flags at every step (TimeLimit included).
//! Golden data: `scripts/gen_golden_classic.py`: every step of a few episodes per env, and
//! checksums of long CartPole and Acrobot runs, since a 1-ulp slip (`x * x` for gymnasium's
//! `pow(x, 2)`) reaches the float32 observations of only 8 of their 3,000 CartPole and 31 of
//! their 300 Acrobot episodes. The data is glibc's pow on an x86-64 with FMA: glibc's build
//! without FMA rounds some squares differently.

use envs::{Acrobot, Action, CartPole, Env, MountainCar, MountainCarContinuous, Pendulum, TimeLimit};
use serde_json::Value;

fn golden() -> Value {
    let text = include_str!("golden/classic_control.json");
    serde_json::from_str(text).expect("golden file is valid JSON")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

/// Replays every golden case of `env_id` through `env` after `set_state` puts it at the start.
fn replay<E: Env<Obs = f32>>(env_id: &str, max_steps: u32, mut make: impl FnMut(&[f64]) -> E) {
    let cases = golden()["envs"][env_id].as_array().expect("cases").clone();
    assert!(!cases.is_empty());
    let mut steps = 0;
    for (c, case) in cases.iter().enumerate() {
        let mut env = TimeLimit::new(make(&floats(&case["start_state"])), max_steps);
        let dim = env.observation_space().flat_dim();
        let mut obs = vec![0f32; dim];
        let actions = case["actions"].as_array().unwrap();
        for (t, a) in actions.iter().enumerate() {
            let step = match a.as_i64() {
                Some(a) => env.step(Action::Discrete(&[a]), &mut obs),
                None => {
                    env.step(Action::Continuous(&floats(a).iter().map(|&x| x as f32).collect::<Vec<_>>()), &mut obs)
                }
            };
            let want: Vec<f32> = floats(&case["obs"][t]).iter().map(|&x| x as f32).collect();
            assert_eq!(obs, want, "{env_id} case {c} step {t}: observation");
            assert_eq!(step.reward, case["rewards"][t].as_f64().unwrap(), "{env_id} case {c} step {t}: reward");
            assert_eq!(
                step.terminated,
                case["terminated"][t].as_bool().unwrap(),
                "{env_id} case {c} step {t}: terminated"
            );
            assert_eq!(
                step.truncated,
                case["truncated"][t].as_bool().unwrap(),
                "{env_id} case {c} step {t}: truncated"
            );
            steps += 1;
        }
    }
    assert!(steps > 100, "{env_id}: too few golden steps ({steps})");
}

/// splitmix64, as the golden script draws the long runs' start states and actions.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E3779B97F4A7C15);
        mix(self.0)
    }

    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
    z ^ (z >> 31)
}

/// One env's long run in `classic_control_long.bin` (layout in the golden script).
struct LongRun {
    /// (steps, checksum) per episode
    episodes: Vec<(usize, u64)>,
    /// the chained checksum's top bit after each step, all episodes in a row
    bits: Vec<u8>,
}

fn long_run(env_id: &str) -> LongRun {
    let mut data: &[u8] = include_bytes!("golden/classic_control_long.bin");
    fn take<'a>(data: &mut &'a [u8], n: usize) -> &'a [u8] {
        let (head, rest) = data.split_at(n);
        *data = rest;
        head
    }
    let u32_at = |data: &mut &[u8]| u32::from_le_bytes(take(data, 4).try_into().unwrap()) as usize;
    loop {
        assert!(!data.is_empty(), "{env_id}: no long run in the golden file");
        let id_len = take(&mut data, 1)[0] as usize;
        let id = take(&mut data, id_len);
        let episodes = (0..u32_at(&mut data))
            .map(|_| {
                let steps = u16::from_le_bytes(take(&mut data, 2).try_into().unwrap()) as usize;
                (steps, u64::from_le_bytes(take(&mut data, 8).try_into().unwrap()))
            })
            .collect();
        let n = u32_at(&mut data);
        let bits = take(&mut data, n).to_vec();
        if id == env_id.as_bytes() {
            return LongRun { episodes, bits };
        }
    }
}

/// Runs the long episodes of `env_id`: episode e's start (`make`: the env, and the float32 values
/// that steer the first action) and actions (`act`, from the previous observation) come from
/// splitmix64 seeded with e; every step's observation, reward and flags must give gymnasium's
/// checksums. A failure names the first step whose check bit differs (the data may differ from a
/// step or two earlier: a bit matches by chance with probability 1/2).
fn replay_long<E: Env<Obs = f32>>(
    env_id: &str,
    mut make: impl FnMut(&mut SplitMix64) -> (E, Vec<f32>),
    mut act: impl FnMut(&mut SplitMix64, &[f32]) -> i64,
) {
    let run = long_run(env_id);
    let (mut offset, mut failed) = (0, vec![]);
    for (e, &(want_steps, want_sum)) in run.episodes.iter().enumerate() {
        let mut rng = SplitMix64(e as u64);
        let (env, start) = make(&mut rng);
        let mut env = TimeLimit::new(env, 500);
        let mut obs = vec![0f32; env.observation_space().flat_dim()];
        let (mut h, mut history, mut first_bad) = (0x9E3779B97F4A7C15u64, Vec::<Vec<f32>>::new(), None);
        loop {
            let a = act(&mut rng, history.last().unwrap_or(&start));
            let step = env.step(Action::Discrete(&[a]), &mut obs);
            let mut words: Vec<u64> =
                obs.chunks(2).map(|p| p[0].to_bits() as u64 | (p[1].to_bits() as u64) << 32).collect();
            words.extend([step.reward.to_bits(), step.terminated as u64 | (step.truncated as u64) << 1]);
            for w in words {
                h = mix(h ^ w);
            }
            let t = history.len();
            history.push(obs.clone());
            let bit = (t < want_steps).then(|| (run.bits[(offset + t) / 8] >> ((offset + t) % 8)) & 1);
            if first_bad.is_none() && bit.is_some_and(|b| b as u64 != h >> 63) {
                first_bad = Some(t);
            }
            if step.terminated || step.truncated {
                break;
            }
        }
        let steps = history.len();
        if steps != want_steps || h != want_sum {
            let t = first_bad.unwrap_or(steps.min(want_steps) - 1);
            let recent: Vec<String> =
                (t.saturating_sub(2)..=t.min(steps - 1)).map(|s| format!("step {s}: {:?}", history[s])).collect();
            failed.push(format!(
                "episode {e}: first differs at step {t} ({steps} steps, gymnasium {want_steps}); ours {}; \
                 gymnasium's: scripts/gen_golden_classic.py --episode {env_id} {e}",
                recent.join(", ")
            ));
        }
        offset += want_steps;
    }
    assert_eq!(offset.div_ceil(8), run.bits.len(), "{env_id}: check bits for every step");
    assert!(
        failed.is_empty(),
        "{env_id} long run: {} of {} episodes differ from gymnasium; {}",
        failed.len(),
        run.episodes.len(),
        failed[..failed.len().min(3)].join("; ")
    );
}

/// CartPole-v1: every golden case replayed from its start state under a time limit of 500 steps gives gymnasium's
/// float32 observations, rewards and flags at every step, compared exactly.
#[test]
fn cartpole_matches_gymnasium() {
    replay("CartPole-v1", 500, |s| {
        let mut env = CartPole::new();
        env.reset(Some(0), &mut [0.0; 4]);
        env.state = [s[0], s[1], s[2], s[3]];
        env
    });
}

/// Acrobot-v1: every golden case replayed from its start state under a time limit of 500 steps gives gymnasium's
/// float32 observations, rewards and flags at every step, compared exactly.
#[test]
fn acrobot_matches_gymnasium() {
    replay("Acrobot-v1", 500, |s| {
        let mut env = Acrobot::new();
        env.reset(Some(0), &mut [0.0; 6]);
        env.state = [s[0], s[1], s[2], s[3]];
        env
    });
}

/// 3 times in 10 a random action of `n`, else `policy`'s: the golden script's long-run actions.
fn mostly(rng: &mut SplitMix64, n: u64, policy: impl FnOnce() -> i64) -> i64 {
    let u = rng.next();
    if u % 10 < 3 {
        ((u >> 32) % n) as i64
    } else {
        policy()
    }
}

/// CartPole: a balancing push (3,000 episodes, 10^6 steps).
#[test]
fn cartpole_long_run_matches_gymnasium() {
    let make = |rng: &mut SplitMix64| {
        let mut env = CartPole::new();
        env.reset(Some(0), &mut [0.0; 4]);
        env.state = std::array::from_fn(|_| rng.uniform(-0.05, 0.05));
        let start = env.state.map(|x| x as f32).to_vec();
        (env, start)
    };
    replay_long("CartPole-v1", make, |rng, obs| mostly(rng, 2, || (obs[2] as f64 + 0.5 * obs[3] as f64 > 0.0) as i64));
}

/// Acrobot: torque along dtheta1, 2 or 0 (300 episodes of 500 steps).
#[test]
fn acrobot_long_run_matches_gymnasium() {
    let make = |rng: &mut SplitMix64| {
        let mut env = Acrobot::new();
        env.reset(Some(0), &mut [0.0; 6]);
        env.state = std::array::from_fn(|_| rng.uniform(-0.1, 0.1) as f32 as f64); // gymnasium's float32 start
        let [t1, t2, d1, d2] = env.state;
        let start = [t1.cos(), t1.sin(), t2.cos(), t2.sin(), d1, d2].map(|x| x as f32).to_vec();
        (env, start)
    };
    replay_long("Acrobot-v1", make, |rng, obs| mostly(rng, 3, || if obs[4] > 0.0 { 2 } else { 0 }));
}

/// MountainCar-v0: every golden case replayed from its start state under a time limit of 200 steps gives gymnasium's
/// float32 observations, rewards and flags at every step, compared exactly.
#[test]
fn mountain_car_matches_gymnasium() {
    replay("MountainCar-v0", 200, |s| {
        let mut env = MountainCar::new();
        env.reset(Some(0), &mut [0.0; 2]);
        env.state = [s[0], s[1]];
        env
    });
}

/// Pendulum-v1: every golden case replayed from its start state under a time limit of 200 steps gives gymnasium's
/// float32 observations, rewards and flags at every step, compared exactly.
#[test]
fn pendulum_matches_gymnasium() {
    replay("Pendulum-v1", 200, |s| {
        let mut env = Pendulum::new();
        env.reset(Some(0), &mut [0.0; 3]);
        env.state = [s[0], s[1]];
        env
    });
}

/// MountainCarContinuous-v0: every golden case replayed from its start state under a time limit of 999 steps gives
/// gymnasium's float32 observations, rewards and flags at every step, compared exactly.
#[test]
fn mountain_car_continuous_matches_gymnasium() {
    replay("MountainCarContinuous-v0", 999, |s| {
        let mut env = MountainCarContinuous::new();
        env.reset(Some(0), &mut [0.0; 2]);
        env.state = [s[0], s[1]];
        env
    });
}

/// rl-baselines3-zoo's velocity-masked ids are the env above (bit-exact against gymnasium) with
/// the velocity entries multiplied by 0 (numpy's `observation * mask`: -0.0 where a velocity is
/// negative); rewards, flags and episodes unchanged. Same seed and actions through `envs::make`.
#[test]
fn velocity_masked_envs_are_the_golden_envs_with_velocities_zeroed() {
    let cases: [(&str, &str, &[usize]); 4] = [
        ("CartPoleNoVel-v1", "CartPole-v1", &[1, 3]),
        ("MountainCarNoVel-v0", "MountainCar-v0", &[1]),
        ("PendulumNoVel-v1", "Pendulum-v1", &[2]),
        ("MountainCarContinuousNoVel-v0", "MountainCarContinuous-v0", &[1]),
    ];
    for (id, base_id, hidden) in cases {
        let (mut env, mut base) = (envs::make(id).expect(id), envs::make(base_id).expect(base_id));
        assert_eq!(env.observation_space(), base.observation_space(), "{id}: rl-zoo keeps the space");
        let dim = env.observation_space().flat_dim();
        let (mut obs, mut base_obs) = (vec![0f32; dim], vec![0f32; dim]);
        let masked = |base_obs: &[f32]| -> Vec<u32> {
            base_obs
                .iter()
                .enumerate()
                .map(|(i, &x)| if hidden.contains(&i) { (x * 0.0).to_bits() } else { x.to_bits() })
                .collect()
        };
        let (mut episodes, mut negative_zero) = (0, false);
        env.reset(Some(7), &mut obs);
        base.reset(Some(7), &mut base_obs);
        for t in 0..1500u32 {
            assert_eq!(obs.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), masked(&base_obs), "{id} step {t}");
            negative_zero |= hidden.iter().any(|&i| obs[i].to_bits() == (-0f32).to_bits());
            let (a, c) = ([(t * 7 % 3 % 2) as i64], [((t * 37 % 11) as f32 - 5.0) / 2.0]); // some actions out of bounds
            let action = |d: bool| if d { Action::Discrete(&a) } else { Action::Continuous(&c) };
            let discrete = matches!(env.action_space(), envs::Space::Discrete(_));
            let (s, b) = (env.step(action(discrete), &mut obs), base.step(action(discrete), &mut base_obs));
            assert_eq!((s.reward, s.terminated, s.truncated), (b.reward, b.terminated, b.truncated), "{id} step {t}");
            if s.terminated || s.truncated {
                episodes += 1;
                env.reset(None, &mut obs);
                base.reset(None, &mut base_obs);
            }
        }
        assert!(episodes >= 1 && negative_zero, "{id}: {episodes} episodes, a negative velocity seen: {negative_zero}");
    }
}
