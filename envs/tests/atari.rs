//! Atari through native ALE and our wrappers against gymnasium 0.29.1 + ale-py 0.9.0: every v4 game live, frame for
//! frame, and CleanRL's wrappers through golden data (`scripts/gen_golden_atari.py`). Needs scripts/setup.

use envs::atari::{
    AtariEnv, ClipReward, EpisodicLife, FireReset, FrameStack, GrayScale, MaxAndSkip, NoopReset, ResizeObservation,
};
use envs::{Action, Env, RecordEpisodeStatistics};
use serde_json::Value;
use std::io::Read;

const FRAME: usize = 84 * 84;

/// CleanRL ppo_atari's stack, innermost first, with the no-op counts replayed, around native ALE's game.
fn cleanrl_stack(env_id: &str, noops: Vec<u32>) -> Box<dyn Env<Obs = u8>> {
    let env = AtariEnv::new(env_id).unwrap_or_else(|e| panic!("{e}"));
    let has_fire = env.has_fire();
    stack(env, has_fire, noops)
}

/// CleanRL ppo_atari's stack around `env`, as the Atari binaries' `make_env` wraps a game.
fn stack<E: Env<Obs = u8> + 'static>(env: E, has_fire: bool, noops: Vec<u32>) -> Box<dyn Env<Obs = u8>> {
    let env = RecordEpisodeStatistics::new(env);
    let env = NoopReset::new(env, 30).replaying(noops);
    let env = MaxAndSkip::new(env, 4);
    let env = EpisodicLife::new(env);
    let env = FireReset::new(env, has_fire);
    let env = ClipReward::new(env);
    let env = ResizeObservation::new(env, 84, 84);
    let env = GrayScale::new(env);
    Box::new(FrameStack::new(env, 4))
}

fn golden(game: &str) -> (Value, Vec<u8>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let json = std::fs::read_to_string(dir.join(format!("atari_{game}.json"))).expect("golden json");
    let mut frames = Vec::new();
    let gz = std::fs::File::open(dir.join(format!("atari_{game}.frames.gz"))).expect("golden frames");
    flate2::read::GzDecoder::new(gz).read_to_end(&mut frames).expect("gzip");
    (serde_json::from_str(&json).expect("valid json"), frames)
}

/// Largest pixel difference between our stack and the expected one, and how many pixels differ.
fn compare(ours: &[u8], want: &[&[u8]; 4]) -> (u8, usize) {
    let want = want.concat();
    let diffs = ours.iter().zip(&want).map(|(a, b)| a.abs_diff(*b));
    diffs.fold((0, 0), |(max, n), d| (max.max(d), n + (d > 0) as usize))
}

