//! gymnasium's eleven MuJoCo envs with their v4 semantics, on the real MuJoCo library.
//!
//! `libmujoco.so.3.17.0` (from the PyPI `mujoco` wheel, which scripts/setup installs) is opened
//! at run time with `dlopen`, so binaries start without it and a missing library is a one-line
//! error, not a loader failure. Positions, velocities and controls go in and out through MuJoCo's
//! functions (`mj_getState`/`mj_setState`); what else an observation or reward needs (body
//! positions, com inertias and velocities, actuator, constraint and contact forces) is read from
//! mjData's arrays at the offsets of 3.17.0's header (`offset`, checked at load). The model XML
//! files are gymnasium's own (`gymnasium/envs/mujoco/assets`), read at run time.
//!
//! Checked against gymnasium 0.29.1 + mujoco 3.17.0 in `tests/mujoco.rs`: every env's
//! observations, rewards and flags bit-identical over the golden runs.

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
    Ant,
    Humanoid,
    HumanoidStandup,
    InvertedDoublePendulum,
    Pusher,
    Reacher,
    Swimmer,
}

struct Spec {
    id: &'static str,
    task: Task,
    xml: &'static str,
    frame_skip: u32,
    /// gymnasium's `ctrl_cost_weight`; numpy multiplies it in float32 with the float32 action's
    /// sum of squares (Humanoid's and HumanoidStandup's costs use `data.ctrl`, float64)
    ctrl_cost_weight: f32,
    reset_noise: f64,
}

const fn spec(
    id: &'static str,
    task: Task,
    xml: &'static str,
    frame_skip: u32,
    ctrl_cost_weight: f32,
    reset_noise: f64,
) -> Spec {
    Spec { id, task, xml, frame_skip, ctrl_cost_weight, reset_noise }
}

const SPECS: [Spec; 11] = [
    spec("HalfCheetah-v4", Task::HalfCheetah, "half_cheetah.xml", 5, 0.1, 0.1),
    spec("Hopper-v4", Task::Hopper, "hopper.xml", 4, 1e-3, 5e-3),
    spec("Walker2d-v4", Task::Walker2d, "walker2d.xml", 4, 1e-3, 5e-3),
    spec("InvertedPendulum-v4", Task::InvertedPendulum, "inverted_pendulum.xml", 2, 0.0, 0.01),
    spec("Ant-v4", Task::Ant, "ant.xml", 5, 0.5, 0.1),
    spec("Humanoid-v4", Task::Humanoid, "humanoid.xml", 5, 0.1, 1e-2),
    spec("HumanoidStandup-v4", Task::HumanoidStandup, "humanoidstandup.xml", 5, 0.1, 1e-2),
    spec("InvertedDoublePendulum-v4", Task::InvertedDoublePendulum, "inverted_double_pendulum.xml", 5, 0.0, 0.1),
    // Pusher and Reacher: noise on the arm's velocities ±5e-3, their object / target sampled
    // (Pusher's arm starts exactly at the model's pose; see `reset`)
    spec("Pusher-v4", Task::Pusher, "pusher.xml", 5, 0.1, 5e-3),
    spec("Reacher-v4", Task::Reacher, "reacher.xml", 2, 1.0, 0.1),
    spec("Swimmer-v4", Task::Swimmer, "swimmer.xml", 4, 1e-4, 0.1),
];

/// The MuJoCo env ids `make` knows (their time limits are in `KNOWN_ENVS`).
pub const IDS: [&str; SPECS.len()] = {
    let mut ids = [""; SPECS.len()];
    let mut i = 0;
    while i < SPECS.len() {
        ids[i] = SPECS[i].id;
        i += 1;
    }
    ids
};

