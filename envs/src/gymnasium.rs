//! Gymnasium's envs, for the ids envs does not implement (and for any id as `gymnasium:<id>`): each env is a
//! Python process of the set-up's virtual environment running `gymnasium.make(id)`, stepped over its pipes, as
//! SB3's `SubprocVecEnv` steps its workers. Only such an env starts Python: a native env never does, and nothing
//! links libpython. Observations are flattened as gymnasium's `FlattenObservation` flattens a `Box`, `Discrete`
//! or `MultiDiscrete` observation (a `Discrete` one one-hot); actions are `Discrete`, `MultiDiscrete` or a `Box`.
//! MiniGrid's and BabyAI's ids (the `minigrid` package) get its `ImgObsWrapper`: the agent's 7x7x3 view, flattened.
//! An env read as images (`Gymnasium<u8>`, the Atari binaries' CNN) keeps its observation as it is, RGB bytes
//! (height, width, 3), and says its lives (ALE's `info["lives"]`) and whether FIRE is one of its actions.

use crate::{Action, Env, EnvError, Space, Step};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// What a Gymnasium id is prefixed with to run in Gymnasium where envs also implements it.
pub const PREFIX: &str = "gymnasium:";

/// The worker (its arguments: the id, "flat" or "images", the binary's name): reads a command from stdin (`r` and a
/// seed; `s` and an action, or `q` for a step whose observation is dropped; `v`, a frame for the video), writes the
/// observation (none after `q`), after a step the reward and the two flags, and last the lives (ALE's
/// `info["lives"]`, else 0) to stdout; its first line is the spaces as JSON, or an error.
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
env_id, images = sys.argv[1], sys.argv[2] == "images"
try:
    if env_id.startswith(("MiniGrid-", "BabyAI-")):
        import minigrid  # registers its ids
    elif env_id not in gym.registry:
        try:
            import ale_py  # registers ALE's ids (ALE/<Game>-v5, <Game>NoFrameskip-v4, ...)
            ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # not ALE's banner from every env's process
        except ImportError:
            pass
    def make(drawn):
        """gymnasium.make(id); drawn: with render_mode="rgb_array" (--capture-video's env), not otherwise, as
        CleanRL makes its envs: an env may cost more when it is to be drawn (LunarLander makes its flames' particles
        then, each a Box2D body: 4x slower steps)"""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                env = gym.make(env_id, render_mode="rgb_array") if drawn else gym.make(env_id)
            except TypeError:
                env = gym.make(env_id)  # an env that draws nothing
        if env_id.startswith(("MiniGrid-", "BabyAI-")):
            # MiniGrid's observation is a Dict with the mission's text: its own ImgObsWrapper keeps the agent's
            # 7x7x3 view (as miniDRL trains on it), flattened below
            env = minigrid.wrappers.ImgObsWrapper(env)
        return env
    env = make(drawn=False)
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
if images:
    # read as images: RGB bytes as they are (the binary resizes and grays them, as for ALE's screens)
    if not (isinstance(obs_space, spaces.Box) and obs_space.dtype == np.uint8 and len(obs_space.shape) == 3
            and obs_space.shape[2] == 3):
        fail(f"{env_id}'s observation space is {obs_space}: {sys.argv[3]} reads RGB images, a Box of uint8"
             " (height, width, 3) (a flat observation: ppo or ppo_continuous)")
    flat = lambda obs: np.ascontiguousarray(obs, dtype=np.uint8)
    meanings = getattr(env.unwrapped, "get_action_meanings", lambda: [])
    described["fire"] = "FIRE" in meanings()
else:
    flat = lambda obs: np.asarray(spaces.flatten(obs_space, obs), dtype=np.float32).ravel()