/// The golden no-op counts of a game.
fn noops(g: &Value) -> Vec<u32> {
    g["noops_used"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn replay(game: &str) {
    let (g, _) = golden(game);
    replay_on(game, cleanrl_stack(g["env_id"].as_str().unwrap(), noops(&g)));
}

/// Steps `env` (the stack around the game) with the golden actions: every observation, reward, flag, life and
/// episode as CleanRL's stack in Python gave them.
fn replay_on(game: &str, mut env: Box<dyn Env<Obs = u8>>) {
    let (g, frames) = golden(game);
    let frame = |i: usize| &frames[i * FRAME..(i + 1) * FRAME];
    let mut obs = vec![0u8; 4 * FRAME];
    env.reset(Some(g["seed"].as_u64().unwrap()), &mut obs);
    let mut want = [frame(0); 4];
    assert_eq!(compare(&obs, &want), (0, 0), "{game}: the first observation");
    let episodes = g["episodes"].as_array().unwrap();
    let mut seen_episodes = 0;
    let steps = g["actions"].as_array().unwrap().len();
    for t in 0..steps {
        let action = g["actions"][t].as_i64().unwrap();
        let step = env.step(Action::Discrete(&[action]), &mut obs);
        assert_eq!(step.reward, g["rewards"][t].as_f64().unwrap(), "{game} step {t}: clipped reward");
        assert_eq!(step.terminated, g["terminated"][t].as_bool().unwrap(), "{game} step {t}: terminated");
        assert_eq!(step.truncated, g["truncated"][t].as_bool().unwrap(), "{game} step {t}: truncated");
        assert_eq!(env.lives(), g["lives"][t].as_u64().unwrap() as u32, "{game} step {t}: lives");
        if let Some(ep) = step.episode {
            let want_ep = &episodes[seen_episodes];
            assert_eq!(want_ep["step"].as_u64().unwrap() as usize, t, "{game}: episode ended at another step");
            assert_eq!(
                (ep.r, ep.l),
                (want_ep["r"].as_f64().unwrap(), want_ep["l"].as_u64().unwrap()),
                "{game} step {t}: episode"
            );
            seen_episodes += 1;
        }
        if step.terminated || step.truncated {
            env.reset(None, &mut obs);
            want = [frame(t + 1); 4];
        } else {
            want = [want[1], want[2], want[3], frame(t + 1)];
        }
        let (d, n) = compare(&obs, &want);
        assert_eq!(d, 0, "{game} step {t}: a pixel differs by {d} ({n} pixels differ)");
    }
    assert_eq!(seen_episodes, episodes.len(), "{game}: episodes");
    eprintln!("{game}: {steps} steps equal, every pixel");
}

/// CleanRL's stack in Python gave the same stacked frames, every pixel, and the same rewards, flags, lives and
/// episodes, under the same actions and no-op counts.
#[test]
fn breakout_and_pong_match_gymnasium_and_ale_py() {
    for game in ["breakout", "pong"] {
        replay(game);
    }
}

/// The same stack around Gymnasium's own BreakoutNoFrameskip-v4 (`atari::Game`, ale-py in a Python process) is
/// CleanRL's too: lives from `info["lives"]`, FIRE from its action meanings, the raw scores of its episodes.
#[test]
fn the_stack_around_gymnasiums_breakout_is_cleanrls() {
    let (g, _) = golden("breakout");
    let game = envs::atari::Game::new("gymnasium:BreakoutNoFrameskip-v4").expect("ale-py (scripts/setup)");
    let has_fire = game.has_fire();
    replay_on("breakout", stack(game, has_fire, noops(&g)));
}

/// `V4_GAMES` lists 62 games, and each has its ROM file in `rom_dir`. `rom_name` maps a v4 id to its ROM's name. It
/// gives none for a v5 id or for a game ale-py does not have. `AtariEnv` makes three of the games from their ROMs, each
/// with an action space of one value.
#[test]
fn every_v4_game_has_its_rom_and_loads() {
    use envs::atari::{rom_dir, rom_name, V4_GAMES};
    assert_eq!(V4_GAMES.len(), 62);
    for (id, rom) in [
        ("BreakoutNoFrameskip-v4", "breakout"),
        ("UpNDownNoFrameskip-v4", "up_n_down"),
        ("MsPacmanNoFrameskip-v4", "ms_pacman"),
    ] {
        assert_eq!(rom_name(id), Some(rom));
    }
    assert_eq!(rom_name("Breakout-v5"), None);
    assert_eq!(rom_name("BasicMathNoFrameskip-v4"), None, "not a v4 game in ale-py");
    for rom in V4_GAMES {
        assert!(rom_dir().join(format!("{rom}.bin")).is_file(), "{rom}.bin missing in {}", rom_dir().display());
    }
    // ALE accepts the ROMs
    for id in ["SpaceInvadersNoFrameskip-v4", "BeamRiderNoFrameskip-v4", "MontezumaRevengeNoFrameskip-v4"] {
        let env = AtariEnv::new(id).unwrap_or_else(|e| panic!("{e}"));
        assert!(env.action_space().flat_dim() == 1);
    }
}

/// `ObsAsF32` hands on the same pixels as f32 (what `ppo_lstm` reads), with the same steps.
#[test]
fn obs_as_f32_passes_pixels_on_as_floats() {
    let (mut pixels, mut floats) = (
        cleanrl_stack("BreakoutNoFrameskip-v4", vec![]),
        envs::ObsAsF32::new(cleanrl_stack("BreakoutNoFrameskip-v4", vec![])),
    );
    assert_eq!(pixels.observation_space(), floats.observation_space());
    let (mut a, mut b) = (vec![0u8; 4 * FRAME], vec![0f32; 4 * FRAME]);
    pixels.reset(Some(3), &mut a);
    floats.reset(Some(3), &mut b);
    for t in 0..300i64 {
        assert!(a.iter().zip(&b).all(|(&p, &f)| p as f32 == f), "step {t}");
        let (s, u) = (pixels.step(Action::Discrete(&[t % 4]), &mut a), floats.step(Action::Discrete(&[t % 4]), &mut b));
        assert_eq!(
            (s.reward, s.terminated, s.truncated, s.episode),
            (u.reward, u.terminated, u.truncated, u.episode),
            "step {t}"
        );
    }
    assert!(a.iter().any(|&p| p > 0), "frames are not blank");
}

/// ale-py in the set-up's Python: for each id and seed, `gym.make(id)`, `reset(seed=seed)`, the no-op count CleanRL's
/// NoopResetEnv would draw, then `frames` random actions, an unseeded reset after each end. One JSON line per run:
/// each frame's screen as a CRC-32, reward, lives and flags.
const ALE_PY: &str = r#"
import json, sys, zlib
import ale_py  # registers the v4 ids
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner on stdout
import gymnasium as gym
import numpy as np
ids, seeds, frames = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
for env_id in ids:
    env = gym.make(env_id)
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        noops = int(env.unwrapped.np_random.integers(1, 31))
        actions = np.random.default_rng(seed).integers(0, env.action_space.n, size=frames).tolist()
        run = {"id": env_id, "seed": seed, "noops": noops, "reset": zlib.crc32(obs.tobytes()), "actions": actions}
        run["frames"] = []
        for a in actions:
            obs, r, term, trunc, info = env.step(a)
            frame = [zlib.crc32(obs.tobytes()), float(r), info["lives"], term, trunc]
            if term or trunc:
                obs, _ = env.reset()
                frame.append(zlib.crc32(obs.tobytes()))
            run["frames"].append(frame)
        print(json.dumps(run), flush=True)
"#;

fn crc32(bytes: &[u8]) -> u64 {
    let mut crc = flate2::Crc::new();
    crc.update(bytes);
    u64::from(crc.sum())
}

/// Every v4 game, native, is ale-py 0.9.0's game, live: over 3,000 random actions from each of 3 seeds, every screen
/// (a CRC-32 of its RGB bytes, after each reset too), reward, life count and end is equal, and a seed gives ale-py's
/// no-op count. The games whose emulator draws random numbers (Assault, Berzerk, ElevatorAction, Frostbite, Seaquest,
/// YarsRevenge) are among them.
#[test]
fn every_v4_game_is_ale_pys_frame_for_frame() {
    use envs::atari::{ale_py_seeds, V4_GAMES};
    use std::io::BufRead;
    const SEEDS: [u64; 3] = [1, 2, 3];
    const FRAMES: usize = 3000;
    let camel = |rom: &str| rom.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect::<String>();
    let ids: Vec<String> = V4_GAMES.iter().map(|rom| format!("{}NoFrameskip-v4", camel(rom))).collect();
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python");
    let mut child = std::process::Command::new(python)
        .args(["-c", ALE_PY, &serde_json::to_string(&ids).unwrap(), &serde_json::to_string(&SEEDS).unwrap()])
        .arg(FRAMES.to_string())
        .env("PYGAME_HIDE_SUPPORT_PROMPT", "1") // pygame's greeting on stdout, before the JSON
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{python}: {e} (scripts/setup makes it)"));
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    for id in &ids {
        // ale-py's runs a line at a time, while this process plays the same game
        let mut env = AtariEnv::new(id).unwrap_or_else(|e| panic!("{e}"));
        let mut screen = vec![0u8; env.observation_space().flat_dim()];
        for seed in SEEDS {
            let line = lines.next().unwrap_or_else(|| panic!("ale-py ended before {id} seed {seed}")).unwrap();
            let run: Value = serde_json::from_str(&line).unwrap();
            assert_eq!((run["id"].as_str(), run["seed"].as_u64()), (Some(id.as_str()), Some(seed)));
            let noops = ale_py_seeds(seed).0.integers(1, 31);
            assert_eq!(run["noops"].as_i64(), Some(noops), "{id} seed {seed}: the no-op count");
            env.reset(Some(seed), &mut screen);
            assert_eq!(run["reset"].as_u64(), Some(crc32(&screen)), "{id} seed {seed}: the first screen");
            for (t, (action, theirs)) in
                run["actions"].as_array().unwrap().iter().zip(run["frames"].as_array().unwrap()).enumerate()
            {
                let step = env.step(Action::Discrete(&[action.as_i64().unwrap()]), &mut screen);
                let mut ours =
                    serde_json::json!([crc32(&screen), step.reward, env.lives(), step.terminated, step.truncated]);
                if step.terminated || step.truncated {
                    env.reset(None, &mut screen);
                    ours.as_array_mut().unwrap().push(crc32(&screen).into());
                }
                assert_eq!(
                    &ours, theirs,
                    "{id} seed {seed} frame {t}: [screen CRC, reward, lives, terminated, truncated]"
                );
            }
        }
    }
    assert!(child.wait().unwrap().success(), "ale-py's process failed");
}