/// Byte offsets of the few mjModel / mjData fields the newer envs read directly (mujoco.h of
/// 3.17.0, the only release `load_api` accepts; `scripts/mujoco-offsets` prints them from the
/// wheel's headers). Each data field is a pointer to its array; `MujocoEnv::new` checks the layout
/// by comparing `qpos` read this way with `mj_getState`'s.
mod offset {
    pub const MODEL_NBODY: usize = 48; // mjtSize (i64)
    pub const MODEL_TIMESTEP: usize = 792; // opt.timestep, f64
    pub const MODEL_BODY_MASS: usize = 1944; // nbody x 1
    pub const MODEL_ACTUATOR_CTRLRANGE: usize = 4992; // nu x 2
    pub const DATA_QPOS: usize = 160688; // nq
    pub const DATA_XPOS: usize = 160840; // nbody x 3, body frames
    pub const DATA_XIPOS: usize = 160864; // nbody x 3, centres of mass
    pub const DATA_SITE_XPOS: usize = 160912; // nsite x 3
    pub const DATA_CINERT: usize = 160976; // nbody x 10
    pub const DATA_CVEL: usize = 161280; // nbody x 6
    pub const DATA_QFRC_ACTUATOR: usize = 161408; // nv
    pub const DATA_QFRC_CONSTRAINT: usize = 161432; // nv
    pub const DATA_CFRC_EXT: usize = 161464; // nbody x 6
}
// mjtObj (mjtype.h): what mj_name2id looks up
const OBJ_BODY: c_int = 1;

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
    rne_post_constraint: unsafe extern "C" fn(*const Model, *mut Data),
    default_vfs: unsafe extern "C" fn(*mut c_void),
    add_buffer_vfs: unsafe extern "C" fn(*mut c_void, *const c_char, *const c_void, c_int) -> c_int,
    delete_vfs: unsafe extern "C" fn(*mut c_void),
    name2id: unsafe extern "C" fn(*const Model, c_int, *const c_char) -> c_int,
}

extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
    fn dlerror() -> *mut c_char;
}
const RTLD_NOW: c_int = 2;