dim = flat(obs_space.sample()).size
described["obs_dim"] = int(dim)
out.write(json.dumps(described) + "\n"); out.flush()
stdin, stdout = sys.stdin.buffer, out.buffer
act = described["act"]
was_reset = False
lives = lambda info: int(info.get("lives", 0)) if isinstance(info, dict) else 0  # ALE's; 0 for other envs
while True:
    op = stdin.read(1)
    if not op:
        break
    try:
        if op == b"r":
            (seed,) = struct.unpack("<q", stdin.read(8))
            obs, info = env.reset(seed=None if seed < 0 else seed)
            was_reset = True
            stdout.write(b"o" + flat(obs).tobytes() + struct.pack("<q", lives(info)))
        elif op == b"v":
            if env.render_mode != "rgb_array" and not was_reset:
                env = make(drawn=True)  # RecordVideo asks before the first reset: the env is made again, drawn
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
            obs, reward, terminated, truncated, info = env.step(a)
            tail = struct.pack("<d??q", float(reward), bool(terminated), bool(truncated), lives(info))
            # 'q': a step whose observation the binary drops (a frame MaxAndSkip skips), not sent
            stdout.write(b"o" + (b"" if op == b"q" else flat(obs).tobytes()) + tail)
    except Exception as e:
        where = dict(r="reset", v="render").get(op.decode(), "step")
        msg = f"{env_id} raised in {where}: {type(e).__name__}: {e}".encode()
        stdout.write(b"e" + struct.pack("<q", len(msg)) + msg)
    stdout.flush()
"#;

/// What a Gymnasium env's observations are read as: `f32`, flattened (`FlattenObservation`), or `u8`, RGB images
/// as they are (the Atari binaries' CNN).
pub trait Observation: Copy + Default + Send + Sync + 'static {
    /// the worker's reading: "flat" or "images"
    const READ_AS: &'static str;
    /// one value's bytes on the pipe (little-endian)
    const BYTES: usize;
    fn from_le(bytes: &[u8]) -> Self;
}

impl Observation for f32 {
    const READ_AS: &'static str = "flat";
    const BYTES: usize = 4;
    fn from_le(bytes: &[u8]) -> f32 {
        f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }
}

impl Observation for u8 {
    const READ_AS: &'static str = "images";
    const BYTES: usize = 1;
    fn from_le(bytes: &[u8]) -> u8 {
        bytes[0]
    }
}

/// One Gymnasium env in its Python process, its observations read as `O`.
pub struct Gymnasium<O: Observation = f32> {
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
    /// the observation's values, and whether the answer awaited carries them (a step's may not: `step`)
    obs_len: usize,
    answer_has_obs: bool,
    /// the lives left after the last step (`info["lives"]`, ALE's; 0 for an env without)
    lives: u32,
    /// whether FIRE is one of the actions (an env read as images says; CleanRL's FireResetEnv asks)
    has_fire: bool,
    read_as: std::marker::PhantomData<O>,
}

/// The set-up's Python: `$PPO_DETAILS_PYTHON`, else the virtual environment scripts/setup made (compiled in).
fn python() -> std::path::PathBuf {
    std::env::var_os("PPO_DETAILS_PYTHON")
        .map(Into::into)
        .unwrap_or_else(|| std::path::Path::new(env!("PPO_DETAILS_DEFAULT_VENV")).join("bin").join("python"))
}

