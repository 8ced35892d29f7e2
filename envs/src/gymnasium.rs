//! Gymnasium's envs, for the ids envs does not implement (and for any id as `gymnasium:<id>`): each env is a
//! Python process of the set-up's virtual environment running `gymnasium.make(id)`, stepped over its pipes, as
//! SB3's `SubprocVecEnv` steps its workers. Only such an env starts Python: a native env never does, and nothing
//! links libpython. Observations are flattened as gymnasium's `FlattenObservation` flattens a `Box`, `Discrete`
//! or `MultiDiscrete` observation (a `Discrete` one one-hot); actions are `Discrete`, `MultiDiscrete` or a `Box`.
//! MiniGrid's and BabyAI's ids (the `minigrid` package) get its `ImgObsWrapper`: the agent's 7x7x3 view, flattened.

use crate::{Action, Env, EnvError, Space, Step};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What a Gymnasium id is prefixed with to run in Gymnasium where envs also implements it.
pub const PREFIX: &str = "gymnasium:";

/// The worker: reads a command (`r` and a seed, or `s` and an action) from stdin, writes the observation (and
/// after `s` the reward and the two flags) to stdout; its first line is the spaces as JSON, or an error.
const WORKER: &str = r#"
import json, os, struct, sys, warnings
# the pipe is the protocol's alone: what the env's packages print goes to stderr; pygame's greeting and the
# warnings of gymnasium.make (a deprecated version) not at all: every env's process would repeat them
out, sys.stdout = sys.stdout, sys.stderr
os.environ["PYGAME_HIDE_SUPPORT_PROMPT"] = "1"
def fail(msg):
    out.write(json.dumps({"error": msg}) + "\n"); out.flush(); sys.exit(0)
try:
    import numpy as np
    import gymnasium as gym
    from gymnasium import spaces
except Exception as e:
    fail(f"Python cannot import gymnasium ({type(e).__name__}: {e}): run scripts/setup")
env_id = sys.argv[1]
try:
    if env_id.startswith(("MiniGrid-", "BabyAI-")):
        import minigrid  # registers its ids
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            env = gym.make(env_id, render_mode="rgb_array")  # frames for --capture-video, drawn only when asked
        except TypeError:
            env = gym.make(env_id)  # an env that draws nothing
    if env_id.startswith(("MiniGrid-", "BabyAI-")):
        # MiniGrid's observation is a Dict with the mission's text: its own ImgObsWrapper keeps the agent's 7x7x3
        # view (as miniDRL trains on it), flattened below
        env = minigrid.wrappers.ImgObsWrapper(env)
except gym.error.DependencyNotInstalled as e:
    fail(f"gymnasium.make('{env_id}') needs a package Python does not have ({e})")
except ModuleNotFoundError as e:
    fail(f"gymnasium.make('{env_id}') needs the Python package {e.name}: {sys.executable} -m pip install {e.name}")
except Exception as e:
    fail(f"gymnasium.make('{env_id}') failed: {type(e).__name__}: {e}")
def describe(space, what):
    if isinstance(space, spaces.Discrete):
        return {"discrete": int(space.n)}
    if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
        return {"multi": [int(n) for n in space.nvec]}
    if isinstance(space, spaces.Box):
        # an infinite bound as null (JSON has no infinity): low's is -inf, high's +inf
        finite = lambda b: [x if np.isfinite(x) else None for x in b.astype("float64").ravel().tolist()]
        bounds = [finite(space.low), finite(space.high)]
        return {"box": [list(space.shape)] + bounds}
    fail(f"{env_id}'s {what} space is {space}: a binary reads Box, Discrete or MultiDiscrete"
         " (wrap it, e.g. with gymnasium.wrappers.FlattenObservation)")
obs_space, act_space = env.observation_space, env.action_space
described = {"obs": describe(obs_space, "observation"), "act": describe(act_space, "action")}
flat = lambda obs: np.asarray(spaces.flatten(obs_space, obs), dtype=np.float32).ravel()
dim = flat(obs_space.sample()).size
described["obs_dim"] = int(dim)
out.write(json.dumps(described) + "\n"); out.flush()
stdin, stdout = sys.stdin.buffer, out.buffer
act = described["act"]
was_reset = False
while True:
    op = stdin.read(1)
    if not op:
        break
    try:
        if op == b"r":
            (seed,) = struct.unpack("<q", stdin.read(8))
            obs, _ = env.reset(seed=None if seed < 0 else seed)
            was_reset = True
            stdout.write(b"o" + flat(obs).tobytes())
        elif op == b"v":
            if env.render_mode != "rgb_array":
                stdout.write(b"n")
            else:
                # before the first reset there is nothing to draw yet (gymnasium refuses to): a frame of 0x0
                frame = env.render() if was_reset else None
                frame = np.ascontiguousarray(np.zeros((0, 0, 3)) if frame is None else frame, dtype=np.uint8)
                stdout.write(b"f" + struct.pack("<qq", frame.shape[1], frame.shape[0]) + frame.tobytes())
        else:
            if "discrete" in act:
                (a,) = struct.unpack("<q", stdin.read(8))
            elif "multi" in act:
                a = np.frombuffer(stdin.read(8 * len(act["multi"])), dtype="<i8").astype(act_space.dtype)
            else:
                a = np.frombuffer(stdin.read(4 * int(np.prod(act["box"][0]))), dtype="<f4").reshape(act["box"][0])
            obs, reward, terminated, truncated, _ = env.step(a)
            tail = struct.pack("<d??", float(reward), bool(terminated), bool(truncated))
            stdout.write(b"o" + flat(obs).tobytes() + tail)
    except Exception as e:
        where = dict(r="reset", v="render").get(op.decode(), "step")
        msg = f"{env_id} raised in {where}: {type(e).__name__}: {e}".encode()
        stdout.write(b"e" + struct.pack("<q", len(msg)) + msg)
    stdout.flush()
