//! MuJoCo locomotion envs with gymnasium's v4 semantics, on the real MuJoCo library.
//!
//! `libmujoco.so.3.17.0` (from the PyPI `mujoco` wheel, which scripts/setup installs) is opened
//! at run time with `dlopen`, so binaries start without it and a missing library is a one-line
//! error, not a loader failure. We call only MuJoCo's C functions, never touch its structs:
//! positions, velocities and controls go in and out through `mj_getState`/`mj_setState`. The
//! model XML files are gymnasium's own (`gymnasium/envs/mujoco/assets`), read at run time.
//!
//! Checked against gymnasium 0.29.1 + mujoco 3.17.0 in `tests/mujoco.rs`.

use crate::{Action, Env, EnvError, Space, Step};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::OnceLock;

/// The MuJoCo release whose library we load and whose results the parity test pins.
const MJ_VERSION: c_int = 3017000;
const LIB_NAME: &str = "libmujoco.so.3.17.0";
// mjtState bits (mjtype.h): the state components mj_getState/mj_setState move
const STATE_QPOS: c_int = 1 << 1;
const STATE_QVEL: c_int = 1 << 2;
const STATE_CTRL: c_int = 1 << 6;

/// Gymnasium's v4 settings for each env: model file, frame skip and reward/termination terms.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Task {
    HalfCheetah,
    Hopper,
    Walker2d,
    InvertedPendulum,
}

struct Spec {
    id: &'static str,
    task: Task,
    xml: &'static str,
    frame_skip: u32,
    /// actuator ctrlrange of the XML (gymnasium's action space), the same for every actuator
    action_bound: f32,
    ctrl_cost_weight: f64,
    reset_noise: f64,
}

const SPECS: &[Spec] = &[
    Spec {
        id: "HalfCheetah-v4",
        task: Task::HalfCheetah,
        xml: "half_cheetah.xml",
        frame_skip: 5,
        action_bound: 1.0,
        ctrl_cost_weight: 0.1,
        reset_noise: 0.1,
    },
    Spec {
        id: "Hopper-v4",
        task: Task::Hopper,
        xml: "hopper.xml",
        frame_skip: 4,
        action_bound: 1.0,
        ctrl_cost_weight: 1e-3,
        reset_noise: 5e-3,
    },
    Spec {
        id: "Walker2d-v4",
        task: Task::Walker2d,
        xml: "walker2d.xml",
        frame_skip: 4,
        action_bound: 1.0,
        ctrl_cost_weight: 1e-3,
        reset_noise: 5e-3,
    },
    Spec {
        id: "InvertedPendulum-v4",
        task: Task::InvertedPendulum,
        xml: "inverted_pendulum.xml",
        frame_skip: 2,
        action_bound: 3.0,
        ctrl_cost_weight: 0.0,
        reset_noise: 0.01,
    },
];

/// The MuJoCo env ids `make` knows (all truncated at 1000 steps, as gymnasium registers them).
pub const IDS: [&str; 4] = [SPECS[0].id, SPECS[1].id, SPECS[2].id, SPECS[3].id];

type Model = c_void;
type Data = c_void;

/// The C functions we use, resolved once per process.
struct Api {
    load_xml: unsafe extern "C" fn(*const c_char, *const c_void, *mut c_char, c_int) -> *mut Model,
    make_data: unsafe extern "C" fn(*const Model) -> *mut Data,
    delete_data: unsafe extern "C" fn(*mut Data),
    delete_model: unsafe extern "C" fn(*mut Model),
    reset_data: unsafe extern "C" fn(*const Model, *mut Data),
    forward: unsafe extern "C" fn(*const Model, *mut Data),
    step: unsafe extern "C" fn(*const Model, *mut Data),
    state_size: unsafe extern "C" fn(*const Model, c_int) -> c_int,
    get_state: unsafe extern "C" fn(*const Model, *const Data, *mut f64, c_int),
    set_state: unsafe extern "C" fn(*const Model, *mut Data, *const f64, c_int),
}

extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}
const RTLD_NOW: c_int = 2;

