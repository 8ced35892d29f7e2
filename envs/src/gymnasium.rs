//! Gymnasium's envs, for the ids envs does not implement (and for any id as `gymnasium:<id>`): each env is a
//! Python process of the set-up's virtual environment running `gymnasium.make(id)`, stepped over pipes of its own, as
//! SB3's `SubprocVecEnv` steps its workers. Only such an env starts Python: a native env never does, and nothing
//! links libpython. Observations are flattened as gymnasium's `FlattenObservation` flattens a `Box`, `Discrete`
//! or `MultiDiscrete` observation (a `Discrete` one one-hot); actions are `Discrete`, `MultiDiscrete` or a `Box`.
//! MiniGrid's and BabyAI's ids (the `minigrid` package) get its `ImgObsWrapper`: the agent's 7x7x3 view, flattened.
//! An env read as images (`Gymnasium<u8>`, the Atari binaries' CNN) keeps its observation as it is, RGB bytes
//! (height, width, 3), and says its lives (ALE's `info["lives"]`) and whether FIRE is one of its actions.
//!
//! What a worker does wrong ends the run with one line that starts with the reason, exit code 2: an exception,
//! an answer of the wrong size, a non-finite observation or reward, no answer within [`set_timeout`]'s limit, a
//! process that died, an action that does not fit the action space. The first failure ends the run, from any thread:
//! one line, once. No worker outlives the binary, nor does anything it starts: each worker runs in a process group of
//! its own, ended as a group on every exit path, and ignores Ctrl-C, which is the binary's to report.

use crate::{Action, Env, EnvError, Space, Step};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// What a Gymnasium id is prefixed with to run in Gymnasium where envs also implements it.
pub const PREFIX: &str = "gymnasium:";

/// The worker: a Python script, its protocol in its docstring. Commands and answers are framed alike: a tag, the
/// payload's size (a u64), the payload.
const WORKER: &str = include_str!("gymnasium_worker.py");

/// What a Gymnasium env's observations are read as: `f32`, flattened (`FlattenObservation`), or `u8`, RGB images
/// as they are (the Atari binaries' CNN).
pub trait Observation: Copy + Default + Send + Sync + std::fmt::Display + 'static {
    /// the worker's reading: "flat" or "images"
    const READ_AS: &'static str;
    /// one value's bytes on the pipe (little-endian)
    const BYTES: usize;
    fn from_le(bytes: &[u8]) -> Self;
    /// whether the value is a number (not NaN or an infinity): a byte always is
    fn is_finite(self) -> bool {
        true
    }
}

impl Observation for f32 {
    const READ_AS: &'static str = "flat";
    const BYTES: usize = 4;
    fn from_le(bytes: &[u8]) -> f32 {
        f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }
    fn is_finite(self) -> bool {
        f32::is_finite(self)
    }
}

impl Observation for u8 {
    const READ_AS: &'static str = "images";
    const BYTES: usize = 1;
    fn from_le(bytes: &[u8]) -> u8 {
        bytes[0]
    }
}

/// How long a worker may take to answer (`--env-timeout`), in nanoseconds.
static TIMEOUT_NS: AtomicU64 = AtomicU64::new(300_000_000_000);

/// The least a worker's start (Python's imports and `gymnasium.make`) may take, whatever [`set_timeout`] says.
const START_AT_LEAST: Duration = Duration::from_secs(60);

/// Sets how long a Gymnasium env's step, reset or render may take before the run ends, naming the env (300 s until
/// set); a worker's start may take this long too, and a minute at least.
pub fn set_timeout(limit: Duration) {
    TIMEOUT_NS.store(limit.as_nanos().min(u64::MAX as u128) as u64, Ordering::Relaxed);
}

/// A JSON object: `gymnasium.make`'s keyword arguments.
type Kwargs = serde_json::Map<String, serde_json::Value>;

/// The keyword arguments of `gymnasium.make` for the envs [`crate::make`] and [`crate::atari::Game::new`] make in
/// Gymnasium (`--env-kwargs`); none until set.
static KWARGS: Mutex<Option<Kwargs>> = Mutex::new(None);

/// A JSON object of keyword arguments, or the error that says it is none.
pub(crate) fn kwargs_object(json: &str) -> Result<Kwargs, EnvError> {
    serde_json::from_str(json)
        .map_err(|_| EnvError(format!("gymnasium.make's keyword arguments are a JSON object, not {json}")))
}

