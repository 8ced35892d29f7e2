//! Gymnasium's own envs (envs::gymnasium): an id envs does not implement, or any as `gymnasium:<id>`, runs in a
//! Python process of the set-up's virtual environment. A traced `ppo` run on `gymnasium:CartPole-v1` is Gymnasium's
//! CartPole step for step (its recorded actions replayed in Python on the same seeds give the same observations,
//! rewards and ends), keeps ratio == 1 and learns. What cannot run is one line, exit code 2, nothing written. An env
//! that misbehaves (the tests' own, envs/tests/pyenvs) ends the run with one line naming it, exit code 2, or changes
//! nothing (what it prints to fd 1). Ctrl-C prints the binary's stop line alone, and no worker outlives the binary.

mod common;
use common::{assert_ratio_one_and_small_kl, run, run_with_env};

const PPO: &str = env!("CARGO_BIN_EXE_ppo");

/// The set-up's Python (scripts/setup links it as `.venv`).
fn python() -> std::path::PathBuf {
    std::path::Path::new(".venv/bin/python").to_path_buf()
}

/// Replays the trace's actions in Gymnasium (4 envs seeded 1..4, gymnasium 0.29's autoreset: an env that ends is
/// reset at once) and checks the trace's observations, rewards and done flags against it, exactly.
const REPLAY: &str = r#"
import json, sys
import numpy as np
import gymnasium as gym
t = json.load(open(sys.argv[1]))
n, steps = 4, len(t["actions"]) // 4
obs = np.array(t["obs"], dtype=np.float32).reshape(steps, n, -1)
actions = np.array(t["actions"]).reshape(steps, n)
rewards = np.array(t["rewards"], dtype=np.float32).reshape(steps, n)
dones = np.array(t["dones"], dtype=np.float32).reshape(steps, n)
envs = [gym.make("CartPole-v1") for _ in range(n)]
now = [env.reset(seed=1 + e)[0] for e, env in enumerate(envs)]
ends = 0
for s in range(steps):
    for e, env in enumerate(envs):
        assert np.array_equal(now[e].astype(np.float32), obs[s, e]), (s, e, now[e], obs[s, e])
        o, r, term, trunc, _ = env.step(int(actions[s, e]))
        assert np.float32(r) == rewards[s, e], (s, e, r, rewards[s, e])
        if s + 1 < steps:
            assert float(term or trunc) == dones[s + 1, e], (s, e, term, trunc)
        ends += term or trunc
        now[e] = env.reset()[0] if term or trunc else o
print(f"{steps} steps of {n} envs, {ends} episode ends, all as Gymnasium's")
"#;

/// `ppo --env-id CartPole-v1` and `ppo --env-id gymnasium:CartPole-v1` are the same run: the native env is
/// Gymnasium's, seeded as Gymnasium seeds it. episodes.csv is the same byte for byte, every update's values too
/// (one binary, one machine: the same computation); another seed gives another run.
#[test]
fn the_native_cartpole_and_gymnasiums_are_the_same_run() {
    let ppo = |id: &str, seed: &str| run(PPO, &["--env-id", id, "--total-timesteps", "8192", "--seed", seed]);
    let (native, theirs, other) = (ppo("CartPole-v1", "1"), ppo("gymnasium:CartPole-v1", "1"), ppo("CartPole-v1", "2"));
    let episodes = |r: &common::Run| std::fs::read(r.assert_ok().dir().join("episodes.csv")).expect("episodes.csv");
    assert_eq!(episodes(&native), episodes(&theirs), "episodes.csv");
    assert_ne!(episodes(&native), episodes(&other), "another seed");
    common::assert_same_metrics(&native, &theirs, &other);
}