/// Where the library is: `$MUJOCO_DIR`, else the `.mujoco` link scripts/setup made (compiled in).
fn lib_dir() -> PathBuf {
    std::env::var_os("MUJOCO_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("PPO_DETAILS_DEFAULT_MUJOCO_DIR")))
}

/// Where gymnasium's model files are: `$MUJOCO_ASSETS_DIR`, else the `.mujoco-assets` link.
fn assets_dir() -> PathBuf {
    std::env::var_os("MUJOCO_ASSETS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("PPO_DETAILS_DEFAULT_MUJOCO_ASSETS")))
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

/// MuJoCo's handler must not return, and it may be called on any env thread while others are inside
/// MuJoCo or libtorch: it ends the process at once with `_exit`, running no exit handler or static
/// destructor under their feet (`exit` would), after one line on stderr (one, when env threads err at
/// once). The run's rows and checkpoints written so far are whole on disk (flushed per update, renamed
/// into place).
extern "C" fn on_error(msg: *const c_char) {
    // one line, whichever thread errs first: another that errs at the same time waits for the end
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if SAID.swap(true, std::sync::atomic::Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    let msg = unsafe { CStr::from_ptr(msg) }.to_string_lossy();
    eprintln!("error: MuJoCo: {}; the run's metrics so far are kept in its run directory", msg.trim());
    extern "C" {
        fn _exit(status: i32) -> !;
    }
    // SAFETY: ends the process; nothing of it runs afterwards
    unsafe { _exit(1) }
}

/// `PPO_MUJOCO_FAIL=make_data` or `=error`, in the test suite's build only (the cargo feature `test-hooks`):
/// mj_makeData's NULL, or an error inside MuJoCo at every step (an env thread's), so that tests see what a run
/// does then.
#[cfg(feature = "test-hooks")]
fn forced(what: &str) -> bool {
    std::env::var("PPO_MUJOCO_FAIL").is_ok_and(|v| v == what)
}

#[cfg(not(feature = "test-hooks"))]
fn forced(_what: &str) -> bool {
    false
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
    let fix = "run scripts/setup, or set MUJOCO_DIR to a folder holding it (pip install mujoco==3.17.0 puts it in \
        site-packages/mujoco)";
    if !path.is_file() {
        return Err(EnvError(format!("MuJoCo library {} not found: {fix}", path.display())));
    }
    let c_path = CString::new(path.to_string_lossy().as_bytes())
        .map_err(|_| EnvError(format!("bad MuJoCo path {}", path.display())))?;
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
            rne_post_constraint: cast(sym("mj_rnePostConstraint")?),
            default_vfs: cast(sym("mj_defaultVFS")?),
            add_buffer_vfs: cast(sym("mj_addBufferVFS")?),
            delete_vfs: cast(sym("mj_deleteVFS")?),
            name2id: cast(sym("mj_name2id")?),
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
    nv: usize,
    nbody: usize,
    /// the model's timestep, and seconds per env step: timestep times frame skip (gymnasium's `dt`)
    timestep: f64,
    dt: f64,
    /// the actuators' ctrlrange as float32 (gymnasium's action space)
    low: Vec<f32>,
    high: Vec<f32>,
    /// the bodies whose positions the task reads (`get_body_com`), by index
    bodies: Vec<usize>,
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
                "MuJoCo model file {} not found: run scripts/setup (the XML files come from the gymnasium package), \
                    or set MUJOCO_ASSETS_DIR to gymnasium/envs/mujoco/assets",
                xml.display()
            )));
        }
        let model = load_model(api, spec, &xml)?;
        let data = if forced("make_data") { std::ptr::null_mut() } else { unsafe { (api.make_data)(model) } };
        if data.is_null() {
            // mj_makeData returns NULL when it cannot allocate (its arena, or memory): never step a NULL
            unsafe { (api.delete_model)(model) };
            return Err(EnvError(format!("{id}: MuJoCo cannot allocate its simulation data (out of memory?)")));
        }
        let size = |sig| unsafe { (api.state_size)(model, sig) } as usize;
        let (nq, nu) = (size(STATE_QPOS), size(STATE_CTRL));
        // SAFETY: mjModel 3.17.0's layout (`offset`); `nbody` is an i64 size, the rest are arrays
        // of the sizes noted there
        let (nbody, timestep, ctrlrange) = unsafe {
            let nbody = *((model as *const u8).add(offset::MODEL_NBODY) as *const i64) as usize;
            let timestep = *((model as *const u8).add(offset::MODEL_TIMESTEP) as *const f64);
            (nbody, timestep, array(model, offset::MODEL_ACTUATOR_CTRLRANGE, 2 * nu).to_vec())
        };
        let bodies = match spec.task {
            Task::Ant => vec!["torso"],
            Task::Pusher => vec!["tips_arm", "object", "goal"],
            Task::Reacher => vec!["fingertip", "target"],
            _ => vec![],
        };
        let bodies = bodies.iter().map(|name| {
            let c_name = CString::new(*name).expect("body names have no NUL");
            match unsafe { (api.name2id)(model, OBJ_BODY, c_name.as_ptr()) } {
                -1 => Err(EnvError(format!(
                    "{} has no body '{name}': run scripts/setup to reinstall gymnasium 0.29.1's model files",
                    xml.display()
                ))),
                b => Ok(b as usize),
            }
        });
        let mut env = MujocoEnv {
            spec,
            api,
            model,
            data,
            nq,
            nv: size(STATE_QPOS | STATE_QVEL) - nq,
            nbody,
            timestep,
            dt: timestep * spec.frame_skip as f64,
            low: ctrlrange.iter().step_by(2).map(|&x| x as f32).collect(),
            high: ctrlrange.iter().skip(1).step_by(2).map(|&x| x as f32).collect(),
            bodies: vec![],
            init_state: vec![0.0; size(STATE_QPOS | STATE_QVEL)],
            state: vec![0.0; size(STATE_QPOS | STATE_QVEL)],
            ctrl: vec![0.0; nu],
            rng: ChaCha8Rng::seed_from_u64(0),
        }; // from here on, Drop frees the model and data on every return
        env.bodies = bodies.collect::<Result<_, _>>()?;
        env.read_state();
        env.init_state.copy_from_slice(&env.state);
        // the layout check: qpos through mjData's pointer is what mj_getState reads
        if env.data_array(offset::DATA_QPOS, nq) != &env.state[..nq] {
            return Err(EnvError(format!(
                "{}: mjData's layout is not MuJoCo 3.17.0's; run scripts/setup",
                lib_dir().join(LIB_NAME).display()
            )));
        }
        Ok(env)
    }

    fn read_state(&mut self) {
        // SAFETY: `state` holds exactly mj_stateSize(QPOS | QVEL) values
        unsafe { (self.api.get_state)(self.model, self.data, self.state.as_mut_ptr(), STATE_QPOS | STATE_QVEL) };
    }

    /// One of mjData's arrays (an `offset::DATA_*`) with its `len` values.
    fn data_array(&self, offset: usize, len: usize) -> &[f64] {
        // SAFETY: `offset` is a field of mjData 3.17.0 pointing at an array of at least `len`
        // f64, alive as long as the data (checked through qpos in `new`)
        unsafe { array(self.data, offset, len) }
    }

    /// `get_body_com(name)` of the task's `k`-th body: its frame's position, `data.xpos`, as the
    /// last `mj_forward` or the last substep of `mj_step` left it (before that substep's
    /// integration, exactly as gymnasium reads it).
    fn body_com(&self, k: usize) -> [f64; 3] {
        let b = self.bodies[k];
        let xpos = &self.data_array(offset::DATA_XPOS, 3 * self.nbody)[3 * b..3 * b + 3];
        [xpos[0], xpos[1], xpos[2]]
    }

    /// Humanoid's `mass_center`: the mass-weighted mean of the bodies' centres of mass
    /// (`data.xipos`), x and y, summed as numpy does (rows in order, masses pairwise).
    fn mass_center(&self) -> [f64; 2] {
        // SAFETY: body_mass has nbody values (mjModel 3.17.0)
        let mass = unsafe { array(self.model, offset::MODEL_BODY_MASS, self.nbody) };
        let xipos = self.data_array(offset::DATA_XIPOS, 3 * self.nbody);
        let (mut x, mut y) = (mass[0] * xipos[0], mass[0] * xipos[1]);
        for b in 1..self.nbody {
            x += mass[b] * xipos[3 * b];
            y += mass[b] * xipos[3 * b + 1];
        }
        let total = np_sum(mass, |x| x);
        [x / total, y / total]
    }

    /// The x position whose change the forward reward pays: the torso's frame for Ant, the
    /// centre of mass for Humanoid, qpos[0] for the others.
    fn x_position(&self) -> f64 {
        match self.spec.task {
            Task::Ant => self.body_com(0)[0],
            Task::Humanoid => self.mass_center()[0],
            _ => self.state[0],
        }
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

    /// gymnasium's `_get_obs()`, value by value.
    fn observe(&self, mut put: impl FnMut(f64)) {
        let (qpos, qvel) = self.state.split_at(self.nq);
        let clip10 = |v: f64| v.clamp(-10.0, 10.0);
        match self.spec.task {
            // positions without the x position, then velocities
            Task::HalfCheetah => qpos[1..].iter().chain(qvel).for_each(|&v| put(v)),
            Task::Hopper | Task::Walker2d => {
                qpos[1..].iter().for_each(|&v| put(v));
                qvel.iter().for_each(|&v| put(clip10(v)));
            }
            Task::InvertedPendulum => self.state.iter().for_each(|&v| put(v)),
            // positions without x and y, then velocities
            Task::Ant | Task::Swimmer => qpos[2..].iter().chain(qvel).for_each(|&v| put(v)),
            // ... then every body's com-based inertia and velocity, the actuator forces on the
            // dofs and every body's external (contact) force: v4 includes them all
            Task::Humanoid | Task::HumanoidStandup => {
                let b = self.nbody;
                let arrays = [
                    self.data_array(offset::DATA_CINERT, 10 * b),
                    self.data_array(offset::DATA_CVEL, 6 * b),
                    self.data_array(offset::DATA_QFRC_ACTUATOR, self.nv),
                    self.data_array(offset::DATA_CFRC_EXT, 6 * b),
                ];
                qpos[2..].iter().chain(qvel).chain(arrays.into_iter().flatten()).for_each(|&v| put(v));
            }
            Task::InvertedDoublePendulum => {
                put(qpos[0]);
                qpos[1..].iter().for_each(|&v| put(v.sin()));
                qpos[1..].iter().for_each(|&v| put(v.cos()));
                qvel.iter().for_each(|&v| put(clip10(v)));
                self.data_array(offset::DATA_QFRC_CONSTRAINT, self.nv).iter().for_each(|&v| put(clip10(v)));
            }
            Task::Reacher => {
                qpos[..2].iter().for_each(|&v| put(v.cos()));
                qpos[..2].iter().for_each(|&v| put(v.sin()));
                qpos[2..].iter().chain(&qvel[..2]).for_each(|&v| put(v));
                let (fingertip, target) = (self.body_com(0), self.body_com(1));
                (0..3).for_each(|i| put(fingertip[i] - target[i]));
            }
            Task::Pusher => {
                qpos[..7].iter().chain(&qvel[..7]).for_each(|&v| put(v));
                (0..3).flat_map(|k| self.body_com(k)).for_each(put);
            }
        }
    }

    fn write_obs(&self, obs: &mut [f32]) {
        if obs.is_empty() {
            return;
        }
        let mut values = obs.iter_mut();
        self.observe(|v| *values.next().expect("observation buffer of observation_space's size") = v as f32);
    }

    fn is_healthy(&self) -> bool {
        let (z, angle) = (self.state[1], self.state[2]);
        match self.spec.task {
            Task::Hopper => {
                self.state[2..].iter().all(|&s| -100.0 < s && s < 100.0)
                    && 0.7 < z
                    && z < f64::INFINITY
                    && -0.2 < angle
                    && angle < 0.2
            }
            Task::Walker2d => 0.8 < z && z < 2.0 && -1.0 < angle && angle < 1.0,
            // the torso's height, qpos[2]: inclusive range for Ant, exclusive for Humanoid
            Task::Ant => self.state.iter().all(|v| v.is_finite()) && (0.2..=1.0).contains(&self.state[2]),
            Task::Humanoid => 1.0 < self.state[2] && self.state[2] < 2.0,
            _ => true,
        }
    }

    /// The control cost `weight * np.sum(np.square(action))`: float32 throughout, as numpy
    /// computes it from a float32 action and a Python float weight.
    fn ctrl_cost(&self, action: &[f32]) -> f64 {
        (self.spec.ctrl_cost_weight * np_sum(action, |x| x * x)) as f64
    }
}