/// Sets the keyword arguments that [`crate::make`] and [`crate::atari::Game::new`] pass to `gymnasium.make`, a JSON
/// object (`{"continuous": true}`); anything else is an error, and nothing is set.
pub fn set_kwargs(kwargs: &str) -> Result<(), EnvError> {
    let kwargs = kwargs_object(kwargs)?;
    *KWARGS.lock().unwrap_or_else(PoisonError::into_inner) = Some(kwargs);
    Ok(())
}

/// The keyword arguments [`set_kwargs`] set, a JSON object (`{}` until set).
pub fn kwargs() -> String {
    let kwargs = KWARGS.lock().unwrap_or_else(PoisonError::into_inner);
    serde_json::Value::Object(kwargs.clone().unwrap_or_default()).to_string()
}

/// Whether [`set_kwargs`] set any keyword argument.
pub fn has_kwargs() -> bool {
    KWARGS.lock().unwrap_or_else(PoisonError::into_inner).as_ref().is_some_and(|k| !k.is_empty())
}

/// The error for keyword arguments given to an env that envs implements: Gymnasium's takes them.
pub(crate) fn native_takes_no_kwargs(id: &str) -> EnvError {
    EnvError(format!("--env-kwargs applies to Gymnasium's envs; {id} runs natively: give {PREFIX}{id}"))
}

/// `defaults` with `kwargs` over them (a key in both: `kwargs`' value), both JSON objects: an env's own keyword
/// arguments (ALE's v5 ids: `{"frameskip": 1}`) and the user's.
pub fn merge_kwargs(defaults: &str, kwargs: &str) -> Result<String, EnvError> {
    let mut merged = kwargs_object(defaults)?;
    merged.extend(kwargs_object(kwargs)?);
    Ok(serde_json::Value::Object(merged).to_string())
}

/// What a worker is asked to do, for the limit on its answer and the line that names a failure.
#[derive(Clone, Copy, PartialEq, Debug)]
enum What {
    Start,
    Reset,
    Step,
    Render,
}

impl What {
    fn limit(self) -> Duration {
        let limit = Duration::from_nanos(TIMEOUT_NS.load(Ordering::Relaxed));
        if self == What::Start {
            limit.max(START_AT_LEAST)
        } else {
            limit
        }
    }

    fn name(self) -> &'static str {
        match self {
            What::Start => "start",
            What::Reset => "reset",
            What::Step => "step",
            What::Render => "render",
        }
    }

    /// When in the env's life: "at step 12", "at its reset after step 12", "at its start".
    fn when(self, steps: u64) -> String {
        match self {
            What::Step => format!("at step {steps}"),
            What::Start => "at its start".into(),
            other => format!("at its {} after step {steps}", other.name()),
        }
    }
}

/// Seconds as a person writes them: "60 s", "0.5 s".
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s} s")
    }
}

/// The workers alive, each the leader of its process group, for [`die`] to end them before the binary.
static WORKERS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Ends a worker's process group: the worker, its guard and whatever the env started.
fn end_group(pid: u32) {
    // SAFETY: a signal to a group of ours; its leader is not reaped yet, so the id is not reused
    unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
}

