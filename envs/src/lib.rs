//! Gymnasium-shaped environments for the ppo-details binaries.
//!
//! The crate is deliberately thin: spaces, a single-env trait with the standard wrappers, a
//! vectorized env with gymnasium 0.29's auto-reset, native classic-control environments written
//! to match gymnasium step for step (`tests/golden.rs`), and Atari through the native ALE with
//! CleanRL's wrappers (`atari`, `tests/atari.rs`), and MuJoCo locomotion on the real MuJoCo
//! library with gymnasium's v4 rewards and terminations (`mujoco`, `tests/mujoco.rs`).

pub mod atari;
mod check;
mod classic;
mod env;
pub mod gymnasium;
pub mod harvest;
mod ids;
pub mod microrts;
pub mod mujoco;
pub mod numpy;
mod render;
pub mod ressim;
mod spaces;
mod vector;
mod video;
mod wrappers;

pub use check::check_env;
pub use classic::{Acrobot, CartPole, MountainCar, MountainCarContinuous, Pendulum};
pub use env::{Action, Env, Episode, RecordEpisodeStatistics, Step, TimeLimit};
pub use ids::{check_id, check_kwargs, runs_gymnasium};
pub use spaces::Space;
pub use vector::{FinishedEpisode, VecEnv};
pub use video::RecordVideo;
pub use wrappers::{
    ClipAction, NormalizeObservation, NormalizeReward, ObsAsF32, RunningMeanStd, SharedRms, TransformObservation,
    TransformReward,
};

/// The environment ids `make` knows, with gymnasium's `max_episode_steps` for each.
pub const KNOWN_ENVS: &[(&str, u32)] = &[
    ("CartPole-v1", 500),
    ("Acrobot-v1", 500),
    ("MountainCar-v0", 200),
    ("Pendulum-v1", 200),
    ("MountainCarContinuous-v0", 999),
    ("HalfCheetah-v4", 1000),
    ("Hopper-v4", 1000),
    ("Walker2d-v4", 1000),
    ("InvertedPendulum-v4", 1000),
    ("Ant-v4", 1000),
    ("Humanoid-v4", 1000),
    ("HumanoidStandup-v4", 1000),
    ("InvertedDoublePendulum-v4", 1000),
    ("Pusher-v4", 100),
    ("Reacher-v4", 50),
    ("Swimmer-v4", 1000),
    ("CartPoleNoVel-v1", 500),
    ("MountainCarNoVel-v0", 200),
    ("PendulumNoVel-v1", 200),
    ("MountainCarContinuousNoVel-v0", 999),
    (harvest::ID, harvest::EPISODE_STEPS),
];

/// Why an environment could not be made: a one-line message that names the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvError(pub String);

impl EnvError {
    /// An id nobody knows; the message lists every id envs makes (a binary's own list of the
    /// ids it runs comes from `check_id`).
    pub fn unknown(id: &str) -> EnvError {
        EnvError(format!("unknown env id '{id}'; known ids: {}", ids::all()))
    }
}

impl std::fmt::Display for EnvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EnvError {}

/// So that `check_id(..)?` and `make(..)?` work in a function that returns `Result<_, String>`.
impl From<EnvError> for String {
    fn from(e: EnvError) -> String {
        e.0
    }
}

/// rl-baselines3-zoo's `MaskVelocityWrapper` (its `<Env>NoVel-v<N>` ids): the observation times a
/// 0/1 mask that hides the velocities, a partially observed task for recurrent policies. Same
/// arithmetic: a negative velocity reads -0.0, as numpy's `observation * mask` gives.
fn no_velocity(indices: &'static [usize]) -> impl Fn(&mut [f32]) + Send {
    move |obs: &mut [f32]| indices.iter().for_each(|&i| obs[i] *= 0.0)
}

/// `gym.make(id)`: the environment inside its `TimeLimit`, as gymnasium registers it. An id envs does not
/// implement, or any id as `gymnasium:<id>`, is Gymnasium's own env in a Python process ([`gymnasium`]), made with
/// [`gymnasium::set_kwargs`]'s keyword arguments; a native env given some is an error.
/// The ressim configurations (`ResSim-case1`, `ResSim-v1`) come on their finest level, with
/// no time limit (their episodes end after 5 control steps); `ressim::make` gives other levels.
pub fn make(id: &str) -> Result<Box<dyn Env<Obs = f32>>, EnvError> {
    // --env-kwargs, for an env made by Gymnasium (gymnasium::set_kwargs)
    let kwargs = gymnasium::kwargs();
    let env: Box<dyn Env<Obs = f32>> = match id.strip_prefix(gymnasium::PREFIX) {
        Some(id) => Box::new(gymnasium::Gymnasium::<f32>::new_with(id, &kwargs)?),
        None => match make_env(id) {
            // an id envs does not implement: Gymnasium's, through the set-up's Python
            Err(unknown) if unknown == EnvError::unknown(id) => {
                Box::new(gymnasium::Gymnasium::<f32>::unknown_here_with(id, &kwargs)?)
            }
            Ok(_) if gymnasium::has_kwargs() => return Err(gymnasium::native_takes_no_kwargs(id)),
            made => made?,
        },
    };
    // tests only (the cargo feature test-hooks): ENVS_NAN_REWARD=<seed>:<step>
    #[cfg(feature = "test-hooks")]
    let env = nan_reward::wrap(env)?;
    Ok(env)
}