/// Swimmer-v4's option `collision="predefined"` (contacts only between the `<pair>`s the model
/// lists, and it lists none) is gone from MuJoCo 3, which refuses the file; its equivalent is
/// the flag that disables contacts. The same edit makes gymnasium 0.29.1 load it on MuJoCo 3
/// (scripts/gen_golden_mujoco.py).
const SWIMMER_OPTION: (&str, &str) = (
    r#"<option collision="predefined" density="4000" integrator="RK4" timestep="0.01" viscosity="0.1"/>"#,
    r#"<option density="4000" integrator="RK4" timestep="0.01" viscosity="0.1"><flag contact="disable"/></option>"#,
);

/// `mj_loadXML` of gymnasium's model file; Swimmer's edited as `SWIMMER_OPTION` says and
/// loaded from memory (MuJoCo's virtual file system).
fn load_model(api: &Api, spec: &Spec, xml: &std::path::Path) -> Result<*mut Model, EnvError> {
    let bad_path = || EnvError(format!("bad model path {}", xml.display()));
    let mut err = [0 as c_char; 1000];
    let model = if spec.task == Task::Swimmer {
        let text = std::fs::read_to_string(xml).map_err(|e| EnvError(format!("cannot read {}: {e}", xml.display())))?;
        if !text.contains(SWIMMER_OPTION.0) {
            return Err(EnvError(format!(
                "{} is not gymnasium 0.29.1's swimmer.xml: run scripts/setup",
                xml.display()
            )));
        }
        let text = text.replace(SWIMMER_OPTION.0, SWIMMER_OPTION.1);
        let name = CString::new(spec.xml).map_err(|_| bad_path())?;
        let mut vfs: *mut c_void = std::ptr::null_mut(); // mjVFS is one pointer
        let vfs_ptr = &mut vfs as *mut *mut c_void as *mut c_void;
        // SAFETY: an mjVFS made, filled with the edited text, used to load and deleted here
        unsafe {
            (api.default_vfs)(vfs_ptr);
            (api.add_buffer_vfs)(vfs_ptr, name.as_ptr(), text.as_ptr() as *const c_void, text.len() as c_int);
            let model = (api.load_xml)(name.as_ptr(), vfs_ptr, err.as_mut_ptr(), err.len() as c_int);
            (api.delete_vfs)(vfs_ptr);
            model
        }
    } else {
        let c_xml = CString::new(xml.to_string_lossy().as_bytes()).map_err(|_| bad_path())?;
        // SAFETY: valid NUL-terminated path, no virtual file system, error buffer of the given size
        unsafe { (api.load_xml)(c_xml.as_ptr(), std::ptr::null(), err.as_mut_ptr(), err.len() as c_int) }
    };
    if model.is_null() {
        let why = unsafe { CStr::from_ptr(err.as_ptr()) }.to_string_lossy().into_owned();
        return Err(EnvError(format!("MuJoCo could not load {}: {why}", xml.display())));
    }
    Ok(model)
}