/// Ends the run for a worker's failure: every worker's group killed, one line, exit code 2, the logs as they stood.
/// The first failure alone is told: a second thread that fails waits here for the end. `_exit` runs no exit
/// handler while other threads run on.
fn die(msg: String) -> ! {
    static DYING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if DYING.swap(true, Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    for &pid in WORKERS.lock().unwrap_or_else(PoisonError::into_inner).iter() {
        end_group(pid);
    }
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().write_all(format!("error: {msg}\n").as_bytes());
    // SAFETY: ends the process; nothing of it runs afterwards
    unsafe { libc::_exit(2) }
}

/// A Python message in one line (an exception's may hold several).
fn one_line(msg: &[u8]) -> String {
    String::from_utf8_lossy(msg).lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// A pipe, both ends closed on exec (each worker's child end is opened for it alone, in [`in_the_child`]): no
/// worker holds another's pipe open, so that a worker's end is its pipe's end.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two new fds into the array, owned from here on
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the fds are new and this function's alone
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Between fork and exec, in the worker: it dies with the binary (SIGKILL when the thread that spawned it ends, the
/// spawner thread that lives as long as the process; it exits at once if the binary ended already), ignores
/// SIGINT (Ctrl-C is the binary's to report), and keeps its pipe ends across exec. Only async-signal-safe calls.
fn in_the_child(parent: libc::pid_t, fds: [RawFd; 3]) -> std::io::Result<()> {
    // SAFETY: calls on this process's own state, each async-signal-safe
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::getppid() != parent {
            libc::_exit(0); // the binary ended before the prctl: no one to answer
        }
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        for fd in fds {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Spawns `command` from a thread that lives as long as the process: `PR_SET_PDEATHSIG` fires when the thread that
/// spawned a child ends, not only the process, and envs may be made on threads that end before the binary.
fn spawn(mut command: Command) -> std::io::Result<Child> {
    type Job = (Command, mpsc::Sender<std::io::Result<Child>>);
    static SPAWNER: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, inbox) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new().name("gymnasium-spawner".into()).spawn(move || {
            for (mut command, reply) in inbox {
                let _ = reply.send(command.spawn());
            }
        });
        thread.ok().map(|_| jobs)
    });
    let Some(spawner) = spawner else { return command.spawn() }; // no thread: this one (it may end first)
    let (reply, answer) = mpsc::channel();
    let gone = || std::io::Error::other("the thread that starts the workers ended");
    spawner.send((command, reply)).map_err(|_| gone())?;
    answer.recv().map_err(|_| gone())?
}

/// Why a worker's answer did not come.
enum Broken {
    Timeout,
    Ended,
    Failed(std::io::Error),
}

/// A worker's answers: its pipe, read once poll(2) says it holds bytes (a worker that hangs is named), through a
/// buffer (an answer usually comes in one read).
struct Answers {
    file: File,
    buf: Vec<u8>,
    start: usize,
    end: usize,
}

impl Answers {
    /// The next `n` bytes (their place in `buf`, valid until the next call), waiting for them until `deadline`.
    fn take(&mut self, n: usize, deadline: Instant) -> Result<std::ops::Range<usize>, Broken> {
        if self.end - self.start < n && self.start + n > self.buf.len() {
            self.buf.copy_within(self.start..self.end, 0);
            (self.end, self.start) = (self.end - self.start, 0);
            if n > self.buf.len() {
                self.buf.resize(n, 0);
            }
        }
        while self.end - self.start < n {
            wait_for(&self.file, deadline)?;
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => return Err(Broken::Ended),
                Ok(read) => self.end += read,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Broken::Failed(e)),
            }
        }
        let at = self.start;
        self.start += n;
        if self.start == self.end {
            (self.start, self.end) = (0, 0); // the bytes stay where they are until the next read
        }
        Ok(at..at + n)
    }
}

/// Waits until `file` can be read (bytes, or its end) or `deadline` passes.
fn wait_for(file: &File, deadline: Instant) -> Result<(), Broken> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Broken::Timeout);
        }
        let mut poll = libc::pollfd { fd: file.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // the milliseconds left, rounded up: no early wake-up that busy-waits
        let ms = left.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one pollfd, valid for the call
        match unsafe { libc::poll(&mut poll, 1, ms) } {
            0 => {} // time is up: the loop says so
            n if n > 0 => return Ok(()),
            _ => match std::io::Error::last_os_error() {
                e if e.kind() == std::io::ErrorKind::Interrupted => {}
                e => return Err(Broken::Failed(e)),
            },
        }
    }
}

/// What a worker said its env is (its `d` answer), the same for every env of an id.
struct Description {
    json: Vec<u8>,
    observation_space: Space,
    action_space: Space,
    obs_dim: usize,
    has_fire: bool,
}

/// The descriptions of the ids made so far (with their reading and `gymnasium.make`'s arguments): a second env of
/// an id does not wait for its worker to start (workers start at once), its worker's description is checked
/// against the first's when it first answers.
static DESCRIBED: Mutex<Vec<(String, Arc<Description>)>> = Mutex::new(Vec::new());

/// Why an env could not be made: an id Gymnasium does not know, or anything else.
enum Failure {
    Unknown(String),
    Other(String),
}

