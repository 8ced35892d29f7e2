//! Atari 2600 games through the real Arcade Learning Environment (ALE 0.10.1, whose emulator is ale-py 0.8.1's and
//! 0.9.0's, built from source by envs/build.rs), and the preprocessing wrappers CleanRL's `ppo_atari` puts around
//! them, written to match stable-baselines3's and gymnasium 0.29's (see `tests/atari.rs`).
//!
//! Observations are u8 pixels; the agent does the scaling.

use crate::env::forward;
use crate::numpy::{Pcg64, SeedSequence};
use crate::{Action, Env, EnvError, Space, Step};
use std::ffi::{c_char, c_float, c_int, CStr, CString};
use std::path::{Path, PathBuf};

/// One emulator, behind the C functions of `envs/src/cpp/ale.cpp`.
#[repr(C)]
struct AleInterface {
    _private: [u8; 0],
}

extern "C" {
    fn ale_new() -> *mut AleInterface;
    fn ale_delete(ale: *mut AleInterface);
    fn ale_set_int(ale: *mut AleInterface, key: *const c_char, value: c_int);
    fn ale_set_float(ale: *mut AleInterface, key: *const c_char, value: c_float);
    fn ale_load_rom(ale: *mut AleInterface, path: *const c_char, error: *mut c_char, size: usize) -> c_int;
    fn ale_reset_game(ale: *mut AleInterface);
    fn ale_act(ale: *mut AleInterface, action: c_int) -> c_int;
    fn ale_game_over(ale: *mut AleInterface) -> bool;
    fn ale_game_truncated(ale: *mut AleInterface) -> bool;
    fn ale_lives(ale: *mut AleInterface) -> c_int;
    fn ale_minimal_actions(ale: *mut AleInterface, out: *mut c_int, size: usize) -> usize;
    fn ale_screen_dims(ale: *mut AleInterface, height: *mut usize, width: *mut usize);
    fn ale_screen_rgb(ale: *mut AleInterface, out: *mut u8);
}

/// ale-py registers the v4 ids with a limit of 108,000 frames (30 minutes of play) per episode.
pub const MAX_FRAMES_PER_EPISODE: i32 = 108_000;
/// ALE's action number for FIRE.
const FIRE: i32 = 1;

/// Where the ROMs are: `ALE_ROM_DIR`, else the ale-py ROM folder scripts/setup linked at build time.
pub fn rom_dir() -> PathBuf {
    std::env::var_os("ALE_ROM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("PPO_DETAILS_DEFAULT_ROM_DIR")))
}

/// The 62 games ale-py 0.9 registers as `<Game>NoFrameskip-v4`, by ROM name.
pub const V4_GAMES: &[&str] = &[
    "adventure",
    "air_raid",
    "alien",
    "amidar",
    "assault",
    "asterix",
    "asteroids",
    "atlantis",
    "bank_heist",
    "battle_zone",
    "beam_rider",
    "berzerk",
    "bowling",
    "boxing",
    "breakout",
    "carnival",
    "centipede",
    "chopper_command",
    "crazy_climber",
    "defender",
    "demon_attack",
    "double_dunk",
    "elevator_action",
    "enduro",
    "fishing_derby",
    "freeway",
    "frostbite",
    "gopher",
    "gravitar",
    "hero",
    "ice_hockey",
    "jamesbond",
    "journey_escape",
    "kangaroo",
    "krull",
    "kung_fu_master",
    "montezuma_revenge",
    "ms_pacman",
    "name_this_game",
    "phoenix",
    "pitfall",
    "pong",
    "pooyan",
    "private_eye",
    "qbert",
    "riverraid",
    "road_runner",
    "robotank",
    "seaquest",
    "skiing",
    "solaris",
    "space_invaders",
    "star_gunner",
    "tennis",
    "time_pilot",
    "tutankham",
    "up_n_down",
    "venture",
    "video_pinball",
    "wizard_of_wor",
    "yars_revenge",
    "zaxxon",
];

/// The ROM of a `<Game>NoFrameskip-v4` id: `BreakoutNoFrameskip-v4` -> `breakout`,
/// `SpaceInvadersNoFrameskip-v4` -> `space_invaders` (ale-py capitalizes each word of the ROM name).
pub fn rom_name(env_id: &str) -> Option<&'static str> {
    let game = env_id.strip_suffix("NoFrameskip-v4")?;
    let camel = |rom: &str| rom.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect::<String>();
    V4_GAMES.iter().copied().find(|rom| camel(rom) == game)
}

