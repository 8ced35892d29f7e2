use crate::Space;

/// One environment's action, as the flat values of its action space.
#[derive(Debug, Clone, Copy)]
pub enum Action<'a> {
    /// `Discrete` (one value) or `MultiDiscrete` (one per component).
    Discrete(&'a [i64]),
    /// `Box` actions.
    Continuous(&'a [f32]),
}

impl Action<'_> {
    /// The single integer of a `Discrete` action; panics on any other kind (a caller bug).
    pub fn discrete(&self) -> usize {
        match self {
            Action::Discrete([a]) => *a as usize,
            other => panic!("expected one discrete action, got {other:?}"),
        }
    }
}

/// A finished episode's undiscounted return and length (gymnasium's `info["episode"]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    pub r: f64,
    pub l: u64,
}

/// What one `step` returns besides the observation, which is written in place.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub reward: f64,
    pub terminated: bool,
    pub truncated: bool,
    /// Set by `RecordEpisodeStatistics` on the step that ends an episode; wrappers outside it
    /// pass it through.
    pub episode: Option<Episode>,
}

/// A single environment, shaped like gymnasium's `Env`: `reset` seeds the env's own RNG when
/// given a seed (and keeps drawing from it otherwise); observations are written into `obs`,
/// a slice of `observation_space().flat_dim()` values of type `Obs` (f32 for classic control,
/// u8 pixels for Atari), so stepping allocates nothing. A caller that will not read an
/// observation may pass an empty `obs`; the env may then skip producing it (MaxAndSkip does
/// this for the frames it drops, which saves the ALE's screen conversion).
pub trait Env: Send {
    type Obs: Copy + Default + Send + Sync + 'static;
    fn observation_space(&self) -> Space;
    fn action_space(&self) -> Space;
    fn reset(&mut self, seed: Option<u64>, obs: &mut [Self::Obs]);
    fn step(&mut self, action: Action, obs: &mut [Self::Obs]) -> Step;
    /// Starts `step(action)` without waiting for it, for an env that runs elsewhere (Gymnasium's, in a Python
    /// process): the next `step`, with the same action, finishes it. `VecEnv::step` starts every env's step first, so
    /// that they run at once. The default does nothing (the step happens in `step`); a wrapper that leaves actions
    /// as they are passes it through (`forward!(..., send_step)`), one that changes them sends what it would step.
    fn send_step(&mut self, _action: Action) {}
    /// Lives left in the game, for envs that have them (ALE); wrappers pass it through.
    fn lives(&self) -> u32 {
        0
    }
    /// The current observation's valid actions, one flag per logit (`Space::mask_dim` entries:
    /// `n` for `Discrete`, component after component for `MultiDiscrete`); `None` (the default)
    /// for envs whose actions are always all valid. Wrappers pass it through.
    fn action_mask(&self) -> Option<&[bool]> {
        None
    }
    /// gymnasium's `render()` in `rgb_array` mode: the current state drawn into `rgb` (row-major RGB
    /// bytes, resized as needed); its (width, height), or `None` for envs that cannot draw
    /// themselves (the default). Wrappers pass it through.
    fn render(&self, _rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        None
    }
    /// The innermost env, for callers that need its concrete type (gymnasium's `unwrapped`),
    /// e.g. `env.unwrapped().and_then(|e| e.downcast_mut::<ResSim>())`; wrappers pass it
    /// through. `None` for envs that do not offer it.
    fn unwrapped(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
}

impl<T: Copy + Default + Send + Sync + 'static> Env for Box<dyn Env<Obs = T>> {
    type Obs = T;
    fn observation_space(&self) -> Space {
        (**self).observation_space()
    }
    fn action_space(&self) -> Space {
        (**self).action_space()
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [T]) {
        (**self).reset(seed, obs)
    }
    fn step(&mut self, action: Action, obs: &mut [T]) -> Step {
        (**self).step(action, obs)
    }
    fn send_step(&mut self, action: Action) {
        (**self).send_step(action)
    }
    fn lives(&self) -> u32 {
        (**self).lives()
    }
    fn action_mask(&self) -> Option<&[bool]> {
        (**self).action_mask()
    }
    fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        (**self).render(rgb)
    }
    fn unwrapped(&mut self) -> Option<&mut dyn std::any::Any> {
        (**self).unwrapped()
    }
}

/// Inside a wrapper's `impl Env`: methods passed to `self.inner` unchanged, e.g.
/// `forward!(observation_space -> Space, lives -> u32);`, and always `action_mask`, `render` and
/// `unwrapped`; ending in `; send_step`, also `send_step` (a wrapper that leaves the action as it is).
macro_rules! forward {
    ($($method:ident -> $ty:ty),*; send_step) => {
        forward!($($method -> $ty),*);
        fn send_step(&mut self, action: Action) {
            self.inner.send_step(action)
        }
    };
    ($($method:ident -> $ty:ty),*) => {
        $(fn $method(&self) -> $ty {
            self.inner.$method()
        })*
        fn action_mask(&self) -> Option<&[bool]> {
            self.inner.action_mask()
        }
        fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
            self.inner.render(rgb)
        }
        fn unwrapped(&mut self) -> Option<&mut dyn std::any::Any> {
            self.inner.unwrapped()
        }
    };
}
pub(crate) use forward;

/// gymnasium's `TimeLimit`: truncates the episode after `max_steps` steps.
pub struct TimeLimit<E> {
    inner: E,
    max_steps: u32,
    elapsed: u32,
}

impl<E: Env> TimeLimit<E> {
    pub fn new(inner: E, max_steps: u32) -> Self {
        TimeLimit { inner, max_steps, elapsed: 0 }
    }
}

impl<E: Env> Env for TimeLimit<E> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32; send_step);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.elapsed = 0;
        self.inner.reset(seed, obs)
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let mut step = self.inner.step(action, obs);
        self.elapsed += 1;
        step.truncated |= self.elapsed >= self.max_steps;
        step
    }
}

/// gymnasium's `RecordEpisodeStatistics`: sums the rewards it sees and reports the return and
/// length on the step that ends the episode. Where it sits in a wrapper stack decides what it
/// measures (innermost on Atari: the raw game score). As in gymnasium 0.29, the return is a float32 sum
/// of the rewards rounded to float32.
pub struct RecordEpisodeStatistics<E> {
    inner: E,
    ret: f32,
    len: u64,
}

impl<E: Env> RecordEpisodeStatistics<E> {
    pub fn new(inner: E) -> Self {
        RecordEpisodeStatistics { inner, ret: 0.0, len: 0 }
    }
}

impl<E: Env> Env for RecordEpisodeStatistics<E> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32; send_step);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        (self.ret, self.len) = (0.0, 0);
        self.inner.reset(seed, obs)
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let mut step = self.inner.step(action, obs);
        self.ret += step.reward as f32;
        self.len += 1;
        if step.terminated || step.truncated {
            step.episode = Some(Episode { r: self.ret as f64, l: self.len });
            (self.ret, self.len) = (0.0, 0);
        }
        step
    }
}