/// One env's Python process and its pipes.
struct Worker {
    id: String,
    child: Child,
    commands: File,
    answers: Answers,
    /// the lifeline's end: the worker's guard ends the group when it closes, with the binary at the latest
    _lifeline: OwnedFd,
    /// the description this worker is yet to send, to be checked against that of the first env of its id
    unchecked: Option<Arc<Description>>,
}

impl Worker {
    /// Starts `gymnasium.make(id, **kwargs)` in a new Python process; its description is yet to be read.
    fn spawn(id: &str, read_as: &str, kwargs: &str) -> Result<Worker, EnvError> {
        let python = python();
        let cannot = |e: std::io::Error| {
            EnvError(format!("cannot start Python: {} for Gymnasium's {id} ({e}): run scripts/setup", python.display()))
        };
        // the binary, for the worker's refusal of a space it cannot read
        let bin = std::env::current_exe().ok().and_then(|p| Some(p.file_stem()?.to_string_lossy().into_owned()));
        let (commands_theirs, commands) = pipe().map_err(cannot)?;
        let (answers, answers_theirs) = pipe().map_err(cannot)?;
        let (lifeline_theirs, lifeline) = pipe().map_err(cannot)?;
        let theirs = [commands_theirs.as_raw_fd(), answers_theirs.as_raw_fd(), lifeline_theirs.as_raw_fd()];
        let parent = std::process::id() as libc::pid_t;
        let mut command = Command::new(&python);
        command
            .args(["-c", WORKER, id, read_as, bin.as_deref().unwrap_or("this binary"), kwargs])
            .args(theirs.map(|fd| fd.to_string()))
            .arg(parent.to_string())
            .stdin(Stdio::null())
            // what Python prints before the worker's first line (a site package's greeting) goes to stderr too
            .stdout(Stdio::from(std::io::stderr()))
            .stderr(Stdio::inherit())
            // a group of its own: the worker and all it starts end together
            .process_group(0);
        // SAFETY: in_the_child makes only async-signal-safe calls
        unsafe { command.pre_exec(move || in_the_child(parent, theirs)) };
        let child = spawn(command).map_err(cannot)?;
        // the worker's ends are its own now: its end is the answers' end
        drop((commands_theirs, answers_theirs, lifeline_theirs));
        WORKERS.lock().unwrap_or_else(PoisonError::into_inner).push(child.id());
        let answers = Answers { file: answers.into(), buf: vec![0; 1 << 16], start: 0, end: 0 };
        let commands = commands.into();
        Ok(Worker { id: id.to_string(), child, commands, answers, _lifeline: lifeline, unchecked: None })
    }

    /// The next answer's tag and its payload's place in `answers.buf`.
    fn next(&mut self, what: What) -> Result<(u8, std::ops::Range<usize>), Broken> {
        let now = Instant::now();
        let deadline = now.checked_add(what.limit()).unwrap_or(now + Duration::from_secs(1 << 32));
        let head = self.answers.take(9, deadline)?;
        let head = &self.answers.buf[head];
        let (tag, len) = (head[0], u64::from_le_bytes(head[1..9].try_into().unwrap_or([0; 8])));
        if len > 1 << 34 {
            // no answer is 16 GiB: the pipe is out of step (which the tags and sizes should make impossible)
            return Err(Broken::Failed(std::io::Error::other(format!("an answer '{}' of {len} bytes", tag as char))));
        }
        Ok((tag, self.answers.take(len as usize, deadline)?))
    }