/// One ALE emulator running a `<Game>NoFrameskip-v4` game as ale-py registers it: frameskip 1,
/// no sticky actions (repeat_action_probability 0), the minimal action set, truncation after
/// 108,000 frames (ALE's `max_num_frames_per_episode`). Observations are the RGB screen, 210 x 160 in most games
/// (Adventure's is 250 x 160).
pub struct AtariEnv {
    ale: *mut AleInterface,
    rom: CString,
    actions: Vec<i32>,
    /// the screen's rows and columns
    height: usize,
    width: usize,
}

// The emulator is only ever used by the thread that owns the env.
unsafe impl Send for AtariEnv {}

/// ALE keeps some state process-wide: its log mode, and a table that one cartridge type writes as it loads.
/// `VecEnv::reset(Some(seed))` reloads the ROM of every env (as ale-py does to apply a seed), on several threads
/// when `--env-threads` > 1, so every `ale_new` and `ale_load_rom` holds this lock. Stepping (`act`, the screen,
/// ...) touches only the env's own emulator and stays unlocked.
static ALE_LOAD: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn ale_load_lock() -> std::sync::MutexGuard<'static, ()> {
    ALE_LOAD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl AtariEnv {
    /// Loads the game of `env_id` from `rom_dir()`; errors name the game and the fix.
    pub fn new(env_id: &str) -> Result<AtariEnv, EnvError> {
        let rom = rom_name(env_id).ok_or_else(|| EnvError::unknown(env_id))?;
        let dir = rom_dir();
        let path = dir.join(format!("{rom}.bin"));
        if !dir.is_dir() {
            return Err(EnvError(format!(
                "Atari ROM directory {} not found: run scripts/setup (it installs the ROMs of the pip package \
                    ale-py) or set ALE_ROM_DIR",
                dir.display()
            )));
        }
        if !path.is_file() {
            return Err(EnvError(format!(
                "no ROM for {env_id}: {} is missing (is '{rom}' an Atari game? ALE_ROM_DIR overrides the ROM \
                    directory)",
                path.display()
            )));
        }
        Self::load(&path)
    }

    fn load(path: &Path) -> Result<AtariEnv, EnvError> {
        let rom = CString::new(path.to_string_lossy().as_bytes())
            .map_err(|_| EnvError(format!("bad ROM path {}", path.display())))?;
        let _load = ale_load_lock();
        let ale = unsafe { ale_new() };
        if ale.is_null() {
            return Err(EnvError("ALE could not make an emulator".into()));
        }
        // the env owns the emulator from here: an error below frees it
        let mut env = AtariEnv { ale, rom, actions: Vec::new(), height: 0, width: 0 };
        let key = |k: &str| CString::new(k).expect("no NUL in key");
        unsafe {
            ale_set_float(ale, key("repeat_action_probability").as_ptr(), 0.0);
            ale_set_int(ale, key("frame_skip").as_ptr(), 1);
            ale_set_int(ale, key("max_num_frames_per_episode").as_ptr(), MAX_FRAMES_PER_EPISODE);
        }
        env.load_rom()?;
        let mut actions = [0; 32];
        let n = unsafe { ale_minimal_actions(ale, actions.as_mut_ptr(), actions.len()) };
        env.actions = actions[..n.min(actions.len())].to_vec();
        unsafe { ale_screen_dims(ale, &mut env.height, &mut env.width) };
        Ok(env)
    }

    /// Loads (or reloads) the ROM: a new console, its game at the start. The caller holds the load lock.
    fn load_rom(&mut self) -> Result<(), EnvError> {
        let mut error = [0 as c_char; 512];
        if unsafe { ale_load_rom(self.ale, self.rom.as_ptr(), error.as_mut_ptr(), error.len()) } != 0 {
            let reason = unsafe { CStr::from_ptr(error.as_ptr()) }.to_string_lossy();
            return Err(EnvError(format!("ALE cannot load {}: {reason}", self.rom.to_string_lossy())));
        }
        Ok(())
    }

    /// Whether FIRE is one of the game's actions (CleanRL adds FireReset only then).
    pub fn has_fire(&self) -> bool {
        self.actions.contains(&FIRE)
    }

    /// The RGB screen into `obs`, unless the caller passed no buffer.
    fn screen(&self, obs: &mut [u8]) {
        if !obs.is_empty() {
            assert_eq!(obs.len(), self.height * self.width * 3);
            unsafe { ale_screen_rgb(self.ale, obs.as_mut_ptr()) }
        }
    }
}

