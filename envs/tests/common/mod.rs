//! What the tests of envs::gymnasium share: an env stepped through the pipes and the same env in Python, compared.
#![allow(dead_code)] // each test file uses a part

use envs::{Action, Env, Space};

/// Gymnasium in Python: `gym.make(id)`, reset with `seed`, then each action, the results as JSON lines.
const REPLAY: &str = r#"
import json, sys
import numpy as np
import gymnasium as gym
env_id, seed, actions = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
env = gym.make(env_id)
obs, _ = env.reset(seed=seed)
out = [np.asarray(obs, dtype=np.float32).tolist()]
for a in actions:
    space = env.action_space
    a = np.array(a, dtype=space.dtype).reshape(space.shape) if space.shape else int(a[0])
    obs, r, term, trunc, _ = env.step(a)
    out.append([np.asarray(obs, dtype=np.float32).tolist(), float(r), bool(term), bool(trunc)])
    if term or trunc:
        obs, _ = env.reset()
        out[-1].append(np.asarray(obs, dtype=np.float32).tolist())
print(json.dumps(out))
"#;

fn python_replay(python: &str, id: &str, seed: u64, actions: &[Vec<f64>]) -> serde_json::Value {
    let actions = serde_json::to_string(actions).expect("json");
    let out = std::process::Command::new(python)
        .args(["-c", REPLAY, id, &seed.to_string(), &actions])
        .env("PYGAME_HIDE_SUPPORT_PROMPT", "1") // pygame's greeting on stdout, before the JSON
        .output()
        .unwrap_or_else(|e| panic!("{python}: {e} (scripts/setup makes it)"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array().expect("a list").iter().map(|x| x.as_f64().expect("a number") as f32).collect()
}

/// Steps `gymnasium:<id>` through envs (an autoreset after an end, as `VecEnv` does; the worker in the Python that
/// `PPO_DETAILS_PYTHON` names, else the set-up's) and Gymnasium in `python` with the same seed and actions; every
/// observation (after each reset too), reward and flag equal.
pub fn same_as_gymnasium(python: &str, id: &str, steps: usize) {
    let mut env = envs::make(&format!("gymnasium:{id}")).expect("Gymnasium makes it");
    let space = env.action_space();
    let actions: Vec<Vec<f64>> = (0..steps)
        .map(|t| match &space {
            Space::Discrete(n) => vec![((t * 7 + t / 3) % n) as f64],
            Space::Box { low, high, .. } => low
                .iter()
                .zip(high)
                .enumerate()
                .map(|(i, (l, h))| (l + (h - l) * ((t * 5 + i * 3) % 11) as f32 / 10.0) as f64)
                .collect(),
            other => panic!("{other}"),
        })
        .collect();
    let theirs = python_replay(python, id, 7, &actions);
    let mut obs = vec![0f32; env.observation_space().flat_dim()];
    env.reset(Some(7), &mut obs);
    assert_eq!(obs, floats(&theirs[0]), "{id}: reset");
    let mut ends = 0;
    for (t, a) in actions.iter().enumerate() {
        let step = match &space {
            Space::Discrete(_) => env.step(Action::Discrete(&[a[0] as i64]), &mut obs),
            _ => env.step(Action::Continuous(&a.iter().map(|x| *x as f32).collect::<Vec<_>>()), &mut obs),
        };
        let row = &theirs[t + 1];
        assert_eq!(obs, floats(&row[0]), "{id}: step {t}");
        assert_eq!(
            (step.reward, step.terminated, step.truncated),
            (row[1].as_f64().expect("r"), row[2] == true, row[3] == true),
            "{id}: step {t}"
        );
        if step.terminated || step.truncated {
            ends += 1;
            env.reset(None, &mut obs);
            assert_eq!(obs, floats(&row[4]), "{id}: the reset after step {t}");
        }
    }
    assert!(ends > 0 || steps < 50, "{id}: no episode ended in {steps} steps");
}
