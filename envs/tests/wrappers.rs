//! CleanRL's continuous-control wrapper stack against gymnasium 0.29.1's, on replayed raw data: the same
//! normalized, clipped observations and rewards, the same clipped actions inward. `scripts/gen_golden_wrappers.py`.

use envs::{
    Action, ClipAction, Env, NormalizeObservation, NormalizeReward, Space, Step, TransformObservation, TransformReward,
};
use serde_json::Value;
use std::collections::VecDeque;

fn f32s(v: &Value) -> Vec<f32> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number") as f32).collect()
}

/// Plays back the recorded raw side and checks each action it receives.
struct Replay {
    records: VecDeque<Value>,
    obs_dim: usize,
    bound: f32,
}

impl Env for Replay {
    type Obs = f32;
    fn observation_space(&self) -> Space {
        Space::bounded_box(vec![f32::MIN; self.obs_dim], vec![f32::MAX; self.obs_dim])
    }
    fn action_space(&self) -> Space {
        Space::bounded_box(vec![-self.bound], vec![self.bound])
    }
    fn reset(&mut self, _seed: Option<u64>, obs: &mut [f32]) {
        let r = self.records.pop_front().expect("a reset record");
        obs.copy_from_slice(&f32s(&r["reset_obs"]));
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let r = self.records.pop_front().expect("a step record");
        let Action::Continuous(a) = action else { panic!("continuous action expected") };
        assert_eq!(a, f32s(&r["action"]).as_slice(), "the action after ClipAction");
        obs.copy_from_slice(&f32s(&r["obs"]));
        let flag = |k: &str| r[k].as_bool().unwrap();
        Step {
            reward: r["reward"].as_f64().unwrap(),
            terminated: flag("terminated"),
            truncated: flag("truncated"),
            episode: None,
        }
    }
}

/// CleanRL's stack on replayed raw data gives gymnasium 0.29.1's observations and rewards exactly, in two recorded
/// cases. The stack is `ClipAction`, `NormalizeObservation`, a clip to 10, `NormalizeReward` and a clip to 10. Each
/// clipped action reaches the env as recorded. Every observation, reset ones included, updates the statistics.
#[test]
fn cleanrl_continuous_wrappers_match_gymnasium() {
    let golden: Value = serde_json::from_str(include_str!("golden/wrappers.json")).unwrap();
    let gamma = golden["gamma"].as_f64().unwrap();
    for (case, (obs_dim, bound, steps)) in
        golden["cases"].as_array().unwrap().iter().zip([(3, 2.0, 400), (2, 1.0, 150)])
    {
        replay(case, gamma, obs_dim, bound, steps);
    }
}

fn replay(case: &Value, gamma: f64, obs_dim: usize, bound: f32, want_steps: usize) {
    let id = case["env"].as_str().unwrap();
    let raw: VecDeque<Value> = case["raw"].as_array().unwrap().iter().cloned().collect();
    let resets = raw.iter().filter(|r| r.get("reset_obs").is_some()).count() as f64;
    let env = ClipAction::new(Replay { records: raw, obs_dim, bound });
    let env = NormalizeObservation::new(env);
    let stats = env.stats();
    let env = TransformObservation::new(env, |obs: &mut [f32]| obs.iter_mut().for_each(|o| *o = o.clamp(-10.0, 10.0)));
    let env = NormalizeReward::new(env, gamma);
    let mut env = TransformReward::new(env, |r: f64| r.clamp(-10.0, 10.0));

    let mut obs = vec![0f32; obs_dim];
    let mut steps = 0;
    for (t, w) in case["wrapped"].as_array().unwrap().iter().enumerate() {
        if let Some(want) = w.get("reset_obs") {
            env.reset(None, &mut obs);
            assert_eq!(obs, f32s(want), "{id} record {t}: reset observation");
            continue;
        }
        let step = env.step(Action::Continuous(&f32s(&w["action"])), &mut obs);
        assert_eq!(obs, f32s(&w["obs"]), "{id} record {t}: observation");
        assert_eq!(step.reward, w["reward"].as_f64().unwrap(), "{id} record {t}: reward");
        steps += 1;
    }
    assert_eq!(steps, want_steps, "{id}: steps replayed");
    let count = stats.lock().count;
    assert!(
        (count - (steps as f64 + resets + 1e-4)).abs() < 1e-9,
        "{id}: every observation, reset ones included, updates the statistics"
    );
}

/// A `NormalizeObservation` frozen with given statistics leaves them unchanged over resets. It normalizes with them: (x
/// - mean) / sqrt(var + 1e-8).
#[test]
fn frozen_normalization_does_not_update() {
    let mut rms = envs::RunningMeanStd::new(3);
    rms.update([1.0, 2.0, 3.0]);
    let before = rms.clone();
    let records = (0..3).map(|_| serde_json::json!({"reset_obs": [0.5, -0.5, 4.0]})).collect();
    let mut env = NormalizeObservation::new(Replay { records, obs_dim: 3, bound: 1.0 }).frozen_with(Some(rms));
    let mut obs = [0f32; 3];
    env.reset(None, &mut obs);
    env.reset(None, &mut obs);
    assert_eq!(*env.stats().lock(), before);
    let want: Vec<f32> = [0.5, -0.5, 4.0]
        .iter()
        .enumerate()
        .map(|(i, &x): (usize, &f64)| ((x - before.mean[i]) / (before.var[i] + 1e-8).sqrt()) as f32)
        .collect();
    assert_eq!(obs.to_vec(), want);
}