impl Drop for AtariEnv {
    fn drop(&mut self) {
        unsafe { ale_delete(self.ale) }
    }
}

impl Env for AtariEnv {
    type Obs = u8;
    fn observation_space(&self) -> Space {
        Space::Box {
            shape: vec![self.height, self.width, 3],
            low: vec![0.0; self.height * self.width * 3],
            high: vec![255.0; self.height * self.width * 3],
        }
    }
    fn action_space(&self) -> Space {
        Space::Discrete(self.actions.len())
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [u8]) {
        if let Some(seed) = seed {
            // as ale-py: a new seed reloads the game with it (ALE's own seed: sticky actions only, none here)
            let (_, ale_seed) = ale_py_seeds(seed);
            let _load = ale_load_lock();
            let key = CString::new("random_seed").expect("no NUL");
            unsafe { ale_set_int(self.ale, key.as_ptr(), ale_seed) };
            if let Err(e) = self.load_rom() {
                panic!("{e}"); // it loaded at construction: the ROM changed under the run
            }
        }
        unsafe { ale_reset_game(self.ale) };
        self.screen(obs);
    }
    fn step(&mut self, action: Action, obs: &mut [u8]) -> Step {
        let reward = unsafe { ale_act(self.ale, self.actions[action.discrete()]) };
        self.screen(obs);
        let terminated = unsafe { ale_game_over(self.ale) };
        let truncated = unsafe { ale_game_truncated(self.ale) };
        Step { reward: reward as f64, terminated, truncated, episode: None }
    }
    fn lives(&self) -> u32 {
        unsafe { ale_lives(self.ale) }.max(0) as u32
    }
    fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        rgb.resize(self.height * self.width * 3, 0);
        self.screen(rgb);
        Some((self.width, self.height))
    }
}

/// The game the Atari binaries play: native ALE for a `<Game>NoFrameskip-v4` id, else Gymnasium's env for the id
/// (or for any id as `gymnasium:<id>`, e.g. `ALE/Breakout-v5` or `gymnasium:BreakoutNoFrameskip-v4`), its RGB
/// image observations as they are, its lives and FIRE as ALE's, in a Python process ([`crate::gymnasium`]).
pub struct Game {
    inner: Box<dyn Env<Obs = u8>>,
    has_fire: bool,
}

impl Game {
    /// The game, a Gymnasium env made with [`crate::gymnasium::set_kwargs`]'s keyword arguments.
    pub fn new(env_id: &str) -> Result<Game, EnvError> {
        Game::new_with(env_id, &crate::gymnasium::kwargs())
    }

    /// [`Game::new`] with `gymnasium.make`'s keyword arguments for a Gymnasium env, a JSON object, over those of
    /// ALE's v5 ids (`{"frameskip": 1}`: a key in both is the caller's); a native game given some is an error.
    pub fn new_with(env_id: &str, kwargs: &str) -> Result<Game, EnvError> {
        use crate::gymnasium::{merge_kwargs, Gymnasium, PREFIX};
        if rom_name(env_id).is_some() {
            if !crate::gymnasium::kwargs_object(kwargs)?.is_empty() {
                return Err(crate::gymnasium::native_takes_no_kwargs(env_id));
            }
            let env = AtariEnv::new(env_id)?;
            return Ok(Game { has_fire: env.has_fire(), inner: Box::new(env) });
        }
        // `gymnasium:<id>`, or an id ALE's v4 games do not name: Gymnasium's, through the set-up's Python.
        // ALE's v5 ids skip 4 frames themselves, and the stack's MaxAndSkip skips 4 more: made with frameskip=1,
        // the stack's skip is the only one, as on <Game>NoFrameskip-v4; v5's sticky actions stay
        // (repeat_action_probability=0.25, v5's default)
        let id = env_id.strip_prefix(PREFIX).unwrap_or(env_id);
        let own = if id.starts_with("ALE/") && id.ends_with("-v5") { r#"{"frameskip": 1}"# } else { "{}" };
        let kwargs = merge_kwargs(own, kwargs)?;
        let env = match env_id.strip_prefix(PREFIX) {
            Some(id) => Gymnasium::<u8>::new_with(id, &kwargs)?,
            None => Gymnasium::<u8>::unknown_here_with(env_id, &kwargs)?,
        };
        Ok(Game { has_fire: env.has_fire(), inner: Box::new(env) })
    }

    /// Whether FIRE is one of the game's actions (CleanRL adds FireReset only then).
    pub fn has_fire(&self) -> bool {
        self.has_fire
    }
}

impl Env for Game {
    type Obs = u8;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32; send_step);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [u8]) {
        self.inner.reset(seed, obs)
    }
    fn step(&mut self, action: Action, obs: &mut [u8]) -> Step {
        self.inner.step(action, obs)
    }
}