/// `len` values of the f64 array whose pointer is stored at byte `offset` of a MuJoCo struct.
///
/// # Safety
/// `base` is a live mjModel or mjData of MuJoCo 3.17.0 and `offset` one of its pointer fields
/// to at least `len` f64 values.
unsafe fn array<'a>(base: *const c_void, offset: usize, len: usize) -> &'a [f64] {
    let ptr = *((base as *const u8).add(offset) as *const *const f64);
    std::slice::from_raw_parts(ptr, len)
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

/// numpy's `np.sum(f(a))` of a contiguous 1-D array (pairwise summation): below 8 values a plain
/// loop; up to 128, eight running sums combined as a tree, then the tail; longer arrays split in
/// two halves at a multiple of 8. Same additions in the same order, so the same bits; `f` maps
/// each value first (`np.square`), so nothing is allocated on the step's path.
fn np_sum<T: Copy + Default + std::ops::Add<Output = T>>(a: &[T], f: impl Fn(T) -> T + Copy) -> T {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(T::default(), |sum, &x| sum + f(x));
    }
    if n > 128 {
        let half = n / 2 - (n / 2) % 8;
        return np_sum(&a[..half], f) + np_sum(&a[half..], f);
    }
    let mut r: [T; 8] = std::array::from_fn(|j| f(a[j]));
    let end = n - n % 8;
    for chunk in a[8..end].chunks_exact(8) {
        for (r, &x) in r.iter_mut().zip(chunk) {
            *r = *r + f(x);
        }
    }
    let tree = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    a[end..].iter().fold(tree, |sum, &x| sum + f(x))
}