/// Where the library is: `$MUJOCO_DIR`, else the `.mujoco` link scripts/setup made (compiled in).
fn lib_dir() -> PathBuf {
    std::env::var_os("MUJOCO_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("PPO_DETAILS_DEFAULT_MUJOCO_DIR")))
}

/// Where gymnasium's model files are: `$MUJOCO_ASSETS_DIR`, else the `.mujoco-assets` link.
fn assets_dir() -> PathBuf {
    std::env::var_os("MUJOCO_ASSETS_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("PPO_DETAILS_DEFAULT_MUJOCO_ASSETS")))
}

/// MuJoCo's default handlers print to stdout and append to MUJOCO_LOG.TXT in the working
/// directory; ours print one line to stderr. The only warning gymnasium's v4 models give
/// (half_cheetah.xml's deprecated `settotalmass`) is harmless and silenced.
extern "C" fn on_warning(msg: *const c_char) {
    let msg = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
    if !msg.contains("'settotalmass' is deprecated") {
        eprintln!("warning: MuJoCo: {}", msg.trim());
    }
}

extern "C" fn on_error(msg: *const c_char) {
    let msg = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
    eprintln!("error: MuJoCo: {}", msg.trim());
    std::process::exit(1);
}

/// A symbol's address as the function pointer type it has in mujoco.h.
unsafe fn cast<F: Copy>(symbol: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    std::mem::transmute_copy(&symbol)
}

fn api() -> Result<&'static Api, EnvError> {
    static API: OnceLock<Result<Api, EnvError>> = OnceLock::new();
    API.get_or_init(load_api).as_ref().map_err(Clone::clone)
}

fn load_api() -> Result<Api, EnvError> {
    let path = lib_dir().join(LIB_NAME);
    let fix = "run scripts/setup, or set MUJOCO_DIR to a folder holding it (pip install mujoco==3.17.0 puts it in site-packages/mujoco)";
    if !path.is_file() {
        return Err(EnvError(format!("MuJoCo library {} not found: {fix}", path.display())));
    }
    let c_path = CString::new(path.to_string_lossy().as_bytes()).map_err(|_| EnvError(format!("bad MuJoCo path {}", path.display())))?;
    let handle = unsafe { dlopen(c_path.as_ptr(), RTLD_NOW) };
    if handle.is_null() {
        let why = unsafe { CStr::from_ptr(dlerror()) }.to_string_lossy().into_owned();
        return Err(EnvError(format!("cannot load MuJoCo library {}: {why}; {fix}", path.display())));
    }
    let sym = |name: &str| -> Result<*mut c_void, EnvError> {
        let c_name = CString::new(name).expect("symbol names have no NUL");
        let p = unsafe { dlsym(handle, c_name.as_ptr()) };
        if p.is_null() {
            return Err(EnvError(format!("{} has no symbol {name}: {fix}", path.display())));
        }
        Ok(p)
    };
    // SAFETY: each symbol is the C function (or function-pointer variable) of mujoco.h 3.17.0
    // with exactly the signature given; the version check below guards against another release.
    unsafe {
        let version: unsafe extern "C" fn() -> c_int = cast(sym("mj_version")?);
        if version() != MJ_VERSION {
            return Err(EnvError(format!("{} is MuJoCo {}, expected 3.17.0: {fix}", path.display(), version())));
        }
        *(sym("mju_user_warning")? as *mut Option<extern "C" fn(*const c_char)>) = Some(on_warning);
        *(sym("mju_user_error")? as *mut Option<extern "C" fn(*const c_char)>) = Some(on_error);
        Ok(Api {
            load_xml: cast(sym("mj_loadXML")?),
            make_data: cast(sym("mj_makeData")?),
            delete_data: cast(sym("mj_deleteData")?),
            delete_model: cast(sym("mj_deleteModel")?),
            reset_data: cast(sym("mj_resetData")?),
            forward: cast(sym("mj_forward")?),
            step: cast(sym("mj_step")?),
            state_size: cast(sym("mj_stateSize")?),
            get_state: cast(sym("mj_getState")?),
            set_state: cast(sym("mj_setState")?),
        })
    }
}

/// One MuJoCo env (its own model and data), without the TimeLimit `make` adds.
pub struct MujocoEnv {
    spec: &'static Spec,
    api: &'static Api,
    model: *mut Model,
    data: *mut Data,
    nq: usize,
    /// seconds per env step: the model's timestep times the frame skip (gymnasium's `dt`)
    dt: f64,
    /// qpos then qvel as loaded (gymnasium's init_qpos, init_qvel)
    init_state: Vec<f64>,
    /// qpos then qvel after the last reset or step (gymnasium's `state_vector()`)
    state: Vec<f64>,
    ctrl: Vec<f64>,
    rng: ChaCha8Rng,
}

// SAFETY: the model and data belong to this env alone and MuJoCo keeps no thread-local state
// for them, so the env may move to another thread (it is never shared).
unsafe impl Send for MujocoEnv {}

impl MujocoEnv {
    pub fn new(id: &str) -> Result<MujocoEnv, EnvError> {
        let spec = SPECS.iter().find(|s| s.id == id).ok_or_else(|| EnvError::unknown(id))?;
        let api = api()?;
        let xml = assets_dir().join(spec.xml);
        if !xml.is_file() {
            return Err(EnvError(format!(
                "MuJoCo model file {} not found: run scripts/setup (the XML files come from the gymnasium package), or set MUJOCO_ASSETS_DIR to gymnasium/envs/mujoco/assets",
                xml.display()
            )));
        }
        let c_xml = CString::new(xml.to_string_lossy().as_bytes()).map_err(|_| EnvError(format!("bad model path {}", xml.display())))?;
        let mut err = [0 as c_char; 1000];
        // SAFETY: valid NUL-terminated path, no virtual file system, error buffer of the given size
        let model = unsafe { (api.load_xml)(c_xml.as_ptr(), std::ptr::null(), err.as_mut_ptr(), err.len() as c_int) };
        if model.is_null() {
            let why = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
            return Err(EnvError(format!("MuJoCo could not load {}: {why}", xml.display())));
        }
        let data = unsafe { (api.make_data)(model) };
        let size = |sig| unsafe { (api.state_size)(model, sig) } as usize;
        let (nq, nu) = (size(STATE_QPOS), size(STATE_CTRL));
        let mut env = MujocoEnv {
            spec,
            api,
            model,
            data,
            nq,
            dt: 0.0,
            init_state: vec![0.0; size(STATE_QPOS | STATE_QVEL)],
            state: vec![0.0; size(STATE_QPOS | STATE_QVEL)],
            ctrl: vec![0.0; nu],
            rng: ChaCha8Rng::seed_from_u64(0),
        };
        env.read_state();
        env.init_state.copy_from_slice(&env.state);
        // the timestep is in mjModel's options; one step from time 0 reads it without the struct
        unsafe { (api.step)(model, data) };
        let mut time = [0.0];
        unsafe { (api.get_state)(model, data, time.as_mut_ptr(), 1) }; // 1 = mjSTATE_TIME
        env.dt = time[0] * spec.frame_skip as f64;
        unsafe { (api.reset_data)(model, data) };
        Ok(env)
    }

    fn read_state(&mut self) {
        // SAFETY: `state` holds exactly mj_stateSize(QPOS | QVEL) values
        unsafe { (self.api.get_state)(self.model, self.data, self.state.as_mut_ptr(), STATE_QPOS | STATE_QVEL) };
    }

    /// gymnasium's `set_state(qpos, qvel)`: sets positions and velocities, then `mj_forward`.
    /// `state` is qpos followed by qvel.
    pub fn set_state(&mut self, state: &[f64], obs: &mut [f32]) {
        assert_eq!(state.len(), self.state.len(), "{}: set_state wants nq + nv values", self.spec.id);
        // SAFETY: `state` has mj_stateSize(QPOS | QVEL) values
        unsafe {
            (self.api.set_state)(self.model, self.data, state.as_ptr(), STATE_QPOS | STATE_QVEL);
            (self.api.forward)(self.model, self.data);
        }
        self.read_state();
        self.write_obs(obs);
    }

    /// Positions, then velocities (clipped to ±10 for Hopper and Walker2d); the x position
    /// (qpos[0]) is left out except for InvertedPendulum, whose observation is all of both.
    fn write_obs(&self, obs: &mut [f32]) {
        if obs.is_empty() {
            return;
        }
        let (qpos, qvel) = self.state.split_at(self.nq);
        let skip = if self.spec.task == Task::InvertedPendulum { 0 } else { 1 };
        let clip = matches!(self.spec.task, Task::Hopper | Task::Walker2d);
        let values = qpos[skip..].iter().copied().chain(qvel.iter().map(|&v| if clip { v.clamp(-10.0, 10.0) } else { v }));
        for (o, v) in obs.iter_mut().zip(values) {
            *o = v as f32;
        }
    }

    fn is_healthy(&self) -> bool {
        let (z, angle) = (self.state[1], self.state[2]);
        match self.spec.task {
            Task::Hopper => {
                self.state[2..].iter().all(|&s| -100.0 < s && s < 100.0) && 0.7 < z && z < f64::INFINITY && -0.2 < angle && angle < 0.2
            }
            Task::Walker2d => 0.8 < z && z < 2.0 && -1.0 < angle && angle < 1.0,
            Task::HalfCheetah | Task::InvertedPendulum => true,
        }
    }
}

impl Drop for MujocoEnv {
    fn drop(&mut self) {
        // SAFETY: both were made by MuJoCo for this env and are freed once
        unsafe {
            (self.api.delete_data)(self.data);
            (self.api.delete_model)(self.model);
        }
    }
}

/// numpy's `np.sum(np.square(a))` on a short float32 action: float32 squares added in order
/// (numpy's pairwise summation is a plain loop below 8 values; all our actions are shorter).
fn np_sum_squares(a: &[f32]) -> f32 {
    a.iter().fold(0.0f32, |acc, &x| acc + x * x)
}

/// A standard normal draw (Box–Muller), for HalfCheetah's velocity noise.
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

impl Env for MujocoEnv {
    type Obs = f32;
    fn observation_space(&self) -> Space {
        let dim = if self.spec.task == Task::InvertedPendulum { self.state.len() } else { self.state.len() - 1 };
        Space::bounded_box(vec![f32::NEG_INFINITY; dim], vec![f32::INFINITY; dim])
    }
    fn action_space(&self) -> Space {
        let b = self.spec.action_bound;
        Space::bounded_box(vec![-b; self.ctrl.len()], vec![b; self.ctrl.len()])
    }
    /// gymnasium's reset: `mj_resetData`, then the initial state plus noise: uniform in
    /// ±reset_noise on positions; on velocities uniform too, except HalfCheetah's normal noise.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        if let Some(seed) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(seed);
        }
        unsafe { (self.api.reset_data)(self.model, self.data) };
        let noise = self.spec.reset_noise;
        let mut state = self.init_state.clone();
        for (i, s) in state.iter_mut().enumerate() {
            *s += if i >= self.nq && self.spec.task == Task::HalfCheetah {
                noise * standard_normal(&mut self.rng)
            } else {
                self.rng.gen_range(-noise..noise)
            };
        }
        self.set_state(&state, obs);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let Action::Continuous(a) = action else { panic!("{}: expected a continuous action, got {action:?}", self.spec.id) };
        assert_eq!(a.len(), self.ctrl.len(), "{}: action has {} values, the env {}", self.spec.id, a.len(), self.ctrl.len());
        for (c, &x) in self.ctrl.iter_mut().zip(a) {
            *c = x as f64; // MuJoCo clamps controls to the actuators' ctrlrange itself
        }
        let x_before = self.state[0];
        // SAFETY: `ctrl` has mj_stateSize(CTRL) values
        unsafe {
            (self.api.set_state)(self.model, self.data, self.ctrl.as_ptr(), STATE_CTRL);
            for _ in 0..self.spec.frame_skip {
                (self.api.step)(self.model, self.data);
            }
        }
        self.read_state();
        self.write_obs(obs);
        let (reward, terminated) = match self.spec.task {
            Task::InvertedPendulum => (1.0, !self.state.iter().all(|v| v.is_finite()) || self.state[1].abs() > 0.2),
            task => {
                let forward_reward = (self.state[0] - x_before) / self.dt; // forward_reward_weight 1
                let ctrl_cost = self.spec.ctrl_cost_weight * np_sum_squares(a) as f64;
                if task == Task::HalfCheetah {
                    (forward_reward - ctrl_cost, false)
                } else {
                    // healthy_reward is paid even on the step that ends the episode
                    let healthy = self.is_healthy();
                    ((forward_reward + 1.0) - ctrl_cost, !healthy)
                }
            }
        };
        Step { reward, terminated, truncated: false, episode: None }
    }
}