/// ale-py's seeding of `reset(seed=seed)`: `SeedSequence(seed).generate_state(2)` makes two words. The first seeds the
/// env's `np_random` (numpy's Generator on PCG64); the second, as an int32, is ALE's `random_seed`.
pub fn ale_py_seeds(seed: u64) -> (Pcg64, i32) {
    let words = SeedSequence::new(seed).generate_state_u32(2);
    (Pcg64::new(u64::from(words[0])), words[1] as i32)
}

/// Atari 1: NoopResetEnv: after a reset, play NOOP (action 0) a random 1..=noop_max times. The count comes from the
/// game's `np_random`, as ale-py seeds it ([`ale_py_seeds`]), so a seed gives CleanRL's counts.
pub struct NoopReset<E> {
    inner: E,
    noop_max: u32,
    np_random: Pcg64,
    /// Counts to use instead of random ones, in turn (to replay a reference run).
    replay: Vec<u32>,
    replayed: usize,
}

impl<E: Env> NoopReset<E> {
    pub fn new(inner: E, noop_max: u32) -> Self {
        NoopReset { inner, noop_max, np_random: Pcg64::new(0), replay: Vec::new(), replayed: 0 }
    }

    /// Uses these no-op counts, one per reset, instead of drawing them (then draws again).
    pub fn replaying(mut self, counts: Vec<u32>) -> Self {
        self.replay = counts;
        self
    }

    /// The inner reset; a seeded one reseeds the game's `np_random`, as ale-py's reset does.
    fn reset_inner(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        if let Some(seed) = seed {
            self.np_random = ale_py_seeds(seed).0;
        }
        self.inner.reset(seed, obs);
    }
}

impl<E: Env> Env for NoopReset<E> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.reset_inner(seed, obs);
        let noops = match self.replay.get(self.replayed) {
            Some(&n) => n,
            None => self.np_random.integers(1, i64::from(self.noop_max) + 1) as u32,
        };
        self.replayed += 1;
        for i in 0..noops {
            // only the last no-op's observation is returned
            let target = if i + 1 == noops { &mut *obs } else { &mut [] };
            let step = self.inner.step(Action::Discrete(&[0]), target);
            if step.terminated || step.truncated {
                self.reset_inner(seed, obs); // the same arguments, the seed too, as SB3's wrapper
            }
        }
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        self.inner.step(action, obs)
    }
}

/// Atari 2: MaxAndSkipEnv: repeat the action `skip` times, sum the rewards, and return the
/// pixel-wise max of the last two frames (Atari sprites flicker between frames).
pub struct MaxAndSkip<E: Env> {
    inner: E,
    skip: usize,
    frames: [Vec<E::Obs>; 2],
}

impl<E: Env<Obs = u8>> MaxAndSkip<E> {
    pub fn new(inner: E, skip: usize) -> Self {
        let n = inner.observation_space().flat_dim();
        MaxAndSkip { inner, skip, frames: [vec![0; n], vec![0; n]] }
    }
}