    /// How the process ended, once it has (a second at most), for the line that says it ended.
    fn status(&mut self) -> String {
        for _ in 0..100 {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.to_string();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        "still running".into()
    }

    /// Why the answer did not come, in one line.
    fn broken(&mut self, broken: Broken, what: What, steps: u64) -> String {
        let status = if matches!(broken, Broken::Ended) { self.status() } else { String::new() };
        let (id, when) = (&self.id, what.when(steps));
        match broken {
            Broken::Timeout if what == What::Start => {
                format!(
                    "timeout: {id} did not start within {} (Python's imports and gymnasium.make)",
                    seconds(what.limit())
                )
            }
            Broken::Timeout => {
                format!("timeout: {id} did not answer a {} within {} ({when})", what.name(), seconds(what.limit()))
            }
            Broken::Ended => {
                format!("worker ended: {id}'s Python process ended {when} ({status}; its stderr is above)")
            }
            Broken::Failed(e) => format!("pipe failed: {id}'s worker {when}: {e}"),
        }
    }

    /// Reads the worker's description (its first answer) while the env is made: its failure is the error.
    fn describe(&mut self, images: bool) -> Result<Description, Failure> {
        let (tag, payload) = self.next(What::Start).map_err(|b| Failure::Other(self.broken(b, What::Start, 0)))?;
        let payload = self.answers.buf[payload].to_vec();
        match tag {
            b'd' => {}
            b'u' => return Err(Failure::Unknown(one_line(&payload))),
            b'e' => return Err(Failure::Other(one_line(&payload))),
            other => return Err(Failure::Other(garbled(&self.id, other, payload.len(), What::Start))),
        }
        let bad = || {
            Failure::Other(format!(
                "garbled answer: {}'s worker described its spaces as {}",
                self.id,
                one_line(&payload)
            ))
        };
        let described: serde_json::Value = serde_json::from_slice(&payload).map_err(|_| bad())?;
        let (act, obs_dim) = (space(&described["act"]).ok_or_else(bad)?, described["obs_dim"].as_u64());
        let obs_dim = obs_dim.ok_or_else(bad)? as usize;
        let obs = space(&described["obs"]).ok_or_else(bad)?;
        // the flattened observation: a Box's bounds as they are, a one-hot's in [0, 1]; images as they are
        let observation_space = match obs {
            image @ Space::Box { .. } if images => image,
            Space::Box { low, high, .. } if low.len() == obs_dim => Space::bounded_box(low, high),
            _ => Space::bounded_box(vec![0.0; obs_dim], vec![1.0; obs_dim]),
        };
        let has_fire = described["fire"] == true;
        Ok(Description { json: payload, observation_space, action_space: act, obs_dim, has_fire })
    }

    fn send(&mut self, command: &[u8], what: What, steps: u64) {
        if self.commands.write_all(command).is_err() {
            let line = self.broken(Broken::Ended, what, steps);
            die(line);
        }
    }

    /// The answer to the command sent, its tag and payload's place; a description this worker is yet to send comes
    /// first, checked. A failure ends the run: an exception (one line naming the env and the step), no answer in
    /// time, a process that ended.
    fn receive(&mut self, what: What, steps: u64) -> (u8, std::ops::Range<usize>) {
        if let Some(first) = self.unchecked.take() {
            let (tag, payload) = self.next(What::Start).unwrap_or_else(|b| die(self.broken(b, What::Start, steps)));
            let payload = &self.answers.buf[payload];
            match tag {
                b'd' if payload == first.json.as_slice() => {}
                b'd' => die(format!(
                    "different spaces: {}'s env described {} where its first env described {}",
                    self.id,
                    one_line(payload),
                    one_line(&first.json)
                )),
                b'u' | b'e' => die(one_line(payload)),
                other => die(garbled(&self.id, other, payload.len(), What::Start)),
            }
        }
        let (tag, payload) = self.next(what).unwrap_or_else(|b| die(self.broken(b, what, steps)));
        if tag == b'x' {
            let refused = one_line(&self.answers.buf[payload]);
            die(format!("out of step: {}'s worker refused {refused} ({})", self.id, what.when(steps)));
        }
        if tag == b'e' {
            let raised = one_line(&self.answers.buf[payload]);
            die(format!("exception in {}: {} raised {raised} ({})", what.name(), self.id, what.when(steps)));
        }
        (tag, payload)
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let pid = self.child.id();
        WORKERS.lock().unwrap_or_else(PoisonError::into_inner).retain(|&p| p != pid);
        end_group(pid);
        let _ = self.child.wait();
    }
}

/// An answer out of step with the command: its tag and size.
fn garbled(id: &str, tag: u8, len: usize, what: What) -> String {
    format!("garbled answer: {id}'s worker answered '{}' ({len} bytes) to a {}", tag.escape_ascii(), what.name())
}

/// A space as the worker describes it (JSON).
fn space(v: &serde_json::Value) -> Option<Space> {
    if let Some(n) = v["discrete"].as_u64() {
        return Some(Space::Discrete(n as usize));
    }
    if let Some(nvec) = v["multi"].as_array() {
        return Some(Space::MultiDiscrete(nvec.iter().map(|n| n.as_u64().unwrap_or(0) as usize).collect()));
    }
    let [shape, low, high] = v["box"].as_array()?.as_slice() else { return None };
    let floats = |v: &serde_json::Value, infinite: f32| -> Option<Vec<f32>> {
        v.as_array()?.iter().map(|x| if x.is_null() { Some(infinite) } else { x.as_f64().map(|x| x as f32) }).collect()
    };
    let shape = shape.as_array()?.iter().map(|n| n.as_u64().map(|n| n as usize)).collect::<Option<_>>()?;
    Some(Space::Box { shape, low: floats(low, f32::NEG_INFINITY)?, high: floats(high, f32::INFINITY)? })
}

/// One Gymnasium env in its Python process, its observations read as `O`.
pub struct Gymnasium<O: Observation = f32> {
    /// behind a lock for `render` (which gets `&self`; a step, `&mut self`, takes it without locking)
    worker: Mutex<Worker>,
    description: Arc<Description>,
    /// the step's command, kept: a step allocates nothing
    command: Vec<u8>,
    /// a step sent (`send_step`) whose answer `step` reads
    pending: bool,
    /// whether the answer awaited carries the observation (a step's may not: `step`)
    answer_has_obs: bool,
    /// the steps since the env was made, for the lines that name one
    steps: u64,
    /// the lives left after the last step (`info["lives"]`, ALE's; 0 for an env without)
    lives: u32,
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
    /// package it needs, a space no binary reads, no Python). The first env of an id waits for its process to
    /// describe the env; the next ones start at once, their processes starting in parallel (a failure there ends
    /// the run at their first answer).
    pub fn new(id: &str) -> Result<Gymnasium<O>, EnvError> {
        Gymnasium::new_with(id, "{}")
    }

