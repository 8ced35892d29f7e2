//! `envs::gymnasium`: an env run in Gymnasium's own Python process is Gymnasium's, step for step: actions with a
//! `Box` space (a MuJoCo env, Reacher-v4, and Pendulum-v1) and a `Discrete` one (Acrobot-v1) sent through the pipes
//! give the observations, rewards and flags that Gymnasium gives for the same seed and actions in Python itself.

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

fn python_replay(id: &str, seed: u64, actions: &[Vec<f64>]) -> serde_json::Value {
    let actions = serde_json::to_string(actions).expect("json");
    let out = std::process::Command::new("../.venv/bin/python")
        .args(["-c", REPLAY, id, &seed.to_string(), &actions])
        .env("PYGAME_HIDE_SUPPORT_PROMPT", "1") // pygame's greeting on stdout, before the JSON
        .output()
        .expect("the set-up's Python (scripts/setup links .venv)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array().expect("a list").iter().map(|x| x.as_f64().expect("a number") as f32).collect()
}

/// Steps `gymnasium:<id>` through envs (an autoreset after an end, as `VecEnv` does) and Gymnasium in Python with
/// the same seed and actions; every observation (after each reset too), reward and flag equal.
fn same_as_gymnasium(id: &str, steps: usize) {
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
    let theirs = python_replay(id, 7, &actions);
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

#[test]
fn a_mujoco_env_is_gymnasiums_step_for_step() {
    same_as_gymnasium("Reacher-v4", 120); // episodes of 50 steps: two truncations
}

#[test]
fn box_and_discrete_actions_are_gymnasiums() {
    same_as_gymnasium("Pendulum-v1", 210); // episodes of 200 steps
    same_as_gymnasium("Acrobot-v1", 600);
}

/// LunarLander-v2 (Box2D: the package scripts/setup installs) through the pipes is Gymnasium's, step for step.
#[test]
fn box2d_is_gymnasiums() {
    same_as_gymnasium("LunarLander-v2", 300);
}

/// A MiniGrid id (the `minigrid` package registers it) reads MiniGrid's own `ImgObsWrapper` view: the 7x7x3 grid
/// of object, colour and state indices, flattened to 147 values in [0, 255], and its 7 actions; a seeded reset
/// gives the same grid twice.
#[test]
fn minigrid_reads_its_image_view() {
    let mut env = envs::make("MiniGrid-DoorKey-5x5-v0").expect("minigrid (scripts/setup installs it)");
    let Space::Box { shape, low, high } = env.observation_space() else { panic!("{}", env.observation_space()) };
    assert_eq!((shape, low[0], high[146]), (vec![147], 0.0, 255.0));
    assert_eq!(env.action_space(), Space::Discrete(7));
    let (mut first, mut again) = (vec![0f32; 147], vec![0f32; 147]);
    env.reset(Some(3), &mut first);
    env.step(Action::Discrete(&[2]), &mut again);
    env.reset(Some(3), &mut again);
    assert_eq!(first, again);
    assert!(first.iter().all(|&x| x.fract() == 0.0 && (0.0..=10.0).contains(&x)), "{first:?}");
}

/// Gymnasium in Python for an image env: `gym.make(id)` (ale_py imported: it registers ALE's ids), reset with
/// `seed`, then each action; per step a digest of the RGB frame (its byte sum and a position-weighted sum), the
/// reward, the flags and ALE's lives, as JSON.
const REPLAY_IMAGES: &str = r#"
import json, sys
import numpy as np
import gymnasium as gym
import ale_py
env_id, seed, actions = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
env = gym.make(env_id)
weights = None
def digest(obs):
    global weights
    flat = np.asarray(obs, dtype=np.uint8).ravel().astype(np.int64)
    if weights is None:
        weights = np.arange(flat.size, dtype=np.int64) % 1009 + 1
    return [list(np.asarray(obs).shape), int(flat.sum()), int((flat * weights).sum())]
obs, info = env.reset(seed=seed)
out = [[digest(obs), info["lives"]]]
for a in actions:
    obs, r, term, trunc, info = env.step(a)
    out.append([digest(obs), float(r), bool(term), bool(trunc), info["lives"]])
    if term or trunc:
        break
print(json.dumps(out))
"#;

/// A frame's digest as the replay computes it.
fn digest(shape: &[usize], frame: &[u8]) -> serde_json::Value {
    let weighted: i64 = frame.iter().enumerate().map(|(i, &b)| b as i64 * ((i % 1009) as i64 + 1)).sum();
    serde_json::json!([shape, frame.iter().map(|&b| b as i64).sum::<i64>(), weighted])
}

/// An image env read as images (`Gymnasium<u8>`, ppo_atari's `atari::Game` for an id ALE's v4 games do not name):
/// ALE/Breakout-v5 through the pipes is Gymnasium's, frame for frame (RGB 210x160x3 as it is), with its rewards,
/// flags and lives (`Env::lives`, for EpisodicLife) and FIRE among its actions (for FireReset); a step whose
/// observation the caller drops (an empty buffer, as MaxAndSkip's skipped frames) is the same step.
#[test]
fn an_image_env_is_gymnasiums_frame_for_frame() {
    let mut env = envs::atari::Game::new("ALE/Breakout-v5").expect("ale-py (scripts/setup installs it)");
    assert!(env.has_fire());
    let Space::Box { shape, .. } = env.observation_space() else { panic!("{}", env.observation_space()) };
    assert_eq!(shape, [210, 160, 3]);
    assert_eq!(env.action_space(), Space::Discrete(4));
    let actions: Vec<i64> = (0..400).map(|t| [1, 2, 2, 3, 0, 3][t % 6]).collect();
    let out = std::process::Command::new("../.venv/bin/python")
        .args(["-c", REPLAY_IMAGES, "ALE/Breakout-v5", "5", &serde_json::to_string(&actions).expect("json")])
        .output()
        .expect("the set-up's Python (scripts/setup links .venv)");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // the last line: ALE and pygame may greet on stdout before it
    let stdout = String::from_utf8_lossy(&out.stdout);
    let theirs: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("JSON");
    let mut frame = vec![0u8; 210 * 160 * 3];
    env.reset(Some(5), &mut frame);
    assert_eq!(serde_json::json!([digest(&shape, &frame), env.lives()]), theirs[0]);
    let (mut rewards, mut dropped) = (0.0, 0);
    for (t, &a) in actions.iter().enumerate() {
        let Some(row) = theirs.get(t + 1) else { break };
        // every third step's frame dropped: the next compared frame is still Gymnasium's
        let step = if t % 3 == 1 {
            dropped += 1;
            env.step(Action::Discrete(&[a]), &mut [])
        } else {
            env.step(Action::Discrete(&[a]), &mut frame)
        };
        rewards += step.reward;
        let ours = (step.reward, step.terminated, step.truncated, env.lives());
        let want =
            (row[1].as_f64().expect("r"), row[2] == true, row[3] == true, row[4].as_u64().expect("lives") as u32);
        assert_eq!(ours, want, "step {t}");
        if t % 3 != 1 {
            assert_eq!(digest(&shape, &frame), row[0], "step {t}");
        }
    }
    // the game ends (its 5 lives lost, after a brick hit) within the actions: every life's step compared
    let last = &theirs[theirs.as_array().expect("rows").len() - 1];
    assert!(last[2] == true && last[4] == 0, "{last}");
    assert!(dropped > 50 && rewards > 0.0, "{dropped} dropped frames, rewards {rewards}");
}