impl<E: Env<Obs = u8>> Env for MaxAndSkip<E> {
    type Obs = u8;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [u8]) {
        self.inner.reset(seed, obs)
    }
    fn step(&mut self, action: Action, obs: &mut [u8]) -> Step {
        let mut total = Step { reward: 0.0, terminated: false, truncated: false, episode: None };
        for i in 0..self.skip {
            // the last two frames land in the buffers; the others are dropped, so never fetched (an empty obs)
            let target = if i + 2 == self.skip {
                &mut self.frames[0][..]
            } else if i + 1 == self.skip {
                &mut self.frames[1][..]
            } else {
                &mut []
            };
            let step = self.inner.step(action, target);
            total = Step { reward: total.reward + step.reward, episode: step.episode.or(total.episode), ..step };
            if step.terminated || step.truncated {
                break; // as the reference, the buffers may then hold older frames: the obs is final anyway
            }
        }
        for ((o, a), b) in obs.iter_mut().zip(&self.frames[0]).zip(&self.frames[1]) {
            *o = (*a).max(*b);
        }
        total
    }
}

/// Atari 3: EpisodicLifeEnv: losing a life ends the training episode (terminated), but the game
/// is only reset when it is really over; otherwise "reset" is one NOOP step.
pub struct EpisodicLife<E> {
    inner: E,
    lives: u32,
    was_real_done: bool,
}

impl<E: Env> EpisodicLife<E> {
    pub fn new(inner: E) -> Self {
        EpisodicLife { inner, lives: 0, was_real_done: true }
    }
}

impl<E: Env> Env for EpisodicLife<E> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        if self.was_real_done {
            self.inner.reset(seed, obs);
        } else {
            let step = self.inner.step(Action::Discrete(&[0]), obs);
            if step.terminated || step.truncated {
                self.inner.reset(seed, obs);
            }
        }
        self.lives = self.inner.lives();
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let mut step = self.inner.step(action, obs);
        self.was_real_done = step.terminated || step.truncated;
        let lives = self.inner.lives();
        if 0 < lives && lives < self.lives {
            step.terminated = true;
        }
        self.lives = lives;
        step
    }
}

/// Atari 4: FireResetEnv: after a reset press FIRE (action 1), then action 2, for games that
/// wait for FIRE to start. `has_fire` false (a game without FIRE) passes resets through, as
/// CleanRL's `make_env` leaves the wrapper out there.
pub struct FireReset<E> {
    inner: E,
    has_fire: bool,
}

impl<E: Env> FireReset<E> {
    pub fn new(inner: E, has_fire: bool) -> Self {
        FireReset { inner, has_fire }
    }
}

impl<E: Env> Env for FireReset<E> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.inner.reset(seed, obs);
        if !self.has_fire {
            return;
        }
        for action in [1, 2] {
            let step = self.inner.step(Action::Discrete(&[action]), obs);
            if step.terminated || step.truncated {
                self.inner.reset(seed, obs);
            }
        }
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        self.inner.step(action, obs)
    }
}

/// Atari 6: ClipRewardEnv: the reward's sign (-1, 0 or +1).
pub struct ClipReward<E> {
    inner: E,
}

impl<E: Env> ClipReward<E> {
    pub fn new(inner: E) -> Self {
        ClipReward { inner }
    }
}

impl<E: Env> Env for ClipReward<E> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.inner.reset(seed, obs)
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let step = self.inner.step(action, obs);
        let reward = if step.reward > 0.0 {
            1.0
        } else if step.reward < 0.0 {
            -1.0
        } else {
            0.0
        };
        Step { reward, ..step }
    }
}

/// Atari 5 (first half): gymnasium's ResizeObservation: OpenCV's INTER_AREA resampling of each
/// channel of an H x W x C image to h x w (each output pixel averages the input area it covers,
/// partially covered pixels weighted by the covered fraction).
pub struct ResizeObservation<E> {
    inner: E,
    src: (usize, usize, usize),
    dst: (usize, usize),
    frame: Vec<u8>,
    /// (dst index, src index, weight) along y, as OpenCV's computeResizeAreaTab; along x the
    /// same weights as a fixed window of TAPS source pixels per output pixel (first index, weights)
    ytab: Vec<(usize, usize, f32)>,
    xtaps: Vec<(usize, [f32; TAPS])>,
    /// every source row after the horizontal pass, then the output before rounding
    rows: Vec<f32>,
    sums: Vec<f32>,
}

