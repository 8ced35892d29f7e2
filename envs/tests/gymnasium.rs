//! `envs::gymnasium`: an env run in Gymnasium's own Python process is Gymnasium's, step for step. Actions with a `Box`
//! space (a MuJoCo env, Reacher-v4, and Pendulum-v1) and a `Discrete` one (Acrobot-v1) are sent through the pipes. They
//! give the observations, rewards and flags that Gymnasium gives for the same seed and actions in Python itself. Seeds
//! cross whole, a pipelined step is a plain one's twin, workers start in parallel. Only an id no one knows lists envs'
//! ids.

use envs::{Action, Env, Space};

mod common;
use common::same_as_gymnasium;

/// The set-up's Python (scripts/setup links `.venv`), for the replays in Gymnasium 0.29.
const PYTHON: &str = "../.venv/bin/python";

/// Reacher-v4, a MuJoCo env with a `Box` action space, is Gymnasium's step for step through the pipes. Over 120 steps
/// from seed 7, every observation, reward and flag is equal. Its episodes of 50 steps end in truncations, and each
/// reset's observation is equal too.
#[test]
fn a_mujoco_env_is_gymnasiums_step_for_step() {
    same_as_gymnasium(PYTHON, "Reacher-v4", 120); // episodes of 50 steps: two truncations
}

/// A `Box` action space, Pendulum-v1's, and a `Discrete` one, Acrobot-v1's, are Gymnasium's step for step through the
/// pipes. Every observation, reward and flag is equal over 210 and 600 steps, each reset's too. An episode ends in
/// each.
#[test]
fn box_and_discrete_actions_are_gymnasiums() {
    same_as_gymnasium(PYTHON, "Pendulum-v1", 210); // episodes of 200 steps
    same_as_gymnasium(PYTHON, "Acrobot-v1", 600);
}

