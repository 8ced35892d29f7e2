//! The MuJoCo envs against gymnasium 0.29.1 on mujoco 3.17.0: from gymnasium's reset state, the same float32
//! actions give observations and rewards within 1e-6 relative of gymnasium's, and the same flags, at every step.
//! Golden data: `scripts/gen_golden_mujoco.py`.

use envs::mujoco::MujocoEnv;
use envs::{Action, Env, Space, TimeLimit};
use flate2::read::GzDecoder;
use serde_json::Value;

fn golden() -> Value {
    let gz = include_bytes!("golden/mujoco.json.gz");
    serde_json::from_reader(GzDecoder::new(&gz[..])).expect("golden file is gzipped JSON")
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

fn f32s(v: &Value) -> Vec<f32> {
    floats(v).iter().map(|&x| x as f32).collect()
}

/// Equal, or within 1e-6 relative (the bound); returns whether it was exact.
fn close(got: f64, want: f64, what: &str) -> bool {
    assert!((got - want).abs() <= 1e-6 * want.abs().max(1e-6), "{what}: got {got}, want {want}");
    got == want
}

/// Every MuJoCo id has golden cases: from gymnasium's recorded state, each step's observation and reward are within
/// 1e-6 relative of gymnasium's, its flags equal; the sizes and action bounds are gymnasium's.
#[test]
fn mujoco_envs_match_gymnasium_v4() {
    let golden = golden();
    let (mut steps, mut inexact) = (0, 0);
    let mut seen = std::collections::BTreeSet::new();
    for (c, case) in golden["cases"].as_array().unwrap().iter().enumerate() {
        let id = case["env"].as_str().unwrap();
        seen.insert(id.to_string());
        let max_steps = envs::KNOWN_ENVS.iter().find(|(known, _)| *known == id).expect("a known id").1;
        let mut env = TimeLimit::new(MujocoEnv::new(id).unwrap_or_else(|e| panic!("{e}")), max_steps);
        let space = &golden["spaces"][id];
        let dim = space["obs_dim"].as_u64().unwrap() as usize;
        assert_eq!(env.observation_space().flat_dim(), dim, "{id}: observation size");
        let Space::Box { low, high, .. } = env.action_space() else { panic!("{id}: Box action space expected") };
        assert_eq!((low, high), (f32s(&space["action_low"]), f32s(&space["action_high"])), "{id}: action bounds");

        let mut obs = vec![0f32; dim];
        env.reset(Some(0), &mut obs);
        let state: Vec<f64> = floats(&case["qpos"]).into_iter().chain(floats(&case["qvel"])).collect();
        // TimeLimit has no set_state: reach the inner env through a fresh one with the same state
        let mut inner = MujocoEnv::new(id).unwrap();
        inner.reset(Some(0), &mut obs);
        inner.set_state(&state, &mut obs);
        assert_eq!(obs, f32s(&case["reset_obs"]), "{id} case {c}: observation after set_state");
        let mut env = TimeLimit::new(inner, max_steps);
        for (t, a) in case["actions"].as_array().unwrap().iter().enumerate() {
            let step = env.step(Action::Continuous(&f32s(a)), &mut obs);
            // HumanoidStandup's observations are recorded at some steps only (null at the others)
            let want = if case["obs"][t].is_null() { vec![] } else { f32s(&case["obs"][t]) };
            for (i, (&g, &w)) in obs.iter().zip(&want).enumerate() {
                inexact += !close(g as f64, w as f64, &format!("{id} case {c} step {t}: obs[{i}]")) as usize;
            }
            let reward = case["rewards"][t].as_f64().expect("a reward");
            inexact += !close(step.reward, reward, &format!("{id} case {c} step {t}: reward")) as usize;
            assert_eq!(step.terminated, case["terminated"][t].as_bool().unwrap(), "{id} case {c} step {t}: terminated");
            assert_eq!(step.truncated, case["truncated"][t].as_bool().unwrap(), "{id} case {c} step {t}: truncated");
            steps += 1;
        }
    }
    assert_eq!(seen.len(), envs::mujoco::IDS.len(), "golden data covers every MuJoCo env");
    assert!(steps > 2000, "too few golden steps ({steps})");
    eprintln!("{steps} steps compared, {inexact} values not bit-identical (all within 1e-6 relative)");
}

/// Every MuJoCo id: a seed gives its start again, another seed another. Six envs' start velocities lie within their
/// reset noise's scale; Reacher's target and Pusher's object start where gymnasium places them.
#[test]
fn reset_noise_has_gymnasium_scale_and_follows_the_seed() {
    for id in envs::mujoco::IDS {
        let mut env = MujocoEnv::new(id).unwrap();
        let dim = env.observation_space().flat_dim();
        let (mut a, mut b, mut c) = (vec![0f32; dim], vec![0f32; dim], vec![0f32; dim]);
        env.reset(Some(7), &mut a);
        env.reset(Some(8), &mut b);
        env.reset(Some(7), &mut c);
        assert_eq!(a, c, "{id}: same seed, same start");
        assert_ne!(a, b, "{id}: another seed, another start");
    }
    // velocities start at 0 plus noise: uniform in ±scale, except the normal noise of HalfCheetah
    // and Ant (allow 6 standard deviations); the observation holds the positions (without x, or
    // x and y), then the velocities
    for (id, scale, positions) in [
        ("HalfCheetah-v4", 0.6, 8),
        ("Hopper-v4", 5e-3, 5),
        ("Walker2d-v4", 5e-3, 8),
        ("InvertedPendulum-v4", 0.01, 2),
        ("Ant-v4", 0.6, 13),
        ("Swimmer-v4", 0.1, 3),
    ] {
        let mut env = MujocoEnv::new(id).unwrap();
        let mut obs = vec![0f32; env.observation_space().flat_dim()];
        for seed in 0..20 {
            env.reset(Some(seed), &mut obs);
            for (i, &v) in obs.iter().enumerate().skip(positions) {
                assert!((v as f64).abs() <= scale, "{id} seed {seed}: velocity {i} = {v} outside ±{scale}");
            }
        }
    }
    // Reacher's target (qpos[2..4], observation 4..6) lies inside the disc of radius 0.2; Pusher's
    // object (observation 17..20) starts more than 0.17 from the goal (20..23) in x and y
    let mut obs = vec![0f32; 23];
    let (mut reacher, mut pusher) = (MujocoEnv::new("Reacher-v4").unwrap(), MujocoEnv::new("Pusher-v4").unwrap());
    for seed in 0..50 {
        reacher.reset(Some(seed), &mut obs[..11]);
        assert!(obs[4].hypot(obs[5]) < 0.2, "Reacher seed {seed}: target {:?}", &obs[4..6]);
        pusher.reset(Some(seed), &mut obs);
        let (dx, dy) = (obs[17] - obs[20], obs[18] - obs[21]);
        // pusher.xml's object joints are y then x: the first sampled value (in [-0.3, 0)) is y
        assert!(
            dx.hypot(dy) > 0.17 && (-0.3..0.0).contains(&dy) && dx.abs() < 0.2,
            "Pusher seed {seed}: object at {dx}, {dy} from the goal"
        );
    }
}