/// OpenCV's area-resampling table for one axis: `ssize` source pixels onto `dsize`.
fn area_table(ssize: usize, dsize: usize) -> Vec<(usize, usize, f32)> {
    let scale = 1.0 / (dsize as f64 / ssize as f64);
    let mut tab = Vec::new();
    for d in 0..dsize {
        let f1 = d as f64 * scale;
        let f2 = f1 + scale;
        let cell = scale.min(ssize as f64 - f1);
        let s2 = (f2.floor() as usize).min(ssize - 1);
        let s1 = (f1.ceil() as usize).min(s2);
        if s1 as f64 - f1 > 1e-3 {
            tab.push((d, s1 - 1, ((s1 as f64 - f1) / cell) as f32));
        }
        for s in s1..s2 {
            tab.push((d, s, (1.0 / cell) as f32));
        }
        if f2 - s2 as f64 > 1e-3 {
            tab.push((d, s2, ((f2 - s2 as f64).min(1.0).min(cell) / cell) as f32));
        }
    }
    tab
}

/// Source pixels one output pixel can cover when shrinking by less than 3x (160 -> 84: 1.9).
const TAPS: usize = 4;

/// An area table regrouped per output pixel: the first source pixel of a TAPS-wide window and
/// the weight of each pixel in it (zero where the pixel is not covered).
fn window_taps(tab: &[(usize, usize, f32)], dsize: usize, ssize: usize) -> Vec<(usize, [f32; TAPS])> {
    (0..dsize)
        .map(|d| {
            let entries: Vec<_> = tab.iter().filter(|e| e.0 == d).collect();
            let first = entries[0].1.min(ssize - TAPS);
            let mut taps = [0.0; TAPS];
            for &&(_, s, w) in &entries {
                assert!(s - first < TAPS, "ResizeObservation shrinks by at most {}x", TAPS - 1);
                taps[s - first] = w;
            }
            (first, taps)
        })
        .collect()
}

/// Resamples each row of `src` (rows of `w` pixels of C channels) with the per-output-pixel
/// windows `xtaps`, summing in source order as OpenCV does (zero taps add exactly nothing).
fn horizontal<const C: usize>(src: &[u8], rows: &mut [f32], xtaps: &[(usize, [f32; TAPS])], w: usize) {
    let dw = xtaps.len();
    for (src, row) in src.chunks_exact(w * C).zip(rows.chunks_exact_mut(dw * C)) {
        for (&(first, taps), out) in xtaps.iter().zip(row.chunks_exact_mut(C)) {
            let window = &src[first * C..(first + TAPS) * C];
            let mut acc = [0f32; C];
            for (j, t) in taps.iter().enumerate() {
                for (k, a) in acc.iter_mut().enumerate() {
                    *a += t * window[j * C + k] as f32;
                }
            }
            out.copy_from_slice(&acc);
        }
    }
}

impl<E: Env<Obs = u8>> ResizeObservation<E> {
    /// Panics unless the inner observation is an H x W x 1 or H x W x 3 box (a caller bug).
    pub fn new(inner: E, height: usize, width: usize) -> Self {
        let Space::Box { shape, .. } = inner.observation_space() else {
            panic!("ResizeObservation needs a Box observation")
        };
        let [h, w, c @ (1 | 3)] = shape[..] else {
            panic!("ResizeObservation needs an H x W x 1 or 3 observation, got {shape:?}")
        };
        ResizeObservation {
            inner,
            src: (h, w, c),
            dst: (height, width),
            frame: vec![0; h * w * c],
            xtaps: window_taps(&area_table(w, width), width, w),
            ytab: area_table(h, height),
            rows: vec![0.0; h * width * c],
            sums: vec![0.0; height * width * c],
        }
    }

