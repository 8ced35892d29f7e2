//! `envs::check_env`: a well-behaved env passes; each way an env of one's own can break the contract the binaries
//! rely on is one error naming it (docs/your-env.md).

use envs::{check_env, Action, Env, Space, Step};

/// A walk on a line, 0..=4, with one flaw switched on at a time.
#[derive(Default, Clone, Copy)]
struct Walk {
    x: f32,
    start: f32,
    flaw: Flaw,
}

#[derive(Default, Clone, Copy, PartialEq)]
enum Flaw {
    #[default]
    None,
    /// `reset` ignores its seed: each reset starts elsewhere
    Unseeded,
    /// an observation outside the box after a few steps
    OutOfBounds,
    /// a NaN observation after reset
    NanObservation,
    /// a NaN reward at step 3
    NanReward,
    /// no actions at all
    NoActions,
    /// bounds in the wrong order
    BoundsReversed,
}

impl Env for Walk {
    type Obs = f32;
    fn observation_space(&self) -> Space {
        match self.flaw {
            Flaw::BoundsReversed => Space::bounded_box(vec![4.0], vec![0.0]),
            _ => Space::bounded_box(vec![0.0], vec![4.0]),
        }
    }
    fn action_space(&self) -> Space {
        Space::Discrete(if self.flaw == Flaw::NoActions { 0 } else { 2 })
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        self.start = match (self.flaw, seed) {
            (Flaw::Unseeded, _) => (self.start + 1.0) % 5.0,
            (_, Some(seed)) => (seed % 5) as f32,
            (_, None) => self.start,
        };
        self.x = self.start;
        obs[0] = if self.flaw == Flaw::NanObservation { f32::NAN } else { self.x };
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        self.x += if action.discrete() == 1 { 1.0 } else { -1.0 };
        let out = self.flaw == Flaw::OutOfBounds;
        if !out {
            self.x = self.x.clamp(0.0, 4.0);
        }
        obs[0] = self.x;
        let reward = if self.flaw == Flaw::NanReward && self.x >= 1.0 { f64::NAN } else { 0.0 };
        Step { reward, terminated: self.x == 4.0, truncated: false, episode: None }
    }
}

/// A sound env passes `check_env` over 100 steps. The check leaves it reset with seed 0, at its start.
#[test]
fn a_sound_env_passes_and_is_left_reset_with_seed_0() {
    let mut env = Walk::default();
    assert_eq!(check_env(&mut env, 100), Ok(()));
    assert_eq!(env.x, 0.0);
}

/// Each of six flaws fails `check_env` with one line that names the broken contract. The flaws are a reset that ignores
/// its seed, an observation outside the box, a NaN observation, a NaN reward, no actions and bounds in the wrong order.
/// Each line starts "your env breaks the Env contract: " and ends by citing docs/your-env.md.
#[test]
fn each_broken_contract_is_one_error_naming_it() {
    for (flaw, words) in [
        (Flaw::Unseeded, "reset(Some(0)) twice gave [1.0], then [2.0]: a seed must fix the start"),
        (Flaw::OutOfBounds, "observation[0] is -1, outside [0, 4]"),
        (Flaw::NanObservation, "after reset(Some(0)), observation[0] is NaN"),
        (Flaw::NanReward, "returned the reward NaN"),
        (Flaw::NoActions, "its action space Discrete(0) has no actions"),
        (Flaw::BoundsReversed, "its observation box has low 4 above high 0 at 0"),
    ] {
        let mut env = Walk { flaw, ..Walk::default() };
        let err = check_env(&mut env, 100).expect_err("a broken env").to_string();
        assert!(err.starts_with("your env breaks the Env contract: "), "{err}");
        assert!(err.contains(words) && err.ends_with("(docs/your-env.md)") && !err.contains('\n'), "{err}");
    }
}

/// The package's own classic-control envs keep the contract they ask of yours.
#[test]
fn the_classic_envs_pass() {
    for id in
        ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0", "CartPoleNoVel-v1"]
    {
        let mut env = envs::make(id).expect("a native env");
        assert_eq!(check_env(&mut *env, 1000), Ok(()), "{id}");
    }
}