    /// [`Gymnasium::new`] with `gymnasium.make`'s keyword arguments, a JSON object (`{"frameskip": 1}`).
    pub fn new_with(id: &str, kwargs: &str) -> Result<Gymnasium<O>, EnvError> {
        Gymnasium::start(id, kwargs).map_err(|failure| match failure {
            Failure::Unknown(why) => EnvError(format!("unknown env id '{id}' in Gymnasium: {why}")),
            Failure::Other(why) => EnvError(why),
        })
    }

    /// [`Gymnasium::new`] for an id envs does not implement: for an id Gymnasium does not know either, the error
    /// says so and lists envs' own ids; any other is Gymnasium's alone.
    pub fn unknown_here(id: &str) -> Result<Gymnasium<O>, EnvError> {
        Gymnasium::unknown_here_with(id, "{}")
    }

    /// [`Gymnasium::unknown_here`] with `gymnasium.make`'s keyword arguments, a JSON object.
    pub fn unknown_here_with(id: &str, kwargs: &str) -> Result<Gymnasium<O>, EnvError> {
        Gymnasium::start(id, kwargs).map_err(|failure| match failure {
            Failure::Unknown(why) => {
                EnvError(format!("unknown env id '{id}' (as Gymnasium's: {why}); known ids: {}", crate::ids::all()))
            }
            Failure::Other(why) => EnvError(why),
        })
    }