impl<O: Observation> Gymnasium<O> {
    /// `gymnasium.make(id)` in a new Python process; the error is one line (an id Gymnasium does not know, a
    /// package it needs, a space no binary reads, no Python).
    pub fn new(id: &str) -> Result<Gymnasium<O>, EnvError> {
        let python = python();
        // the binary, for the worker's refusal of a space it cannot read
        let bin = std::env::current_exe().ok().and_then(|p| Some(p.file_stem()?.to_string_lossy().into_owned()));
        let mut child = Command::new(&python)
            .args(["-c", WORKER, id, O::READ_AS, bin.as_deref().unwrap_or("this binary")])
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
        // the flattened observation: a Box's bounds as they are, a one-hot's in [0, 1]; images as they are
        let observation_space = match space(&described["obs"]).ok_or_else(garbled)? {
            image @ Space::Box { .. } if O::READ_AS == "images" => image,
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
            obs_len: obs_dim,
            answer_has_obs: true,
            lives: 0,
            has_fire: described["fire"] == true,
            read_as: std::marker::PhantomData,
        })
    }

    /// [`Gymnasium::new`] for an id envs does not implement: its error says so too, then Gymnasium's word.
    pub fn unknown_here(id: &str) -> Result<Gymnasium<O>, EnvError> {
        Gymnasium::new(id).map_err(|e| EnvError(format!("{}; as Gymnasium's: {e}", EnvError::unknown(id))))
    }

    /// Whether FIRE is one of the env's actions (`get_action_meanings()`, ALE's; an env read as images only).
    pub fn has_fire(&self) -> bool {
        self.has_fire
    }

    /// Sends one command and reads the observation into `obs`, then `extra` more bytes ([`Gymnasium::receive`]).
    fn call(&mut self, command: &[u8], obs: &mut [O], extra: usize) -> &[u8] {
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
    fn receive(&mut self, obs: &mut [O], extra: usize) -> &[u8] {
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
        let obs_bytes = if self.answer_has_obs { O::BYTES * self.obs_len } else { 0 };
        self.buf.resize(obs_bytes + extra, 0);
        if stdout.read_exact(&mut self.buf).is_err() {
            self.die(format!("{}: Gymnasium's process ended mid-answer", self.id));
        }
        // an empty `obs`: the caller drops the observation
        for (o, b) in obs.iter_mut().zip(self.buf[..obs_bytes].chunks_exact(O::BYTES)) {
            *o = O::from_le(b);
        }
        &self.buf[obs_bytes..]
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

impl<O: Observation> Env for Gymnasium<O> {
    type Obs = O;

    fn observation_space(&self) -> Space {
        self.observation_space.clone()
    }

    fn action_space(&self) -> Space {
        self.action_space.clone()
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [O]) {
        let seed = seed.map_or(-1, |s| s.min(i64::MAX as u64) as i64);
        let command = [&b"r"[..], &seed.to_le_bytes()].concat();
        self.answer_has_obs = true;
        let tail = self.call(&command, obs, 8);
        self.lives = lives(tail);
    }

    fn lives(&self) -> u32 {
        self.lives
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
        self.start_step(action, true);
    }

    fn step(&mut self, action: Action, obs: &mut [O]) -> Step {
        if !self.pending {
            self.start_step(action, !obs.is_empty());
        }
        self.pending = false;
        let tail = self.receive(obs, 18);
        let reward = f64::from_le_bytes(tail[..8].try_into().expect("8 bytes"));
        let (terminated, truncated) = (tail[8] != 0, tail[9] != 0);
        self.lives = lives(&tail[10..]);
        Step { reward, terminated, truncated, episode: None }
    }
}

impl<O: Observation> Gymnasium<O> {
    /// Sends the step's command: 's', or 'q' for a step whose observation the caller drops (not sent).
    fn start_step(&mut self, action: Action, with_obs: bool) {
        let mut command = std::mem::take(&mut self.command);
        command.clear();
        command.push(if with_obs { b's' } else { b'q' });
        match action {
            Action::Discrete(a) => a.iter().for_each(|a| command.extend_from_slice(&a.to_le_bytes())),
            Action::Continuous(a) => a.iter().for_each(|a| command.extend_from_slice(&a.to_le_bytes())),
        }
        self.send(&command);
        self.command = command;
        self.pending = true;
        self.answer_has_obs = with_obs;
    }
}

/// The lives an answer ends with (an i64), as `Env::lives` says them.
fn lives(tail: &[u8]) -> u32 {
    i64::from_le_bytes(tail[..8].try_into().expect("8 bytes")).clamp(0, u32::MAX as i64) as u32
}

impl<O: Observation> Drop for Gymnasium<O> {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