/// [`make`]'s env.
fn make_env(id: &str) -> Result<Box<dyn Env<Obs = f32>>, EnvError> {
    if ressim::IDS.contains(&id) {
        return Ok(Box::new(ressim::make(id, None)?));
    }
    if let Some(max_steps) = microrts::max_steps(id) {
        return Ok(Box::new(TimeLimit::new(microrts::Microrts::new(id)?, max_steps)));
    }
    let &(_, max_steps) = KNOWN_ENVS.iter().find(|(known, _)| *known == id).ok_or_else(|| EnvError::unknown(id))?;
    Ok(match id {
        "CartPole-v1" => Box::new(TimeLimit::new(CartPole::new(), max_steps)),
        "Acrobot-v1" => Box::new(TimeLimit::new(Acrobot::new(), max_steps)),
        "MountainCar-v0" => Box::new(TimeLimit::new(MountainCar::new(), max_steps)),
        "Pendulum-v1" => Box::new(TimeLimit::new(Pendulum::new(), max_steps)),
        "MountainCarContinuous-v0" => Box::new(TimeLimit::new(MountainCarContinuous::new(), max_steps)),
        "CartPoleNoVel-v1" => {
            Box::new(TimeLimit::new(TransformObservation::new(CartPole::new(), no_velocity(&[1, 3])), max_steps))
        }
        "MountainCarNoVel-v0" => {
            Box::new(TimeLimit::new(TransformObservation::new(MountainCar::new(), no_velocity(&[1])), max_steps))
        }
        "PendulumNoVel-v1" => {
            Box::new(TimeLimit::new(TransformObservation::new(Pendulum::new(), no_velocity(&[2])), max_steps))
        }
        "MountainCarContinuousNoVel-v0" => Box::new(TimeLimit::new(
            TransformObservation::new(MountainCarContinuous::new(), no_velocity(&[1])),
            max_steps,
        )),
        harvest::ID => Box::new(TimeLimit::new(harvest::GridHarvest::new(), max_steps)),
        id if mujoco::IDS.contains(&id) => Box::new(TimeLimit::new(mujoco::MujocoEnv::new(id)?, max_steps)),
        _ => unreachable!("every id in KNOWN_ENVS has a constructor"),
    })
}

/// A testing aid of the test suite's build only (the cargo feature `test-hooks`), for what a run does with a
/// non-finite value (tests/ppo_seeds.rs): with `ENVS_NAN_REWARD=<seed>:<step>`, each env [`make`] makes returns a
/// NaN reward at its `<step>`-th step after a reset with seed `<seed>` (and at no other).
#[cfg(feature = "test-hooks")]
mod nan_reward {
    use super::{Action, Env, EnvError, Space, Step};

    pub(super) fn wrap(env: Box<dyn Env<Obs = f32>>) -> Result<Box<dyn Env<Obs = f32>>, EnvError> {
        let Some(var) = std::env::var_os("ENVS_NAN_REWARD") else { return Ok(env) };
        let at =
            var.to_str().and_then(|v| v.split_once(':')).and_then(|(s, n)| Some((s.parse().ok()?, n.parse().ok()?)));
        let (seed, step) = at.ok_or_else(|| EnvError(format!("ENVS_NAN_REWARD={var:?}: expected <seed>:<step>")))?;
        Ok(Box::new(NanRewardAt { inner: env, seed, step, steps: None }))
    }

    struct NanRewardAt {
        inner: Box<dyn Env<Obs = f32>>,
        seed: u64,
        step: u64,
        /// the steps since the reset with that seed (None: not reset with it)
        steps: Option<u64>,
    }

    impl Env for NanRewardAt {
        type Obs = f32;
        fn observation_space(&self) -> Space {
            self.inner.observation_space()
        }
        fn action_space(&self) -> Space {
            self.inner.action_space()
        }
        fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
            if seed.is_some() {
                self.steps = (seed == Some(self.seed)).then_some(0);
            }
            self.inner.reset(seed, obs)
        }
        fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
            let mut step = self.inner.step(action, obs);
            self.steps = self.steps.map(|n| n + 1);
            if self.steps == Some(self.step) {
                step.reward = f64::NAN;
            }
            step
        }
        fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
            self.inner.render(rgb)
        }
        fn lives(&self) -> u32 {
            self.inner.lives()
        }
        fn action_mask(&self) -> Option<&[bool]> {
            self.inner.action_mask()
        }
        fn unwrapped(&mut self) -> Option<&mut dyn std::any::Any> {
            self.inner.unwrapped()
        }
    }
}