    fn start(id: &str, kwargs: &str) -> Result<Gymnasium<O>, Failure> {
        let key = format!("{id}\n{}\n{kwargs}", O::READ_AS);
        let known = DESCRIBED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, d)| d.clone());
        let mut worker = Worker::spawn(id, O::READ_AS, kwargs).map_err(|e| Failure::Other(e.0))?;
        let description = match known {
            Some(first) => {
                worker.unchecked = Some(first.clone());
                first
            }
            None => {
                let description = Arc::new(worker.describe(O::READ_AS == "images")?);
                DESCRIBED.lock().unwrap_or_else(PoisonError::into_inner).push((key, description.clone()));
                description
            }
        };
        announce(id, &python());
        Ok(Gymnasium {
            worker: Mutex::new(worker),
            description,
            command: Vec::new(),
            pending: false,
            answer_has_obs: true,
            steps: 0,
            lives: 0,
            read_as: std::marker::PhantomData,
        })
    }

    /// Whether FIRE is one of the env's actions (`get_action_meanings()`, ALE's; an env read as images only).
    pub fn has_fire(&self) -> bool {
        self.description.has_fire
    }

    /// Reads the answer to a reset (`r`) or step (`s`): the observation into `obs` (an empty `obs`: the caller
    /// drops it), checked for its size and its values; returns the `head` bytes before it. A failure ends the run.
    fn receive(&mut self, what: What, head: usize, obs: &mut [O]) -> [u8; 18] {
        let (steps, obs_len) = (self.steps, if self.answer_has_obs { self.description.obs_dim } else { 0 });
        let worker = self.worker.get_mut().unwrap_or_else(PoisonError::into_inner);
        let (tag, payload) = worker.receive(what, steps);
        let (id, when) = (&worker.id, what.when(steps));
        let payload = &worker.answers.buf[payload];
        if tag != if what == What::Reset { b'r' } else { b's' } {
            die(garbled(id, tag, payload.len(), what));
        }
        if payload.len() != head + obs_len * O::BYTES {
            match payload.len().checked_sub(head) {
                Some(values) if obs_len > 0 && values % O::BYTES == 0 => die(format!(
                    "wrong observation size: {id} returned an observation of {} values {when}; its space has {obs_len}",
                    values / O::BYTES
                )),
                _ => die(garbled(id, tag, payload.len(), what)),
            }
        }
        for (o, b) in obs.iter_mut().zip(payload[head..].chunks_exact(O::BYTES)) {
            *o = O::from_le(b);
        }
        if let Some(i) = obs.iter().position(|o| !o.is_finite()) {
            let value = obs[i].to_string().to_lowercase();
            die(format!("non-finite observation: {id} returned {value} {when} (value {} of {obs_len})", i + 1));
        }
        let mut out = [0u8; 18];
        out[..head].copy_from_slice(&payload[..head]);
        out
    }
}

/// Says once per process, at the first env made here by [`Gymnasium::new`], that its envs run in Python.
fn announce(id: &str, python: &std::path::Path) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| println!("env: {id} runs in Gymnasium, one Python process per env ({})", python.display()));
}

impl<O: Observation> Env for Gymnasium<O> {
    type Obs = O;

    fn observation_space(&self) -> Space {
        self.description.observation_space.clone()
    }

    fn action_space(&self) -> Space {
        self.description.action_space.clone()
    }

    /// The seed as it is, a u64 (a flag byte says whether there is one). A step sent and not read is read first.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [O]) {
        if self.pending {
            self.read_step(&mut []);
        }
        let mut command = Vec::with_capacity(18);
        head(&mut command, b'r', 9);
        command.push(seed.is_some() as u8);
        command.extend_from_slice(&seed.unwrap_or(0).to_le_bytes());
        let steps = self.steps;
        self.worker.get_mut().unwrap_or_else(PoisonError::into_inner).send(&command, What::Reset, steps);
        self.answer_has_obs = true;
        let head = self.receive(What::Reset, 8, obs);
        self.lives = lives(&head[..8]);
    }

    fn lives(&self) -> u32 {
        self.lives
    }

    /// gymnasium's `render()` of an env made with `render_mode="rgb_array"` (`None` for one that draws nothing);
    /// an exception ends the run, as a step's does.
    fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        let mut worker = self.worker.lock().unwrap_or_else(PoisonError::into_inner);
        let mut command = Vec::with_capacity(9);
        head(&mut command, b'v', 0);
        worker.send(&command, What::Render, self.steps);
        let (tag, payload) = worker.receive(What::Render, self.steps);
        let payload = &worker.answers.buf[payload];
        match tag {
            b'n' if payload.is_empty() => None,
            b'f' if payload.len() >= 16 => {
                let width = u64::from_le_bytes(payload[..8].try_into().ok()?) as usize;
                let height = u64::from_le_bytes(payload[8..16].try_into().ok()?) as usize;
                if payload.len() - 16 != width * height * 3 {
                    let (id, bytes) = (&worker.id, payload.len() - 16);
                    die(format!("wrong frame size: {id} drew {bytes} bytes for a frame of {width}x{height}x3"));
                }
                rgb.clear();
                rgb.extend_from_slice(&payload[16..]);
                Some((width, height))
            }
            other => die(garbled(&worker.id, other, payload.len(), What::Render)),
        }
    }

    /// The step's command to Gymnasium's process; its answer is read by `step` (all envs' steps run at once).
    fn send_step(&mut self, action: Action) {
        self.start_step(action, true);
    }

    fn step(&mut self, action: Action, obs: &mut [O]) -> Step {
        if !self.pending {
            self.start_step(action, !obs.is_empty());
        }
        self.read_step(obs)
    }
}