/// LunarLander-v2 (Box2D: the package scripts/setup installs) through the pipes is Gymnasium's, step for step.
#[test]
fn box2d_is_gymnasiums() {
    same_as_gymnasium(PYTHON, "LunarLander-v2", 300);
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

/// Gymnasium in Python for an image env: `gym.make(id, **kwargs)` (ale_py imported: it registers ALE's ids), reset
/// with `seed`, then each action; per step a digest of the RGB frame (its byte sum and a position-weighted sum), the
/// reward, the flags and ALE's lives, as JSON.
const REPLAY_IMAGES: &str = r#"
import json, sys
import numpy as np
import gymnasium as gym
import ale_py
env_id, seed, actions = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
env = gym.make(env_id, **json.loads(sys.argv[4]))
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

/// An image env read as images is Gymnasium's frame for frame. It is `Gymnasium<u8>`, ppo_atari's `atari::Game` for an
/// id ALE's v4 games do not name. ALE/Breakout-v5 through the pipes is Gymnasium's made with frameskip=1 (the binaries'
/// MaxAndSkip does the skipping). Its frames are RGB 210x160x3 as they are. Its sticky actions, rewards, flags and
/// lives are Gymnasium's (`Env::lives`, for EpisodicLife), and FIRE is among its actions (for FireReset). A step whose
/// observation the caller drops is the same step: an empty buffer, as MaxAndSkip's skipped frames.
#[test]
fn an_image_env_is_gymnasiums_frame_for_frame() {
    let env = envs::atari::Game::new("ALE/Breakout-v5").expect("ale-py (scripts/setup installs it)");
    assert!(env.has_fire());
    assert_eq!(env.action_space(), Space::Discrete(4));
    // the game (5 lives, a brick hit) is over in 698 steps: every life's step compared
    let (last, rewards) = same_frames(env, r#"{"frameskip": 1}"#);
    assert!(last[2] == true && last[4] == 0 && rewards > 0.0, "{last}, rewards {rewards}");
}

/// `Game::new_with`'s keyword arguments go over ALE v5's frameskip=1: a key of the caller's alone is added (no
/// sticky actions: `repeat_action_probability=0`, frameskip 1 kept), a key in both is the caller's (`frameskip`
/// 4, v5's own skip), each frame for frame as Gymnasium makes the env with the arguments merged so.
#[test]
fn an_image_envs_kwargs_go_over_frameskip_1() {
    let game = |kwargs: &str| envs::atari::Game::new_with("ALE/Breakout-v5", kwargs).expect("ale-py");
    same_frames(game(r#"{"repeat_action_probability": 0.0}"#), r#"{"frameskip": 1, "repeat_action_probability": 0.0}"#);
    same_frames(game(r#"{"frameskip": 4}"#), r#"{"frameskip": 4}"#);
}

/// Steps `env` (ALE/Breakout-v5, read as images) and Gymnasium's `gym.make("ALE/Breakout-v5", **kwargs)` in Python
/// with seed 5 and the same actions, one frame an action held 4 steps, every third frame dropped (as MaxAndSkip
/// drops them): each kept frame, reward, flag and ALE's lives equal, until Gymnasium's episode ends or 1200 steps;
/// returns Gymnasium's last step and the rewards' sum.
fn same_frames(mut env: envs::atari::Game, kwargs: &str) -> (serde_json::Value, f64) {
    let Space::Box { shape, .. } = env.observation_space() else { panic!("{}", env.observation_space()) };
    assert_eq!(shape, [210, 160, 3]);
    let actions: Vec<i64> = (0..1200).map(|t| [1, 2, 2, 3, 0, 3][t / 4 % 6]).collect();
    let actions_json = serde_json::to_string(&actions).expect("json");
    let out = std::process::Command::new("../.venv/bin/python")
        .args(["-c", REPLAY_IMAGES, "ALE/Breakout-v5", "5", &actions_json, kwargs])
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
        assert_eq!(ours, want, "{kwargs}: step {t}");
        if t % 3 != 1 {
            assert_eq!(digest(&shape, &frame), row[0], "{kwargs}: step {t}");
        }
    }
    assert!(dropped > 30, "{kwargs}: {dropped} dropped frames");
    (theirs[theirs.as_array().expect("rows").len() - 1].clone(), rewards)
}

/// The tests' own Gymnasium envs (envs/tests/pyenvs: `misbehaving:<Name>-v0`, ...) on the workers' PYTHONPATH.
fn with_test_envs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| std::env::set_var("PYTHONPATH", concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pyenvs")));
}

/// The seed an Echo env's observation says (its four 16-bit parts; `None`: reset without one).
fn echoed_seed(obs: &[f32]) -> Option<u64> {
    (obs[0] >= 0.0).then(|| (0..4).map(|k| (obs[k] as u64) << (16 * k)).sum())
}

/// Seeds cross the pipe as u64s: seeds of 2^63 and more reach each env whole (they were cut to i64::MAX, so that
/// the envs of a VecEnv seeded so got one seed), and a reset without a seed is one.
#[test]
fn seeds_of_2_63_and_more_reach_each_env_whole() {
    with_test_envs();
    let made: Vec<_> = (0..3).map(|_| envs::make("misbehaving:Echo-v0").expect("made")).collect();
    let mut v = envs::VecEnv::new(made);
    for seed in [1u64 << 63, u64::MAX - 2, 7] {
        v.reset(Some(seed));
        let seeds: Vec<_> = v.obs.chunks(6).map(echoed_seed).collect();
        assert_eq!(seeds, [Some(seed), Some(seed + 1), Some(seed + 2)]);
    }
    v.reset(None);
    assert_eq!(v.obs.chunks(6).map(echoed_seed).collect::<Vec<_>>(), [None, None, None]);
}

/// A step sent first (`send_step`, as `VecEnv::step` sends every env's) and read by `step` is the plain step's
/// twin, and so is a step whose observation the caller drops: the same observations, rewards and ends.
#[test]
fn a_pipelined_step_is_a_plain_steps_twin() {
    with_test_envs();
    let mut plain = envs::make("misbehaving:Echo-v0").expect("made");
    let mut piped = envs::make("misbehaving:Echo-v0").expect("made");
    let (mut a, mut b) = (vec![0f32; 6], vec![0f32; 6]);
    plain.reset(Some(3), &mut a);
    piped.reset(Some(3), &mut b);
    for t in 0..20 {
        let action = [(t % 3) as i64];
        let one = plain.step(Action::Discrete(&action), &mut a);
        let two = if t % 4 == 2 {
            piped.step(Action::Discrete(&action), &mut []) // dropped: the next observation says it happened
        } else {
            piped.send_step(Action::Discrete(&action));
            piped.step(Action::Discrete(&action), &mut b)
        };
        assert_eq!(one, two, "step {t}");
        assert_eq!(one.reward, 10.0 * action[0] as f64 + a[4] as f64, "step {t}");
        if t % 4 != 2 {
            assert_eq!((a[4], a[5]), (b[4], b[5]), "step {t}");
        }
        if one.terminated {
            plain.reset(None, &mut a);
            piped.reset(None, &mut b);
        }
    }
    assert_eq!(a[5], 19.0 % 3.0);
}

/// Workers start in parallel: envs of an id after its first do not wait for their Python to import and make the
/// env (the first does: its failure is `make`'s error). 5 envs whose module takes 4 s to import are ready for
/// their reset in about 8 s, where one after another they took 20.
#[test]
fn workers_start_in_parallel() {
    with_test_envs();
    let start = std::time::Instant::now();
    let mut made: Vec<_> = (0..5).map(|_| envs::make("slowstart:SlowStart-v0").expect("made")).collect();
    let mut obs = vec![0f32; 4];
    for (i, env) in made.iter_mut().enumerate() {
        env.reset(Some(i as u64), &mut obs);
    }
    let took = start.elapsed().as_secs_f64();
    assert!(took < 16.0, "5 envs took {took:.1} s to start");
}

/// An id that neither envs nor Gymnasium knows is "unknown", with envs' own ids listed; any other failure of
/// gymnasium.make is Gymnasium's reason, first and alone.
#[test]
fn only_an_id_no_one_knows_lists_the_known_ids() {
    with_test_envs();
    let error = |id: &str| envs::make(id).err().expect("an error").to_string();
    let unknown = error("NoSuchEnv-v0");
    let starts = "unknown env id 'NoSuchEnv-v0' (as Gymnasium's: gymnasium.make('NoSuchEnv-v0') failed: NameNotFound";
    assert!(
        unknown.starts_with(starts) && unknown.contains("; known ids: ") && unknown.contains("CartPole-v1"),
        "{unknown}"
    );
    let failed = error("misbehaving:BadInit-v0");
    let reason = "gymnasium.make('misbehaving:BadInit-v0') failed: ValueError: no level named 'seven'";
    assert_eq!(failed, reason);
    let forced = error("gymnasium:NoSuchEnv-v0");
    assert!(forced.starts_with("unknown env id 'NoSuchEnv-v0' in Gymnasium: ") && !forced.contains("known ids"));
}

/// `gymnasium.make`'s keyword arguments reach the env (`kwargs:Sized-v0`: its observation's size and its reward
/// are its arguments), and so do those of `set_kwargs` through `make`, which refuses them for a native env.
#[test]
fn kwargs_reach_gymnasium_make() {
    with_test_envs();
    let mut env =
        envs::gymnasium::Gymnasium::<f32>::new_with("kwargs:Sized-v0", r#"{"size": 7, "reward": 2.5}"#).expect("made");
    assert_eq!(env.observation_space().flat_dim(), 7);
    let mut obs = vec![0f32; 7];
    env.reset(Some(1), &mut obs);
    assert_eq!(env.step(Action::Discrete(&[0]), &mut obs).reward, 2.5);
    let plain = envs::gymnasium::Gymnasium::<f32>::new("kwargs:Sized-v0").expect("made");
    assert_eq!(plain.observation_space().flat_dim(), 4, "the env's defaults");
    let merged = envs::gymnasium::merge_kwargs(r#"{"frameskip": 1, "a": 2}"#, r#"{"frameskip": 4}"#).expect("merged");
    assert_eq!(merged, r#"{"a":2,"frameskip":4}"#);
    assert!(envs::gymnasium::set_kwargs("[1]").is_err());
}

/// Discrete and MultiDiscrete observations are flattened as gymnasium's `FlattenObservation` flattens them: one-hot,
/// each part's in turn, in a box of [0, 1] (`observations:<Name>-v0`; FrozenLake-v1, Gymnasium's, Discrete(16));
/// MultiDiscrete actions reach the env as they were sent.
#[test]
fn discrete_observations_are_one_hot() {
    with_test_envs();
    let mut discrete = envs::make("observations:DiscreteObs-v0").expect("made");
    assert_eq!(discrete.observation_space(), Space::bounded_box(vec![0.0; 5], vec![1.0; 5]));
    let mut obs = vec![0f32; 5];
    discrete.reset(Some(1), &mut obs);
    assert_eq!(obs, [1.0, 0.0, 0.0, 0.0, 0.0]);
    discrete.step(Action::Discrete(&[0]), &mut obs);
    discrete.step(Action::Discrete(&[1]), &mut obs);
    assert_eq!(obs, [0.0, 0.0, 1.0, 0.0, 0.0], "state 2, one-hot");
    let mut multi = envs::make("observations:MultiDiscreteObs-v0").expect("made");
    assert_eq!((multi.observation_space().flat_dim(), multi.action_space()), (5, Space::MultiDiscrete(vec![3, 2])));
    let mut obs = vec![0f32; 5];
    multi.reset(Some(1), &mut obs);
    assert_eq!(obs, [1.0, 0.0, 0.0, 1.0, 0.0]);
    multi.step(Action::Discrete(&[2, 1]), &mut obs);
    assert_eq!(obs, [0.0, 0.0, 1.0, 0.0, 1.0], "[2, 1]: 3 values for the first, 2 for the second");
    let mut lake = envs::make("FrozenLake-v1").expect("Gymnasium's FrozenLake-v1");
    let mut obs = vec![0f32; lake.observation_space().flat_dim()];
    lake.reset(Some(1), &mut obs);
    assert_eq!((obs.len(), obs.iter().sum::<f32>(), obs[0]), (16, 1.0, 1.0), "the start, cell 0, one-hot");
}

/// Gymnasium in Python for the native classic-control envs: for each seed, `reset(seed=seed)`, then `steps` steps,
/// each episode's end followed by an unseeded reset (the seed's generator goes on). Action t is `actions[t]`; in
/// CartPole-v1 a -1 pushes the cart the way the pole turns (long episodes). Per seed, every observation, reward
/// and flag, as JSON.
const REPLAY_SEEDS: &str = r#"
import json, sys
import numpy as np
import gymnasium as gym
env_id, seeds, actions = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
env = gym.make(env_id)
out = []
for seed in seeds:
    obs, _ = env.reset(seed=seed)
    rows = [[np.asarray(obs, dtype=np.float32).tolist()]]
    for a in actions:
        space = env.action_space
        if space.shape:
            a = np.array(a, dtype=space.dtype).reshape(space.shape)
        else:
            a = (1 if obs[3] > 0 else 0) if a[0] < 0 else int(a[0])
        obs, r, term, trunc, _ = env.step(a)
        rows.append([np.asarray(obs, dtype=np.float32).tolist(), float(r), bool(term), bool(trunc)])
        if term or trunc:
            obs, _ = env.reset()
            rows[-1].append(np.asarray(obs, dtype=np.float32).tolist())
    out.append(rows)
print(json.dumps(out))
"#;

/// The native classic-control envs are Gymnasium's, bit for bit, live: seeded as Gymnasium seeds them (numpy's
/// PCG64 from a SeedSequence), stepped with the same float operations, on many seeds and long runs of episodes
/// that each reset from the seed's own stream. Every observation, reward and end is equal.
#[test]
fn the_native_classic_envs_are_gymnasiums_bit_for_bit() {
    let seeds: Vec<u64> = (0..24).chain([1 << 32, u64::MAX - (1 << 32)]).collect();
    for (id, steps) in [
        ("CartPole-v1", 3000),
        ("Acrobot-v1", 1200),
        ("MountainCar-v0", 800),
        ("Pendulum-v1", 800),
        ("MountainCarContinuous-v0", 2500),
    ] {
        let mut native = envs::make(id).expect("a native env");
        let space = native.action_space();
        // a fixed pseudo-random sequence (an LCG): every action, or in CartPole 1 in 4 (the rest follow the pole)
        let mut lcg = 12345u64;
        let mut draw = || {
            lcg = lcg.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (lcg >> 33) as f64 / (1u64 << 31) as f64
        };
        let actions: Vec<Vec<f64>> = (0..steps)
            .map(|_| match &space {
                Space::Discrete(_) if id == "CartPole-v1" && draw() < 0.75 => vec![-1.0],
                Space::Discrete(n) => vec![((draw() * *n as f64) as usize).min(n - 1) as f64],
                Space::Box { low, high, .. } => {
                    low.iter().zip(high).map(|(l, h)| (l + (h - l) * draw() as f32) as f64).collect()
                }
                other => panic!("{other}"),
            })
            .collect();
        let (seeds_json, actions_json) = (serde_json::json!(seeds).to_string(), serde_json::json!(actions).to_string());
        let out = std::process::Command::new(PYTHON)
            .args(["-c", REPLAY_SEEDS, id, &seeds_json, &actions_json])
            .env("PYGAME_HIDE_SUPPORT_PROMPT", "1")
            .output()
            .unwrap_or_else(|e| panic!("{PYTHON}: {e} (scripts/setup makes it)"));
        assert!(out.status.success(), "{id}: {}", String::from_utf8_lossy(&out.stderr));
        let theirs: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let bits = |v: &serde_json::Value| -> Vec<u32> {
            v.as_array().expect("a list").iter().map(|x| (x.as_f64().expect("a number") as f32).to_bits()).collect()
        };
        let mut obs = vec![0f32; native.observation_space().flat_dim()];
        let mut ends = 0;
        for (seed, rows) in seeds.iter().zip(theirs.as_array().expect("a list per seed")) {
            native.reset(Some(*seed), &mut obs);
            let ours = |obs: &[f32]| obs.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
            assert_eq!(ours(&obs), bits(&rows[0][0]), "{id}, seed {seed}: reset");
            for (t, a) in actions.iter().enumerate() {
                let step = match &space {
                    Space::Discrete(_) if a[0] < 0.0 => {
                        native.step(Action::Discrete(&[(obs[3] > 0.0) as i64]), &mut obs)
                    }
                    Space::Discrete(_) => native.step(Action::Discrete(&[a[0] as i64]), &mut obs),
                    _ => native.step(Action::Continuous(&a.iter().map(|x| *x as f32).collect::<Vec<_>>()), &mut obs),
                };
                let row = &rows[t + 1];
                let at = format!("{id}, seed {seed}, step {t}");
                assert_eq!(ours(&obs), bits(&row[0]), "{at}");
                let theirs = (row[1].as_f64().expect("a reward").to_bits(), row[2] == true, row[3] == true);
                assert_eq!((step.reward.to_bits(), step.terminated, step.truncated), theirs, "{at}");
                if step.terminated || step.truncated {
                    ends += 1;
                    native.reset(None, &mut obs);
                    assert_eq!(ours(&obs), bits(&row[4]), "{at}: the reset after it");
                }
            }
        }
        assert!(ends >= seeds.len(), "{id}: {ends} episodes ended");
    }
}

/// An action that does not fit the action space is not sent: the process ends with one line that names the env,
/// what its space takes and what it was sent, exit code 2. Pendulum-v1 sent 2 values, then a discrete action.
#[test]
fn a_wrong_action_is_one_line_naming_both_sizes() {
    if let Some(which) = std::env::var_os("ENVS_CHILD") {
        let mut env = envs::gymnasium::Gymnasium::<f32>::new("Pendulum-v1").expect("made");
        let mut obs = vec![0f32; 3];
        env.reset(Some(1), &mut obs);
        env.step(Action::Continuous(&[0.5]), &mut obs);
        match which.to_str() {
            Some("1") => env.step(Action::Continuous(&[0.5, 0.5]), &mut obs),
            _ => env.step(Action::Discrete(&[1]), &mut obs),
        };
        return;
    }
    let name = "a_wrong_action_is_one_line_naming_both_sizes";
    for (which, sent) in [("1", "2 continuous values"), ("2", "1 discrete value")] {
        let exe = std::env::current_exe().expect("the test binary");
        let out = std::process::Command::new(exe)
            .args(["--exact", name, "--nocapture", "--test-threads", "1"])
            .env("ENVS_CHILD", which)
            .output()
            .expect("the test binary runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let line = format!(
            "error: wrong action: Pendulum-v1 takes 1 continuous value (Box(1,) in [-2.0, 2.0]); it was sent {sent}"
        );
        assert_eq!(stderr.trim_end(), line);
    }
}

/// Gymnasium's `start`: a MultiDiscrete action space with `start=[-1, 5]` (`observations:ShiftedActions-v0`,
/// which raises on an action outside its space and observes the action it got) gets each action shifted by it.
#[test]
fn a_multidiscrete_start_shifts_the_actions() {
    with_test_envs();
    let mut env = envs::make("observations:ShiftedActions-v0").expect("made");
    assert_eq!(env.action_space(), Space::MultiDiscrete(vec![3, 2]));
    let mut obs = vec![0f32; 2];
    env.reset(Some(1), &mut obs);
    for action in [[0i64, 1], [2, 0], [1, 1]] {
        env.step(Action::Discrete(&action), &mut obs);
        assert_eq!(obs, [action[0] as f32 - 1.0, action[1] as f32 + 5.0]);
    }
}

/// A reset while a step is sent and not read (`send_step`, then `reset`) reads that step first: the reset's
/// observation is the reset's (Echo's seed), and the next step counts from it.
#[test]
fn a_reset_after_a_sent_step_reads_the_step_first() {
    with_test_envs();
    let mut env = envs::make("misbehaving:Echo-v0").expect("made");
    let mut obs = vec![0f32; 6];
    env.reset(Some(3), &mut obs);
    env.send_step(Action::Discrete(&[2]));
    env.reset(Some(4), &mut obs);
    assert_eq!((echoed_seed(&obs), obs[4]), (Some(4), 0.0));
    let step = env.step(Action::Discrete(&[1]), &mut obs);
    assert_eq!((obs[4], obs[5], step.reward), (1.0, 1.0, 11.0));
}

/// The video's first frame, asked before the first reset, makes the env again with `render_mode="rgb_array"`: the
/// env first made is closed (`misbehaving:Closes-v0` logs each close with its render mode).
#[test]
fn an_env_made_again_for_the_video_closes_the_first() {
    with_test_envs();
    let log = std::env::temp_dir().join(format!("envs-closed-{}", std::process::id()));
    let _ = std::fs::remove_file(&log);
    std::env::set_var("CLOSED_LOG", &log);
    let env = envs::gymnasium::Gymnasium::<f32>::new("misbehaving:Closes-v0").expect("made");
    let mut rgb = Vec::new();
    assert_eq!(env.render(&mut rgb), Some((0, 0)));
    let closed = std::fs::read_to_string(&log);
    let _ = std::fs::remove_file(&log);
    assert_eq!(closed.expect("a close logged"), "None\n");
}

/// The worker takes only the commands it knows, each at its size: a step of 12 bytes where Pendulum-v1's action
/// takes 4, or an unknown tag, is answered `x` with what it got, and the worker ends. Run in Python: the worker
/// script with pipes of its own, sent frames the binary never sends.
#[test]
fn the_worker_refuses_a_command_it_does_not_know() {
    let script = r#"
import os, struct, subprocess, sys
worker = sys.argv[1]
def answer_to(frame):
    commands, answers, lifeline = os.pipe(), os.pipe(), os.pipe()
    fds = [commands[0], answers[1], lifeline[0]]
    args = [sys.executable, worker, "Pendulum-v1", "flat", "test", "{}"] + [str(fd) for fd in fds]
    p = subprocess.Popen(args + [str(os.getpid())], pass_fds=fds)
    for fd in fds:
        os.close(fd)
    out = os.fdopen(answers[0], "rb")
    def read():
        tag, size = struct.unpack("<cQ", out.read(9))
        return tag, out.read(size)
    assert read()[0] == b"d"
    os.write(commands[1], frame)
    tag, payload = read()
    assert p.wait(timeout=30) == 0 and out.read() == b""
    return tag.decode() + " " + payload.decode()
print(answer_to(b"s" + struct.pack("<Q", 12) + bytes(12)))
print(answer_to(b"k" + struct.pack("<Q", 0)))
"#;
    let worker = concat!(env!("CARGO_MANIFEST_DIR"), "/src/gymnasium_worker.py");
    let out = std::process::Command::new(PYTHON).args(["-c", script, worker]).output().expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let refused = ["x a command 's' of 12 bytes (4 bytes)", "x a command 'k' of 0 bytes (no such command)"];
    assert_eq!(stdout.lines().collect::<Vec<_>>(), refused);
}