/// A traced `ppo` run on `gymnasium:CartPole-v1` prints that its env runs in Gymnasium and its device is the CPU. Its
/// trace is replayed in Gymnasium on 4 envs seeded 1 to 4. All 128 steps of the 4 envs give the same observations,
/// rewards and done flags, exactly.
#[test]
fn a_gymnasium_env_is_gymnasiums_step_for_step() {
    let work = tempfile::tempdir().expect("temp dir");
    let trace_file = work.path().join("trace.safetensors");
    let args = ["--env-id", "gymnasium:CartPole-v1", "--total-timesteps", "512"];
    let r = run_with_env(PPO, &args, &[("PPO_TRACE", trace_file.to_str().expect("utf-8"))]);
    let stdout = String::from_utf8_lossy(&r.assert_ok().output.stdout).into_owned();
    // the device line says where the envs run
    assert!(
        stdout.contains("env: CartPole-v1 runs in Gymnasium") && stdout.contains("device: cpu (--cuda false)"),
        "{stdout}"
    );
    let trace: std::collections::BTreeMap<String, tch::Tensor> =
        tch::Tensor::read_safetensors(&trace_file).expect("the trace").into_iter().collect();
    let floats = |name: &str| Vec::<f32>::try_from(trace[name].reshape([-1])).expect("floats");
    let actions = Vec::<i64>::try_from(trace["rollout.actions"].reshape([-1])).expect("ints");
    let json = serde_json::json!({
        "obs": floats("rollout.obs"), "actions": actions,
        "rewards": floats("rollout.rewards"), "dones": floats("rollout.dones"),
    });
    let json_file = work.path().join("trace.json");
    std::fs::write(&json_file, json.to_string()).expect("write");
    let out =
        std::process::Command::new(python()).args(["-c", REPLAY]).arg(&json_file).output().expect("python starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("128 steps of 4 envs"), "{stdout}");
}

/// `--help` says, in the binaries that run Gymnasium's envs, how an id runs there (the `gymnasium:` prefix).
#[test]
fn help_says_how_an_id_runs_in_gymnasium() {
    let says = "an id not implemented here runs in Gymnasium's own Python (gymnasium:<id> forces it)";
    for (bin, runs) in [
        (PPO, true),
        (env!("CARGO_BIN_EXE_ppo_continuous"), true),
        (env!("CARGO_BIN_EXE_ppo_atari"), true),
        (env!("CARGO_BIN_EXE_ppo_multilevel"), false),
    ] {
        let out = std::process::Command::new(bin).arg("--help").output().expect("the binary starts");
        assert_eq!(String::from_utf8_lossy(&out.stdout).contains(says), runs, "{bin}");
    }
}

/// `ppo` on Gymnasium's CartPole: ratio == 1 at every update's first minibatch, and it learns as on the native one
/// (the mean of the last 20 episodes above 100 within 60k steps, as tests/ppo_seeds.rs asks of `ppo`'s seeds).
#[test]
fn ppo_learns_gymnasiums_cartpole() {
    let r = run(PPO, &["--env-id", "gymnasium:CartPole-v1", "--total-timesteps", "61440"]);
    let updates = r.assert_ok().csv("updates.csv");
    assert_ratio_one_and_small_kl(
        &updates,
        "debug/first_mb_max_ratio_dev",
        "debug/first_mb_clipfrac",
        "losses/approx_kl",
        30,
    );
    let returns = r.csv("episodes.csv").col("charts/episodic_return");
    let last20 = returns.iter().rev().take(20).sum::<f64>() / 20.0;
    assert!(last20 > 100.0, "{last20}");
}

/// What cannot run is one line, exit code 2, no run directory. That is an id Gymnasium does not know, an env whose
/// package is missing (Ant-v3's mujoco-py), and a space no binary reads (Blackjack's Tuple). So is a Gymnasium env
/// asked of a binary that runs none.
#[test]
fn what_cannot_run_is_one_line_exit_2() {
    common::assert_bad_input(
        PPO,
        &[
            (&["--env-id", "NoSuchEnv-v0"], &[], "gymnasium.make('NoSuchEnv-v0') failed: NameNotFound"),
            (&["--env-id", "Ant-v3"], &[], "No module named 'mujoco_py'"),
            (&["--env-id", "Blackjack-v1"], &[], "Tuple(Discrete(32), Discrete(11), Discrete(2))"),
        ],
    );
    common::assert_bad_input(
        env!("CARGO_BIN_EXE_ppo_atari"),
        &[
            (&["--env-id", "gymnasium:CartPole-v1"], &[], "ppo_atari reads RGB images, a Box of uint8"),
            (&["--env-id", "CarRacing-v2"], &[], "Box(3,) actions; ppo_atari needs 4x84x84, Discrete"),
        ],
    );
    common::assert_bad_input(
        env!("CARGO_BIN_EXE_ppo_multidiscrete_mask"),
        &[(&["--env-id", "gymnasium:CartPole-v1"], &[], "ppo_multidiscrete_mask runs no Gymnasium env")],
    );
}

/// `--env-kwargs` for an env that does not run in Gymnasium: one line that says how to run it there, or that the
/// binary runs no Gymnasium env; exit code 2, no run directory.
#[test]
fn env_kwargs_for_a_native_env_are_one_line_exit_2() {
    let kwargs = ["--env-kwargs", r#"{"continuous": true}"#];
    let native = "--env-kwargs applies to Gymnasium's envs; CartPole-v1 runs natively: give gymnasium:CartPole-v1";
    common::assert_bad_input(PPO, &[(&[&kwargs[..], &["--env-id", "CartPole-v1"]].concat(), &[], native)]);
    let atari = "--env-kwargs applies to Gymnasium's envs; BreakoutNoFrameskip-v4 runs natively: give \
                 gymnasium:BreakoutNoFrameskip-v4";
    common::assert_bad_input(env!("CARGO_BIN_EXE_ppo_atari"), &[(&kwargs, &[], atari)]);
    let none = "--env-kwargs applies to Gymnasium's envs; ppo_multidiscrete_mask runs none";
    common::assert_bad_input(env!("CARGO_BIN_EXE_ppo_multidiscrete_mask"), &[(&kwargs, &[], none)]);
}

/// `--env-kwargs` reaches `gymnasium.make` and is in args.json. With `kwargs:Sized-v0`, a reward of 2.5 a step makes
/// its 50-step episodes return 125, where its default gives 50. `--resume` keeps the kwargs: the resumed episodes
/// return 125 too. Another value given with `--resume` is refused.
#[test]
fn env_kwargs_reach_the_env_and_a_resume_keeps_them() {
    let kwargs = r#"{"size": 7, "reward": 2.5}"#;
    let returns = |r: &common::Run| r.csv("episodes.csv").col("charts/episodic_return");
    let plain = ppo_on("kwargs:Sized-v0", &[]);
    assert!(returns(plain.assert_ok()).iter().all(|&g| g == 50.0), "{:?}", returns(&plain));
    let r = ppo_on("kwargs:Sized-v0", &["--env-kwargs", kwargs]);
    let first = returns(r.assert_ok());
    assert!(!first.is_empty() && first.iter().all(|&g| g == 125.0), "{first:?}");
    let args: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(r.dir().join("args.json")).expect("args.json")).expect("json");
    assert_eq!(args["env_kwargs"], serde_json::json!({"size": 7, "reward": 2.5}));
    let resume = |more: &[&str]| {
        let dir = r.dir().to_string_lossy().into_owned();
        let args = [&["--cuda", "false", "--resume", &dir, "--total-timesteps", "2048"][..], more].concat();
        let mut cmd = std::process::Command::new(PPO);
        cmd.args(args).current_dir(r.workdir.path()).env("PYTHONPATH", PYENVS);
        cmd.output().expect("ppo starts")
    };
    let other = resume(&["--env-kwargs", r#"{"reward": 1.0}"#]);
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert_eq!(other.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(r#"--env-kwargs {"reward":1.0} is not the run's {"#), "{stderr}");
    let resumed = resume(&[]);
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    let all = returns(&r);
    assert!(all.len() > first.len() && all.iter().all(|&g| g == 125.0), "{all:?}");
}

/// `--env-kwargs` as a user gives it: LunarLander-v2 made with `continuous=True` has Box actions, which `ppo`
/// refuses and `ppo_continuous` trains (two updates, ratio == 1 at each first minibatch, small KL).
#[test]
fn continuous_lunar_lander_through_env_kwargs() {
    let kwargs = ["--env-id", "LunarLander-v2", "--env-kwargs", r#"{"continuous": true}"#];
    common::assert_bad_input(PPO, &[(&kwargs, &[], "ppo needs 1-D and Discrete")]);
    let small = ["--num-envs", "2", "--num-steps", "64", "--total-timesteps", "256", "--num-minibatches", "2"];
    let r = run(env!("CARGO_BIN_EXE_ppo_continuous"), &[&kwargs[..], &small].concat());
    let updates = r.assert_ok().csv("updates.csv");
    let columns = ["debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl"];
    assert_ratio_one_and_small_kl(&updates, columns[0], columns[1], columns[2], 2);
    assert_eq!(updates.col("iteration"), [1.0, 2.0]);
}

/// The Python of scripts/setup's Gymnasium 1.x venv (`.venv-gymnasium1`), checked to be there.
fn gymnasium1() -> String {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/.venv-gymnasium1/bin/python");
    assert!(std::path::Path::new(python).exists(), "{python} is missing: run scripts/setup, which makes it");
    python.to_string()
}

/// Gymnasium 1.x in a Python of the user's own: `PPO_DETAILS_PYTHON` names it. `ppo` trains its LunarLander-v3 (1.x's
/// id; 0.29 has v2) and its CartPole-v1 unchanged. Each runs two updates, with ratio == 1 at each first minibatch, a
/// small KL and episodes logged. The device line names that Python.
#[test]
fn ppo_trains_on_gymnasium_1x_through_ppo_details_python() {
    let python = gymnasium1();
    let small = ["--num-envs", "4", "--num-steps", "128", "--total-timesteps", "1024"];
    for id in ["LunarLander-v3", "gymnasium:CartPole-v1"] {
        let r = run_with_env(PPO, &[&["--env-id", id][..], &small].concat(), &[("PPO_DETAILS_PYTHON", &python)]);
        let updates = r.assert_ok().csv("updates.csv");
        let columns = ["debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl"];
        assert_ratio_one_and_small_kl(&updates, columns[0], columns[1], columns[2], 2);
        let stdout = String::from_utf8_lossy(&r.output.stdout);
        let name = id.trim_start_matches("gymnasium:");
        assert!(
            stdout.contains(&format!("{name} runs in Gymnasium, one Python process per env ({python})")),
            "{stdout}"
        );
        assert!(!r.csv("episodes.csv").col("charts/episodic_return").is_empty(), "{id}: no episode ended");
    }
}

/// ppo_atari (and ppo_atari_multigpu, alone) on a Gymnasium image env. ALE/Breakout-v5 is not one of the native v4 ids,
/// so it is Gymnasium's (ale-py registers it). CleanRL's wrappers go around its RGB frames (its lives for EpisodicLife,
/// FIRE for FireReset), and the Nature CNN reads the 4x84x84 stack. Two updates run with ratio == 1, a small KL and
/// episodes logged. The run is in `runs/ALE/`: the id's namespace is a folder, as CleanRL's SummaryWriter makes it.
#[test]
fn ppo_atari_trains_on_a_gymnasium_image_env() {
    let runs = [
        (env!("CARGO_BIN_EXE_ppo_atari"), "--num-envs"),
        (env!("CARGO_BIN_EXE_ppo_atari_multigpu"), "--local-num-envs"),
    ];
    for (bin, envs) in runs {
        let r = run(bin, &["--env-id", "ALE/Breakout-v5", envs, "4", "--total-timesteps", "1024"]);
        let updates = r.assert_ok().csv("updates.csv");
        let columns = ["debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl"];
        assert_ratio_one_and_small_kl(&updates, columns[0], columns[1], columns[2], 2);
        let stdout = String::from_utf8_lossy(&r.output.stdout);
        assert!(stdout.contains("env: ALE/Breakout-v5 runs in Gymnasium"), "{stdout}");
        assert!(r.dir().parent().is_some_and(|p| p.ends_with("runs/ALE")), "{}", r.dir().display());
        assert!(!r.csv("episodes.csv").col("charts/episodic_return").is_empty(), "{bin}: no episode ended");
    }
}

/// Every other binary that runs Gymnasium's envs, on one of them for a few updates. Each has ratio == 1 at every
/// update's first minibatch, a small KL, and episodes in episodes.csv. ppo_continuous runs Pendulum-v1's Box actions,
/// clipped to its bounds. ppo_lstm, ppo_noisy and ppo_seeds run CartPole-v1, and so does ppo_lstm_workers alone.
#[test]
fn every_gymnasium_binary_trains_on_a_gymnasium_env() {
    let small = ["--num-steps", "32", "--total-timesteps", "512", "--num-minibatches", "2"];
    let runs: [(&str, &str, &[&str]); 5] = [
        (env!("CARGO_BIN_EXE_ppo_continuous"), "gymnasium:Pendulum-v1", &["--num-envs", "2"]),
        (env!("CARGO_BIN_EXE_ppo_lstm"), "gymnasium:CartPole-v1", &["--num-envs", "4"]),
        (env!("CARGO_BIN_EXE_ppo_noisy"), "gymnasium:CartPole-v1", &["--num-envs", "4"]),
        (env!("CARGO_BIN_EXE_ppo_seeds"), "gymnasium:CartPole-v1", &["--num-envs", "2", "--num-seeds", "2"]),
        (env!("CARGO_BIN_EXE_ppo_lstm_workers"), "gymnasium:CartPole-v1", &["--num-envs", "4"]),
    ];
    for (bin, id, own) in runs {
        let args: Vec<&str> = ["--env-id", id].iter().chain(own).chain(&small).copied().collect();
        let r = run(bin, &args);
        let updates = r.assert_ok().csv("updates.csv");
        let columns = ["debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl"];
        assert_ratio_one_and_small_kl(&updates, columns[0], columns[1], columns[2], 1);
        let stdout = String::from_utf8_lossy(&r.output.stdout);
        assert!(stdout.contains("\nenv: ") || stdout.starts_with("env: "), "{bin}: {stdout}");
        assert!(stdout.contains("runs in Gymnasium, one Python process per env"), "{bin}: {stdout}");
        assert!(!r.csv("episodes.csv").col("charts/episodic_return").is_empty(), "{bin}: no episode ended");
    }
}

/// Gymnasium's own families beyond classic control, as a CleanRL user names them. LunarLander-v2 (Box2D) runs with
/// `ppo`. A MiniGrid env runs with `ppo` and `ppo_lstm` (miniDRL's env family). Its Dict observations are read through
/// MiniGrid's `ImgObsWrapper`, the 7x7x3 view flattened to 147 values. Each runs a few updates, with ratio == 1, a
/// small KL and episodes logged.
#[test]
fn lunar_lander_and_minigrid_run() {
    let small = ["--num-envs", "4", "--num-steps", "64", "--total-timesteps", "1024", "--num-minibatches", "2"];
    let runs = [
        (PPO, "LunarLander-v2"),
        (PPO, "MiniGrid-DoorKey-5x5-v0"),
        (env!("CARGO_BIN_EXE_ppo_lstm"), "MiniGrid-DoorKey-5x5-v0"),
    ];
    for (bin, id) in runs {
        let args: Vec<&str> = ["--env-id", id].iter().chain(&small).copied().collect();
        let r = run(bin, &args);
        let updates = r.assert_ok().csv("updates.csv");
        let columns = ["debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl"];
        assert_ratio_one_and_small_kl(&updates, columns[0], columns[1], columns[2], 1);
        assert_eq!(updates.col("iteration").len(), 4, "{bin} {id}");
        let stdout = String::from_utf8_lossy(&r.output.stdout);
        assert!(stdout.contains(&format!("env: {id} runs in Gymnasium")), "{stdout}");
        assert!(!r.csv("episodes.csv").col("charts/episodic_return").is_empty(), "{bin} {id}: no episode ended");
    }
}

/// `--capture-video` on a Gymnasium env: env 0's episodes drawn by Gymnasium's own `render()` (the env made with
/// `render_mode="rgb_array"`: CartPole's 600x400 frames), as GIFs on CleanRL's schedule (0, 1, 8, ...); the metrics
/// are those of a run without it.
#[test]
fn capture_video_draws_gymnasiums_frames() {
    let args = ["--env-id", "gymnasium:CartPole-v1", "--total-timesteps", "1024"];
    let r = run(PPO, &[&args[..], &["--capture-video"]].concat());
    r.assert_ok();
    let dir = common::assert_video_folder(&r, "gymnasium:CartPole-v1__ppo__1__", 10_000);
    let first = std::fs::read(dir.join("episode-0.gif")).expect("episode-0.gif");
    let size = |at: usize| u16::from_le_bytes([first[at], first[at + 1]]);
    assert_eq!((size(6), size(8)), (600, 400), "the GIF's logical screen: Gymnasium's frame");
    assert!(dir.join("episode-1.gif").exists() && dir.join("episode-8.gif").exists());
    let plain = run(PPO, &args);
    let metrics = |r: &common::Run| r.csv("updates.csv").without(common::TIMING_COLUMNS);
    assert_eq!(metrics(&r), metrics(plain.assert_ok()));
}

/// An env that raises in `step` (a user's Gymnasium env, registered by its module: `raiser:Raiser-v0`) ends the run. It
/// prints one line naming the env, its exception and the step, exit code 2, no panic. The updates before it stay in the
/// logs.
#[test]
fn an_env_that_raises_in_step_ends_the_run_in_one_line() {
    let module = tempfile::tempdir().expect("temp dir");
    let source = "import gymnasium as gym\nimport numpy as np\n\
                  class Raiser(gym.Env):\n    \
                  observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)\n    \
                  action_space = gym.spaces.Discrete(2)\n    \
                  def reset(self, seed=None, options=None):\n        \
                  super().reset(seed=seed); self.t = 0\n        return np.zeros(3, np.float32), {}\n    \
                  def step(self, action):\n        global steps\n        self.t += 1; steps += 1\n        \
                  if steps == 600:\n            raise RuntimeError('the simulator diverged')\n        \
                  return np.zeros(3, np.float32), 1.0, False, self.t % 50 == 0, {}\n\
                  steps = 0\n\
                  gym.register('Raiser-v0', entry_point=Raiser)\n";
    std::fs::write(module.path().join("raiser.py"), source).expect("write raiser.py");
    let path = module.path().to_string_lossy().to_string();
    let args = ["--env-id", "raiser:Raiser-v0", "--total-timesteps", "4096"];
    let r = run_with_env(PPO, &args, &[("PYTHONPATH", &path)]);
    let stderr = r.stderr();
    assert_eq!(r.output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    let line = "error: exception in step: raiser:Raiser-v0 raised RuntimeError: the simulator diverged (at step 600)";
    assert_eq!(stderr.trim_end(), line);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // each env's process counts its own steps: the 600th is in update 5 (128 steps an update)
    assert_eq!(r.csv("updates.csv").col("iteration"), [1.0, 2.0, 3.0, 4.0], "the updates before it are kept");
}

/// The tests' own Gymnasium envs (`misbehaving:<Name>-v0`, `loud:Loud-v0`), for PYTHONPATH.
const PYENVS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/envs/tests/pyenvs");

/// `ppo` on `id`, one of the tests' own envs or Gymnasium's: 2 envs, 1024 steps, then `more` flags.
fn ppo_on(id: &str, more: &[&str]) -> common::Run {
    let args = ["--env-id", id, "--num-envs", "2", "--total-timesteps", "1024"];
    run_with_env(PPO, &[&args[..], more].concat(), &[("PYTHONPATH", PYENVS)])
}

/// The run ended with the one line `line` (after `error: `), exit code 2.
fn assert_one_line(r: &common::Run, line: &str) {
    let stderr = r.stderr();
    assert_eq!(r.output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end(), format!("error: {line}"));
}

/// The live processes (zombies aside): their pids, their parents' and their command lines.
fn processes() -> Vec<(u32, u32, String)> {
    let entries = std::fs::read_dir("/proc").expect("/proc").flatten();
    let pids = entries.filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    pids.filter_map(|pid| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // after the command's name in parentheses: the state, then the parent's pid
        let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
        let (state, parent) = (fields.next()?, fields.next()?.parse().ok()?);
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        (state != "Z").then(|| (pid, parent, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
    })
    .collect()
}

/// Within 5 s, none of the processes `alive` says are alive is.
fn assert_all_end(what: &str, alive: impl Fn() -> Vec<u32>) {
    let since = std::time::Instant::now();
    while !alive().is_empty() {
        assert!(since.elapsed().as_secs() < 5, "{what}: workers left running: {:?}", alive());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// No process runs the env `id` any more (within 5 s).
fn assert_no_worker_of(id: &str) {
    let workers = || processes().into_iter().filter(|(_, _, cmd)| cmd.contains(id)).map(|(pid, ..)| pid).collect();
    assert_all_end(id, workers);
}

/// An env whose observation is longer than its space says (8 values, its Box 4) ends the run at that step. It prints
/// one line naming both sizes, exit code 2. Before, the pipe read the first 4 values of it, and the next answer was out
/// of step.
#[test]
fn a_longer_observation_than_its_space_is_one_line() {
    let r = ppo_on("misbehaving:LongObs-v0", &[]);
    let line = "wrong observation size: misbehaving:LongObs-v0 returned an observation of 8 values at step 5; its \
                space has 4";
    assert_one_line(&r, line);
}

/// What an env writes to fd 1, as a C library prints, goes to stderr. It may write at import (`loud:Loud-v0`: its
/// module's greeting and banner) or in every step and reset (`misbehaving:Garbage-v0`). Both are CartPole-v1, and their
/// runs are Gymnasium's CartPole-v1's, metric for metric (fd 1 was the protocol's pipe).
#[test]
fn what_an_env_writes_to_fd_1_changes_nothing() {
    let metrics = |r: &common::Run| r.assert_ok().csv("updates.csv").without(common::TIMING_COLUMNS);
    let cartpole = metrics(&ppo_on("gymnasium:CartPole-v1", &[]));
    let garbage = ppo_on("misbehaving:Garbage-v0", &[]);
    assert!(
        garbage.stderr().contains("garbage") && !String::from_utf8_lossy(&garbage.output.stdout).contains("garbage")
    );
    assert_eq!(metrics(&garbage), cartpole);
    let loud = ppo_on("loud:Loud-v0", &[]);
    assert!(loud.stderr().contains("loud: a banner written to fd 1 at import"), "{}", loud.stderr());
    assert_eq!(metrics(&loud), cartpole);
}

/// A NaN in an observation, or an infinite reward, ends the run where it arrives: one line naming the env, the
/// step, the value (and which of the observation's), exit code 2 (not a non-finite loss updates later).
#[test]
fn non_finite_values_are_named_where_they_arrive() {
    let nan = "non-finite observation: misbehaving:NanObs-v0 returned nan at step 7 (value 2 of 4)";
    assert_one_line(&ppo_on("misbehaving:NanObs-v0", &[]), nan);
    let inf = "non-finite reward: misbehaving:InfReward-v0 returned inf at step 7";
    assert_one_line(&ppo_on("misbehaving:InfReward-v0", &[]), inf);
}

/// `ppo_continuous` clips its Gaussian actions to a Gymnasium env's Box (CleanRL's `ClipAction`): an env that
/// raises on an action outside [-1, 1] (`misbehaving:StrictBox-v0`) trains two updates, ratio == 1.
#[test]
fn ppo_continuous_clips_actions_to_a_gymnasium_envs_box() {
    let args = ["--env-id", "misbehaving:StrictBox-v0", "--num-envs", "2", "--num-steps", "64", "--total-timesteps"];
    let r =
        run_with_env(env!("CARGO_BIN_EXE_ppo_continuous"), &[&args[..], &["256"]].concat(), &[("PYTHONPATH", PYENVS)]);
    let updates = r.assert_ok().csv("updates.csv");
    let columns = ["debug/first_mb_max_ratio_dev", "debug/first_mb_clipfrac", "losses/approx_kl"];
    assert_ratio_one_and_small_kl(&updates, columns[0], columns[1], columns[2], 2);
    assert_eq!(updates.col("iteration"), [1.0, 2.0]);
}

/// An env that hangs in a step (`time.sleep`) ends the run after `--env-timeout` with one line naming it, exit code
/// 2; its process and the other env's are gone.
#[test]
fn an_env_that_hangs_is_named_after_the_timeout_and_no_worker_is_left() {
    let start = std::time::Instant::now();
    let r = ppo_on("misbehaving:Sleeper-v0", &["--env-timeout", "3"]);
    assert_one_line(&r, "timeout: misbehaving:Sleeper-v0 did not answer a step within 3 s (at step 20)");
    assert!(start.elapsed().as_secs() < 60, "{:?}", start.elapsed());
    assert_no_worker_of("misbehaving:Sleeper-v0");
}

/// An env that raises in `render` under `--capture-video` ends the run with one line, exit code 2 (its exception
/// left the pipe out of step: what the next step read was garbage).
#[test]
fn an_env_that_raises_in_render_is_one_line() {
    let r = ppo_on("misbehaving:RenderRaiser-v0", &["--capture-video"]);
    let stderr = r.stderr();
    assert_eq!(r.output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    let raised = "exception in render: misbehaving:RenderRaiser-v0 raised RuntimeError: the display went away (at its \
                  render after step ";
    assert!(stderr.starts_with(&format!("error: {raised}")), "{stderr}");
}

/// Starts `ppo` on `id` (2 envs) in its own process group, as a shell starts a job, and waits for its first update;
/// returns it with its workers' pids.
fn ppo_running(work: &std::path::Path, id: &str) -> (std::process::Child, Vec<u32>) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let args = ["--cuda", "false", "--env-id", id, "--num-envs", "2"];
    let mut child = std::process::Command::new(PPO)
        .args(args)
        .env("PYTHONPATH", PYENVS)
        .args(["--total-timesteps", "10000000", "--checkpoint-interval", "0"])
        .current_dir(work)
        .process_group(0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ppo starts");
    let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    while !line.starts_with("run directory: ") {
        line.clear();
        assert!(stdout.read_line(&mut line).expect("stdout") > 0, "no run directory line");
    }
    let updates = work.join(line.trim_end().trim_start_matches("run directory: ")).join("updates.csv");
    let since = std::time::Instant::now();
    while std::fs::read_to_string(&updates).map_or(0, |s| s.lines().count()) < 2 {
        assert!(since.elapsed().as_secs() < 120, "no update in 2 minutes");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink())); // drained
    let workers: Vec<u32> =
        processes().into_iter().filter(|&(_, parent, _)| parent == child.id()).map(|(pid, ..)| pid).collect();
    assert_eq!(workers.len(), 2, "two envs, two workers: {workers:?}");
    (child, workers)
}

/// Ctrl-C (SIGINT to the job's process group) prints the binary's one stop line and nothing else: no
/// KeyboardInterrupt traceback from a worker, and the workers end with the binary.
#[test]
fn ctrl_c_prints_one_stop_line_and_no_traceback() {
    let work = tempfile::tempdir().expect("temp dir");
    let (child, workers) = ppo_running(work.path(), "gymnasium:CartPole-v1");
    let group = format!("-{}", child.id());
    assert!(std::process::Command::new("kill").args(["-INT", "--", &group]).status().expect("kill").success());
    let out = child.wait_with_output().expect("ppo ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("SIGINT: stopped after update "), "{stderr}");
    let alive = || workers.iter().copied().filter(|w| processes().iter().any(|(pid, ..)| pid == w)).collect();
    assert_all_end("SIGINT", alive);
}

/// SIGTERM to the binary alone, and an error exit after the envs are made (ppo refuses Box actions), leave no
/// worker running: each dies with the binary.
#[test]
fn sigterm_and_an_error_exit_leave_no_worker() {
    let work = tempfile::tempdir().expect("temp dir");
    let (child, workers) = ppo_running(work.path(), "gymnasium:CartPole-v1");
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill")
        .success());
    let out = child.wait_with_output().expect("ppo ends");
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
    let alive = || workers.iter().copied().filter(|w| processes().iter().any(|(pid, ..)| pid == w)).collect();
    assert_all_end("SIGTERM", alive);
    let r = ppo_on("misbehaving:BoxActions-v0", &[]);
    assert_eq!(r.output.status.code(), Some(2), "{}", r.stderr());
    assert!(r.stderr().contains("ppo needs 1-D and Discrete"), "{}", r.stderr());
    assert_no_worker_of("misbehaving:BoxActions-v0");
}

/// The processes that run `sleep 987654`: those `misbehaving:Spawner-v0` starts, one per env.
fn spawned() -> Vec<u32> {
    processes().into_iter().filter(|(_, _, cmd)| cmd.starts_with("sleep 987654")).map(|(pid, ..)| pid).collect()
}

/// What an env starts ends with the run, on every exit path: the run's end, an error (the env raises at step 7),
/// and SIGKILL to the binary (`misbehaving:Spawner-v0` starts `sleep 987654` as it is made; 2 envs).
#[test]
fn what_an_env_starts_ends_with_the_run() {
    assert!(spawned().is_empty(), "a sleep 987654 before the test");
    ppo_on("misbehaving:Spawner-v0", &[]).assert_ok();
    assert_all_end("the run's end", spawned);
    let r = ppo_on("misbehaving:SpawnerRaiser-v0", &[]);
    assert_eq!(r.output.status.code(), Some(2), "{}", r.stderr());
    assert_all_end("an error", spawned);
    let work = tempfile::tempdir().expect("temp dir");
    let (mut child, _) = ppo_running(work.path(), "misbehaving:Spawner-v0");
    assert_eq!(spawned().len(), 2, "one sleep per env");
    child.kill().expect("SIGKILL");
    child.wait().expect("ppo ends");
    assert_all_end("SIGKILL", spawned);
}

/// Gymnasium's `start`: a Discrete action space that starts at -1 (`misbehaving:Shifted-v0`, CartPole-v1 whose
/// actions are -1 and 0, any other refused) gets the binary's actions 0 and 1 shifted: its run is CartPole-v1's,
/// metric for metric.
#[test]
fn a_discrete_start_shifts_the_actions() {
    let metrics = |r: &common::Run| r.assert_ok().csv("updates.csv").without(common::TIMING_COLUMNS);
    assert_eq!(metrics(&ppo_on("misbehaving:Shifted-v0", &[])), metrics(&ppo_on("gymnasium:CartPole-v1", &[])));
}

/// Two env threads that fail at once (`misbehaving:NanObs-v0`: a NaN at each env's step 7) end the run with one
/// line, the first failure's, exit code 2: in each of 10 runs.
#[test]
fn two_env_threads_failing_at_once_print_one_line() {
    let nan = "non-finite observation: misbehaving:NanObs-v0 returned nan at step 7 (value 2 of 4)";
    for _ in 0..10 {
        assert_one_line(&ppo_on("misbehaving:NanObs-v0", &["--env-threads", "2"]), nan);
    }
}