"#;

/// One Gymnasium env in its Python process.
pub struct Gymnasium {
    id: String,
    child: Child,
    /// the pipes, behind a lock for `render` (which gets `&self`; a step, `&mut self`, takes them without locking)
    pipes: std::sync::Mutex<(ChildStdin, BufReader<ChildStdout>)>,
    observation_space: Space,
    action_space: Space,
    buf: Vec<u8>,
    /// the step's command, kept: a step allocates nothing
    command: Vec<u8>,
    /// a step sent (`send_step`) whose answer `step` reads
    pending: bool,
}

/// The set-up's Python: `$PPO_DETAILS_PYTHON`, else the virtual environment scripts/setup made (compiled in).
fn python() -> std::path::PathBuf {
    std::env::var_os("PPO_DETAILS_PYTHON")
        .map(Into::into)
        .unwrap_or_else(|| std::path::Path::new(env!("PPO_DETAILS_DEFAULT_VENV")).join("bin").join("python"))
}

impl Gymnasium {
    /// `gymnasium.make(id)` in a new Python process; the error is one line (an id Gymnasium does not know, a
    /// package it needs, a space no binary reads, no Python).
    pub fn new(id: &str) -> Result<Gymnasium, EnvError> {
        let python = python();
        let mut child = Command::new(&python)
            .args(["-c", WORKER, id])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| {
                EnvError(format!("{id}: cannot start {} for Gymnasium ({e}): run scripts/setup", python.display()))
            })?;
        let (stdin, stdout) = (child.stdin.take(), child.stdout.take());
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else { return Err(EnvError(format!("{id}: no pipes"))) };
        let mut stdout = BufReader::new(stdout);
        let mut line = String::new();
        stdout.read_line(&mut line).map_err(|e| EnvError(format!("{id}: Gymnasium's process: {e}")))?;
        let described: serde_json::Value = serde_json::from_str(&line)
            .map_err(|_| EnvError(format!("{id}: Gymnasium's process ended without a word (see above)")))?;
        if let Some(error) = described["error"].as_str() {
            let _ = child.wait();
            return Err(EnvError(error.to_string()));
        }
        let space = |v: &serde_json::Value| -> Option<Space> {
            if let Some(n) = v["discrete"].as_u64() {
                return Some(Space::Discrete(n as usize));
            }
            if let Some(nvec) = v["multi"].as_array() {
                return Some(Space::MultiDiscrete(nvec.iter().map(|n| n.as_u64().unwrap_or(0) as usize).collect()));
            }
            let [shape, low, high] = v["box"].as_array()?.as_slice() else { return None };
            let floats = |v: &serde_json::Value, infinite: f32| -> Option<Vec<f32>> {
                v.as_array()?
                    .iter()
                    .map(|x| if x.is_null() { Some(infinite) } else { x.as_f64().map(|x| x as f32) })
                    .collect()
            };
            let shape = shape.as_array()?.iter().map(|n| n.as_u64().map(|n| n as usize)).collect::<Option<_>>()?;
            Some(Space::Box { shape, low: floats(low, f32::NEG_INFINITY)?, high: floats(high, f32::INFINITY)? })
        };
        let garbled = || EnvError(format!("{id}: Gymnasium's process described its spaces as {line}"));
        let (act, obs_dim) = (space(&described["act"]).ok_or_else(garbled)?, described["obs_dim"].as_u64());
        let obs_dim = obs_dim.ok_or_else(garbled)? as usize;
        // the flattened observation: a Box's bounds as they are, a one-hot's in [0, 1]
        let observation_space = match space(&described["obs"]).ok_or_else(garbled)? {
            Space::Box { low, high, .. } if low.len() == obs_dim => Space::bounded_box(low, high),
            _ => Space::bounded_box(vec![0.0; obs_dim], vec![1.0; obs_dim]),
        };
        announce(id, &python);
        Ok(Gymnasium {
            id: id.to_string(),
            child,
            pipes: std::sync::Mutex::new((stdin, stdout)),
            observation_space,
            action_space: act,
            buf: Vec::new(),
            command: Vec::new(),
            pending: false,
        })
    }

    /// Sends one command and reads the observation into `obs`, then `extra` more bytes ([`Gymnasium::receive`]).
    fn call(&mut self, command: &[u8], obs: &mut [f32], extra: usize) -> &[u8] {
        self.send(command);
        self.receive(obs, extra)
    }

    fn send(&mut self, command: &[u8]) {
        let (stdin, _) = self.pipes.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        if stdin.write_all(command).and_then(|()| stdin.flush()).is_err() {
            self.die(format!("{}: Gymnasium's process ended (see above)", self.id));
        }
    }

    /// Reads the answer to the command sent: the observation into `obs`, then `extra` more bytes; a Python
    /// exception (or a process that died) ends the run: one line, exit code 2, the logs as they stood.
    fn receive(&mut self, obs: &mut [f32], extra: usize) -> &[u8] {
        let (_, stdout) = self.pipes.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut tag = [0u8];
        if stdout.read_exact(&mut tag).is_err() {
            self.die(format!("{}: Gymnasium's process ended (see above)", self.id));
        }
        if tag[0] == b'e' {
            let mut len = [0u8; 8];
            let _ = stdout.read_exact(&mut len);
            let mut msg = vec![0u8; u64::from_le_bytes(len) as usize];
            let _ = stdout.read_exact(&mut msg);
            self.die(String::from_utf8_lossy(&msg).into_owned());
        }
        self.buf.resize(4 * obs.len() + extra, 0);
        if stdout.read_exact(&mut self.buf).is_err() {
            self.die(format!("{}: Gymnasium's process ended mid-answer", self.id));
        }
        for (o, b) in obs.iter_mut().zip(self.buf.chunks_exact(4)) {
            *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        &self.buf[4 * obs.len()..]
    }

    fn die(&mut self, msg: String) -> ! {
        let _ = self.child.kill();
        let _ = std::io::stderr().write_all(format!("error: {msg}\n").as_bytes());
        std::process::exit(2)
    }
}