    fn resize(&mut self, out: &mut [u8]) {
        let ((h, w, c), (dh, dw)) = (self.src, self.dst);
        // horizontal pass: every source row resampled to dw pixels once
        match c {
            1 => horizontal::<1>(&self.frame, &mut self.rows, &self.xtaps, w),
            3 => horizontal::<3>(&self.frame, &mut self.rows, &self.xtaps, w),
            _ => unreachable!("checked in new"),
        }
        // vertical pass, summing each output row's source rows in OpenCV's order
        self.sums.fill(0.0);
        for &(dy, sy, beta) in &self.ytab {
            let row = &self.rows[sy * dw * c..(sy + 1) * dw * c];
            for (s, r) in self.sums[dy * dw * c..(dy + 1) * dw * c].iter_mut().zip(row) {
                *s += beta * r;
            }
        }
        debug_assert_eq!(self.rows.len(), h * dw * c);
        debug_assert_eq!(out.len(), dh * dw * c);
        // OpenCV's saturate_cast<uchar>: round half to even, clamp to 0..=255
        for (o, s) in out.iter_mut().zip(&self.sums) {
            *o = s.round_ties_even().clamp(0.0, 255.0) as u8;
        }
    }
}
impl<E: Env<Obs = u8>> Env for ResizeObservation<E> {
    type Obs = u8;
    forward!(action_space -> Space, lives -> u32);
    fn observation_space(&self) -> Space {
        let n = self.dst.0 * self.dst.1 * self.src.2;
        Space::Box { shape: vec![self.dst.0, self.dst.1, self.src.2], low: vec![0.0; n], high: vec![255.0; n] }
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [u8]) {
        self.inner.reset(seed, &mut self.frame);
        self.resize(obs);
    }
    fn step(&mut self, action: Action, obs: &mut [u8]) -> Step {
        let step = self.inner.step(action, &mut self.frame);
        self.resize(obs);
        step
    }
}

/// Atari 5 (second half): gymnasium's GrayScaleObservation: OpenCV 4's RGB->gray for u8, in 15-bit fixed point,
/// (9798 R + 19235 G + 3735 B + 2^14) >> 15, i.e. 0.299 R + 0.587 G + 0.114 B rounded.
pub struct GrayScale<E> {
    inner: E,
    shape: (usize, usize),
    frame: Vec<u8>,
}

impl<E: Env<Obs = u8>> GrayScale<E> {
    /// Panics unless the inner observation is an H x W x 3 box (a caller bug).
    pub fn new(inner: E) -> Self {
        let Space::Box { shape, .. } = inner.observation_space() else { panic!("GrayScale needs a Box observation") };
        let [h, w, 3] = shape[..] else { panic!("GrayScale needs an H x W x 3 observation, got {shape:?}") };
        GrayScale { inner, shape: (h, w), frame: vec![0; h * w * 3] }
    }

    fn gray(&self, out: &mut [u8]) {
        for (o, px) in out.iter_mut().zip(self.frame.chunks_exact(3)) {
            *o = ((9798 * px[0] as u32 + 19235 * px[1] as u32 + 3735 * px[2] as u32 + (1 << 14)) >> 15) as u8;
        }
    }
}

impl<E: Env<Obs = u8>> Env for GrayScale<E> {
    type Obs = u8;
    forward!(action_space -> Space, lives -> u32);
    fn observation_space(&self) -> Space {
        let n = self.shape.0 * self.shape.1;
        Space::Box { shape: vec![self.shape.0, self.shape.1], low: vec![0.0; n], high: vec![255.0; n] }
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [u8]) {
        self.inner.reset(seed, &mut self.frame);
        self.gray(obs);
    }
    fn step(&mut self, action: Action, obs: &mut [u8]) -> Step {
        let step = self.inner.step(action, &mut self.frame);
        self.gray(obs);
        step
    }
}

/// Atari 7: FrameStack: the last `k` observations, oldest first (after a reset, k copies of
/// the first one).
pub struct FrameStack<E: Env> {
    inner: E,
    k: usize,
    frame: Vec<E::Obs>,
}

impl<E: Env> FrameStack<E> {
    pub fn new(inner: E, k: usize) -> Self {
        let n = inner.observation_space().flat_dim();
        FrameStack { inner, k, frame: vec![E::Obs::default(); n] }
    }
}

impl<E: Env> Env for FrameStack<E> {
    type Obs = E::Obs;
    forward!(action_space -> Space, lives -> u32);
    fn observation_space(&self) -> Space {
        let Space::Box { shape, low, high } = self.inner.observation_space() else {
            panic!("FrameStack needs a Box observation")
        };
        Space::Box { shape: [vec![self.k], shape].concat(), low: low.repeat(self.k), high: high.repeat(self.k) }
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.inner.reset(seed, &mut self.frame);
        for slot in obs.chunks_exact_mut(self.frame.len()) {
            slot.copy_from_slice(&self.frame);
        }
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let step = self.inner.step(action, &mut self.frame);
        let n = self.frame.len();
        obs.copy_within(n.., 0);
        obs[(self.k - 1) * n..].copy_from_slice(&self.frame);
        step
    }
}