impl<O: Observation> Gymnasium<O> {
    /// Reads the answer to the step sent: the observation into `obs`, the reward, the flags and the lives.
    fn read_step(&mut self, obs: &mut [O]) -> Step {
        self.pending = false;
        self.steps += 1;
        let head = self.receive(What::Step, 18, obs);
        let reward = f64::from_le_bytes(head[..8].try_into().unwrap_or([0; 8]));
        if !reward.is_finite() {
            let id = &self.worker.get_mut().unwrap_or_else(PoisonError::into_inner).id;
            let value = reward.to_string().to_lowercase();
            die(format!("non-finite reward: {id} returned {value} at step {}", self.steps));
        }
        let (terminated, truncated) = (head[8] != 0, head[9] != 0);
        self.lives = lives(&head[10..]);
        Step { reward, terminated, truncated, episode: None }
    }

    /// Sends the step's command: 's', or 'q' for a step whose observation the caller drops (not sent). An action
    /// that does not fit the action space ends the run, naming the env and both sizes.
    fn start_step(&mut self, action: Action, with_obs: bool) {
        let space = &self.description.action_space;
        let fits = match (space, &action) {
            (Space::Discrete(_), Action::Discrete(a)) => a.len() == 1,
            (Space::MultiDiscrete(nvec), Action::Discrete(a)) => a.len() == nvec.len(),
            (Space::Box { low, .. }, Action::Continuous(a)) => a.len() == low.len(),
            _ => false,
        };
        if !fits {
            let id = &self.worker.get_mut().unwrap_or_else(PoisonError::into_inner).id;
            let kind = |continuous: bool| if continuous { "continuous" } else { "discrete" };
            let takes = values(space.flat_dim(), kind(matches!(space, Space::Box { .. })));
            let sent = match action {
                Action::Discrete(a) => values(a.len(), kind(false)),
                Action::Continuous(a) => values(a.len(), kind(true)),
            };
            die(format!("wrong action: {id} takes {takes} ({space}); it was sent {sent}"));
        }
        let mut command = std::mem::take(&mut self.command);
        command.clear();
        match action {
            Action::Discrete(a) => {
                head(&mut command, if with_obs { b's' } else { b'q' }, 8 * a.len());
                a.iter().for_each(|a| command.extend_from_slice(&a.to_le_bytes()))
            }
            Action::Continuous(a) => {
                head(&mut command, if with_obs { b's' } else { b'q' }, 4 * a.len());
                a.iter().for_each(|a| command.extend_from_slice(&a.to_le_bytes()))
            }
        }
        // the step's number, for a line about a failure here: the step `step` will count
        let steps = self.steps + 1;
        self.worker.get_mut().unwrap_or_else(PoisonError::into_inner).send(&command, What::Step, steps);
        self.command = command;
        self.pending = true;
        self.answer_has_obs = with_obs;
    }
}

/// "1 discrete value", "2 continuous values".
fn values(n: usize, kind: &str) -> String {
    format!("{n} {kind} value{}", if n == 1 { "" } else { "s" })
}

/// A command's head: its tag and its payload's size in bytes (a u64).
fn head(command: &mut Vec<u8>, tag: u8, size: usize) {
    command.push(tag);
    command.extend_from_slice(&(size as u64).to_le_bytes());
}

/// The lives an answer holds (an i64), as `Env::lives` says them.
fn lives(bytes: &[u8]) -> u32 {
    i64::from_le_bytes(bytes[..8].try_into().unwrap_or([0; 8])).clamp(0, u32::MAX as i64) as u32
}

#[cfg(test)]
mod tests {
    use super::{set_timeout, What};
    use std::time::Duration;

    /// A limit under a millisecond is kept as it is, not read as 0; a start still gets a minute.
    #[test]
    fn a_limit_under_a_millisecond_is_kept() {
        set_timeout(Duration::from_micros(500));
        let limits = (What::Step.limit(), What::Start.limit());
        set_timeout(Duration::from_secs(300));
        assert_eq!(limits, (Duration::from_micros(500), Duration::from_secs(60)));
    }
}
