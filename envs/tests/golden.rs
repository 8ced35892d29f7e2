//! The native classic-control envs against gymnasium 0.29.1: same start state and actions,
//! identical float32 observations, rewards and flags at every step (TimeLimit included).
//! Golden data: `scripts/gen_golden_classic.py`.

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

#[test]
fn cartpole_matches_gymnasium() {
    replay("CartPole-v1", 500, |s| {
        let mut env = CartPole::new();
        env.reset(Some(0), &mut [0.0; 4]);
        env.state = [s[0], s[1], s[2], s[3]];
        env
    });
}

#[test]
fn acrobot_matches_gymnasium() {
    replay("Acrobot-v1", 500, |s| {
        let mut env = Acrobot::new();
        env.reset(Some(0), &mut [0.0; 6]);
        env.state = [s[0], s[1], s[2], s[3]];
        env
    });
}

#[test]
fn mountain_car_matches_gymnasium() {
    replay("MountainCar-v0", 200, |s| {
        let mut env = MountainCar::new();
        env.reset(Some(0), &mut [0.0; 2]);
        env.state = [s[0], s[1]];
        env
    });
}

#[test]
fn pendulum_matches_gymnasium() {
    replay("Pendulum-v1", 200, |s| {
        let mut env = Pendulum::new();
        env.reset(Some(0), &mut [0.0; 3]);
        env.state = [s[0], s[1]];
        env
    });
}

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