/// numpy's `np.square(a).sum()` of a float64 array.
fn np_sum_squares(a: &[f64]) -> f64 {
    np_sum(a, |x| x * x)
}

/// `np.linalg.norm` of the difference of two points (numpy: `sqrt(dot(v, v))`, in order).
fn distance(a: [f64; 3], b: [f64; 3]) -> f64 {
    let v = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]).sqrt()
}

/// A standard normal draw (Box–Muller), for the envs whose velocity noise is normal.
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

impl Env for MujocoEnv {
    type Obs = f32;
    fn observation_space(&self) -> Space {
        let mut dim = 0;
        self.observe(|_| dim += 1);
        Space::bounded_box(vec![f32::NEG_INFINITY; dim], vec![f32::INFINITY; dim])
    }
    fn action_space(&self) -> Space {
        Space::bounded_box(self.low.clone(), self.high.clone())
    }
    /// gymnasium's reset: `mj_resetData`, then the initial state plus noise: uniform in
    /// ±reset_noise, except normal velocity noise for HalfCheetah, Ant and InvertedDoublePendulum;
    /// Reacher and Pusher place their target / object as gymnasium samples them.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        if let Some(seed) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(seed);
        }
        unsafe { (self.api.reset_data)(self.model, self.data) };
        let (nq, noise, task) = (self.nq, self.spec.reset_noise, self.spec.task);
        let mut state = self.init_state.clone();
        let (qpos, qvel) = state.split_at_mut(nq);
        if task != Task::Pusher {
            qpos.iter_mut().for_each(|q| *q += self.rng.gen_range(-noise..noise));
        }
        for v in qvel.iter_mut() {
            *v += match task {
                Task::HalfCheetah | Task::Ant | Task::InvertedDoublePendulum => noise * standard_normal(&mut self.rng),
                Task::Reacher | Task::Pusher => self.rng.gen_range(-5e-3..5e-3),
                _ => self.rng.gen_range(-noise..noise),
            };
        }
        match task {
            // the target: uniform in the square of side 0.4 until inside the disc of radius 0.2
            Task::Reacher => {
                let goal = loop {
                    let goal = [self.rng.gen_range(-0.2..0.2), self.rng.gen_range(-0.2..0.2)];
                    if goal[0] * goal[0] + goal[1] * goal[1] < 0.04 {
                        break goal;
                    }
                };
                qpos[nq - 2..].copy_from_slice(&goal);
                qvel[nq - 2..].fill(0.0);
            }
            // the object's two slide joints (y, then x in pusher.xml): uniform in [-0.3, 0) and
            // [-0.2, 0.2) until more than 0.17 from the goal, which stays at 0
            Task::Pusher => {
                let object = loop {
                    let object: [f64; 2] = [self.rng.gen_range(-0.3..0.0), self.rng.gen_range(-0.2..0.2)];
                    if object[0] * object[0] + object[1] * object[1] > 0.17 * 0.17 {
                        break object;
                    }
                };
                qpos[nq - 4..nq - 2].copy_from_slice(&object);
                qpos[nq - 2..].fill(0.0);
                let nv = qvel.len();
                qvel[nv - 4..].fill(0.0);
            }
            _ => {}
        }
        self.set_state(&state, obs);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        if forced("error") {
            // an invalid state signature: MuJoCo's own error path (mju_error), on this env thread
            unsafe { (self.api.state_size)(self.model, c_int::MAX) };
        }
        let Action::Continuous(a) = action else {
            panic!("{}: expected a continuous action, got {action:?}", self.spec.id)
        };
        assert_eq!(
            a.len(),
            self.ctrl.len(),
            "{}: action has {} values, the env {}",
            self.spec.id,
            a.len(),
            self.ctrl.len()
        );
        for (c, &x) in self.ctrl.iter_mut().zip(a) {
            *c = x as f64; // MuJoCo clamps controls to the actuators' ctrlrange itself
        }
        let task = self.spec.task;
        // the x position the forward reward compares with, read before the step
        let x_before = self.x_position();
        // Reacher and Pusher score the state before the action (gymnasium v4's order)
        let reward_before = match task {
            Task::Reacher => -distance(self.body_com(0), self.body_com(1)) - self.ctrl_cost(a),
            Task::Pusher => {
                let (tips, object, goal) = (self.body_com(0), self.body_com(1), self.body_com(2));
                -distance(object, goal) + -self.ctrl_cost(a) + 0.5 * -distance(object, tips)
            }
            _ => 0.0,
        };
        // SAFETY: `ctrl` has mj_stateSize(CTRL) values
        unsafe {
            (self.api.set_state)(self.model, self.data, self.ctrl.as_ptr(), STATE_CTRL);
            for _ in 0..self.spec.frame_skip {
                (self.api.step)(self.model, self.data);
            }
            // the contact forces (cfrc_ext) the humanoids observe; gymnasium calls it after every step
            if matches!(task, Task::Humanoid | Task::HumanoidStandup) {
                (self.api.rne_post_constraint)(self.model, self.data);
            }
        }
        self.read_state();
        self.write_obs(obs);
        let healthy = self.is_healthy();
        let x_velocity = (self.x_position() - x_before) / self.dt;
        let (reward, terminated) = match task {
            Task::InvertedPendulum => (1.0, !self.state.iter().all(|v| v.is_finite()) || self.state[1].abs() > 0.2),
            Task::HalfCheetah | Task::Swimmer => (x_velocity - self.ctrl_cost(a), false),
            // healthy_reward is paid even on the step that ends the episode
            Task::Hopper | Task::Walker2d | Task::Ant => ((x_velocity + 1.0) - self.ctrl_cost(a), !healthy),
            Task::Humanoid => {
                let ctrl_cost = 0.1 * np_sum_squares(&self.ctrl);
                ((1.25 * x_velocity + 5.0) - ctrl_cost, !healthy)
            }
            Task::HumanoidStandup => {
                let uph_cost = (self.state[2] - 0.0) / self.timestep;
                let quad_ctrl_cost = 0.1 * np_sum_squares(&self.ctrl);
                let quad_impact_cost =
                    (5e-7 * np_sum_squares(self.data_array(offset::DATA_CFRC_EXT, 6 * self.nbody))).min(10.0);
                (uph_cost - quad_ctrl_cost - quad_impact_cost + 1.0, false)
            }
            Task::InvertedDoublePendulum => {
                // the tip of the second pole (site 0); y in gymnasium's names is its height
                let tip = &self.data_array(offset::DATA_SITE_XPOS, 3)[..3];
                let (x, y) = (tip[0], tip[2]);
                let dist_penalty = 0.01 * x * x + (y - 2.0) * (y - 2.0);
                let (v1, v2) = (self.state[self.nq + 1], self.state[self.nq + 2]);
                let vel_penalty = 1e-3 * v1 * v1 + 5e-3 * v2 * v2;
                (10.0 - dist_penalty - vel_penalty, y <= 1.0)
            }
            Task::Reacher | Task::Pusher => (reward_before, false),
        };
        Step { reward, terminated, truncated: false, episode: None }
    }
}