static IN_PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Records, once per process, that its envs run in Python: the device line says so ([`in_python`]).
fn announce(id: &str, python: &std::path::Path) {
    IN_PYTHON.get_or_init(|| format!("{id} runs in Gymnasium, one Python process per env ({})", python.display()));
}

/// Where this process's envs run in Python (an env made here by [`Gymnasium::new`]), in words; `None` if none does.
pub fn in_python() -> Option<&'static str> {
    IN_PYTHON.get().map(String::as_str)
}

impl Env for Gymnasium {
    type Obs = f32;

    fn observation_space(&self) -> Space {
        self.observation_space.clone()
    }

    fn action_space(&self) -> Space {
        self.action_space.clone()
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        let seed = seed.map_or(-1, |s| s.min(i64::MAX as u64) as i64);
        let command = [&b"r"[..], &seed.to_le_bytes()].concat();
        self.call(&command, obs, 0);
    }

    /// gymnasium's `render()` of an env made with `render_mode="rgb_array"` (`None` for one that draws nothing)
    fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        let mut pipes = self.pipes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (stdin, stdout) = &mut *pipes;
        stdin.write_all(b"v").and_then(|()| stdin.flush()).ok()?;
        let mut tag = [0u8];
        stdout.read_exact(&mut tag).ok()?;
        if tag[0] != b'f' {
            return None; // 'n': nothing drawn ('e', an exception: the next step says it)
        }
        let mut size = [0u8; 16];
        stdout.read_exact(&mut size).ok()?;
        let width = u64::from_le_bytes(size[..8].try_into().ok()?) as usize;
        let height = u64::from_le_bytes(size[8..].try_into().ok()?) as usize;
        rgb.resize(width * height * 3, 0);
        stdout.read_exact(rgb).ok()?;
        Some((width, height))
    }

    /// The step's command to Gymnasium's process; its answer is read by `step` (all envs' steps run at once).
    fn send_step(&mut self, action: Action) {
        let mut command = std::mem::take(&mut self.command);
        command.clear();
        command.push(b's');
        match action {
            Action::Discrete(a) => a.iter().for_each(|a| command.extend_from_slice(&a.to_le_bytes())),
            Action::Continuous(a) => a.iter().for_each(|a| command.extend_from_slice(&a.to_le_bytes())),
        }
        self.send(&command);
        self.command = command;
        self.pending = true;
    }

    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        if !self.pending {
            self.send_step(action);
        }
        self.pending = false;
        let tail = self.receive(obs, 10);
        let reward = f64::from_le_bytes(tail[..8].try_into().expect("8 bytes"));
        Step { reward, terminated: tail[8] != 0, truncated: tail[9] != 0, episode: None }
    }
}

impl Drop for Gymnasium {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
