//! gymnasium 0.29's wrappers for continuous control, as CleanRL stacks them in
//! `ppo_continuous_action.py`: ClipAction, NormalizeObservation, TransformObservation,
//! NormalizeReward, TransformReward. Same arithmetic as gymnasium's (float64 statistics).

use crate::env::forward;
use crate::{Action, Env, Space, Step};
use std::sync::{Arc, Mutex, MutexGuard};

/// gymnasium's `RunningMeanStd`: running mean and variance (Chan et al.'s parallel update),
/// starting from mean 0, variance 1 and a count of 1e-4.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningMeanStd {
    pub mean: Vec<f64>,
    pub var: Vec<f64>,
    pub count: f64,
}

impl RunningMeanStd {
    pub fn new(dim: usize) -> Self {
        RunningMeanStd { mean: vec![0.0; dim], var: vec![1.0; dim], count: 1e-4 }
    }

    /// Adds one sample (a batch of one: batch mean `x`, batch variance 0).
    pub fn update(&mut self, x: impl IntoIterator<Item = f64>) {
        let tot_count = self.count + 1.0;
        for ((mean, var), x) in self.mean.iter_mut().zip(self.var.iter_mut()).zip(x) {
            let delta = x - *mean;
            *mean += delta * 1.0 / tot_count;
            let m2 = *var * self.count + 0.0 + delta * delta * self.count * 1.0 / tot_count;
            *var = m2 / tot_count;
        }
        self.count = tot_count;
    }
}

/// gymnasium's `ClipAction`: clips a `Box` action to the action space's bounds (other action
/// spaces pass through, so a caller can report a wrong space itself).
pub struct ClipAction<E> {
    inner: E,
    low: Vec<f32>,
    high: Vec<f32>,
    clipped: Vec<f32>,
}

impl<E: Env> ClipAction<E> {
    pub fn new(inner: E) -> Self {
        let (low, high) = match inner.action_space() {
            Space::Box { low, high, .. } => (low, high),
            _ => (vec![], vec![]),
        };
        let clipped = vec![0.0; low.len()];
        ClipAction { inner, low, high, clipped }
    }
}

impl<E: Env> ClipAction<E> {
    fn clip(&mut self, a: &[f32]) {
        for (((c, &a), &lo), &hi) in self.clipped.iter_mut().zip(a).zip(&self.low).zip(&self.high) {
            *c = a.max(lo).min(hi); // np.clip
        }
    }
}

impl<E: Env> Env for ClipAction<E> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.inner.reset(seed, obs)
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let Action::Continuous(a) = action else { return self.inner.step(action, obs) };
        self.clip(a);
        self.inner.step(Action::Continuous(&self.clipped), obs)
    }
    fn send_step(&mut self, action: Action) {
        let Action::Continuous(a) = action else { return self.inner.send_step(action) };
        self.clip(a); // what `step` will step
        self.inner.send_step(Action::Continuous(&self.clipped))
    }
}

/// A handle on a wrapper's running statistics (`NormalizeObservation`'s or `NormalizeReward`'s),
/// readable and writable from outside the env stack: to save them with a model or a checkpoint,
/// and to restore them when a run resumes.
#[derive(Debug, Clone)]
pub struct SharedRms(Arc<Mutex<RunningMeanStd>>);

impl SharedRms {
    pub fn new(rms: RunningMeanStd) -> Self {
        SharedRms(Arc::new(Mutex::new(rms)))
    }

    pub fn lock(&self) -> MutexGuard<'_, RunningMeanStd> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// gymnasium's `NormalizeObservation`: keeps running statistics of the observations it sees
/// (reset ones included) and returns `(obs - mean) / sqrt(var + 1e-8)`. `frozen_with` switches
/// to given statistics that are no longer updated (evaluating a saved model).
pub struct NormalizeObservation<E> {
    inner: E,
    stats: SharedRms,
    update: bool,
    raw: Vec<f64>,
}

impl<E: Env<Obs = f32>> NormalizeObservation<E> {
    pub fn new(inner: E) -> Self {
        let dim = inner.observation_space().flat_dim();
        Self::with(inner, RunningMeanStd::new(dim), true)
    }

    /// With `Some(stats)`: uses them from now on, frozen; with `None`: unchanged.
    pub fn frozen_with(self, stats: Option<RunningMeanStd>) -> Self {
        match stats {
            Some(stats) => Self::with(self.inner, stats, false),
            None => self,
        }
    }

    fn with(inner: E, stats: RunningMeanStd, update: bool) -> Self {
        let dim = inner.observation_space().flat_dim();
        assert_eq!(stats.mean.len(), dim, "observation statistics of the wrong size");
        NormalizeObservation { inner, stats: SharedRms::new(stats), update, raw: vec![0.0; dim] }
    }

    pub fn stats(&self) -> SharedRms {
        self.stats.clone()
    }

    fn normalize(&mut self, obs: &mut [f32]) {
        let mut rms = self.stats.lock();
        for (r, &o) in self.raw.iter_mut().zip(obs.iter()) {
            *r = o as f64;
        }
        if self.update {
            rms.update(self.raw.iter().copied());
        }
        for ((o, &x), (&mean, &var)) in obs.iter_mut().zip(&self.raw).zip(rms.mean.iter().zip(&rms.var)) {
            *o = ((x - mean) / (var + 1e-8).sqrt()) as f32;
        }
    }
}

impl<E: Env<Obs = f32>> Env for NormalizeObservation<E> {
    type Obs = f32;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32; send_step);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        self.inner.reset(seed, obs);
        self.normalize(obs);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let step = self.inner.step(action, obs);
        self.normalize(obs);
        step
    }
}

/// gymnasium's `TransformObservation`: applies `f` to every observation.
pub struct TransformObservation<E, F> {
    inner: E,
    f: F,
}

impl<E: Env, F: Fn(&mut [E::Obs]) + Send> TransformObservation<E, F> {
    pub fn new(inner: E, f: F) -> Self {
        TransformObservation { inner, f }
    }
}

impl<E: Env, F: Fn(&mut [E::Obs]) + Send> Env for TransformObservation<E, F> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32; send_step);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.inner.reset(seed, obs);
        (self.f)(obs);
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let step = self.inner.step(action, obs);
        (self.f)(obs);
        step
    }
}

/// gymnasium's `NormalizeReward`: divides rewards by the running standard deviation of the
/// discounted return `G = gamma * G * (1 - terminated) + r` (truncation does not reset G).
pub struct NormalizeReward<E> {
    inner: E,
    gamma: f64,
    ret: f64,
    return_rms: SharedRms,
}

impl<E: Env> NormalizeReward<E> {
    pub fn new(inner: E, gamma: f64) -> Self {
        NormalizeReward { inner, gamma, ret: 0.0, return_rms: SharedRms::new(RunningMeanStd::new(1)) }
    }

    /// The running statistics of the discounted return.
    pub fn stats(&self) -> SharedRms {
        self.return_rms.clone()
    }
}

impl<E: Env> Env for NormalizeReward<E> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32; send_step);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.inner.reset(seed, obs)
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let mut step = self.inner.step(action, obs);
        self.ret = self.ret * self.gamma * (1.0 - step.terminated as u8 as f64) + step.reward;
        let mut return_rms = self.return_rms.lock();
        return_rms.update([self.ret]);
        step.reward /= (return_rms.var[0] + 1e-8).sqrt();
        step
    }
}

/// gymnasium's `TransformReward`: applies `f` to every reward.
pub struct TransformReward<E, F> {
    inner: E,
    f: F,
}

impl<E: Env, F: Fn(f64) -> f64 + Send> TransformReward<E, F> {
    pub fn new(inner: E, f: F) -> Self {
        TransformReward { inner, f }
    }
}

impl<E: Env, F: Fn(f64) -> f64 + Send> Env for TransformReward<E, F> {
    type Obs = E::Obs;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32; send_step);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [E::Obs]) {
        self.inner.reset(seed, obs)
    }
    fn step(&mut self, action: Action, obs: &mut [E::Obs]) -> Step {
        let mut step = self.inner.step(action, obs);
        step.reward = (self.f)(step.reward);
        step
    }
}

/// u8 observations (Atari pixels) handed on as f32 values 0..=255, so a binary that also runs
/// float-observation envs holds one kind of `VecEnv` (the network still scales pixels itself).
pub struct ObsAsF32<E> {
    inner: E,
    buf: Vec<u8>,
}

impl<E: Env<Obs = u8>> ObsAsF32<E> {
    pub fn new(inner: E) -> Self {
        let n = inner.observation_space().flat_dim();
        ObsAsF32 { inner, buf: vec![0; n] }
    }
}

impl<E: Env<Obs = u8>> Env for ObsAsF32<E> {
    type Obs = f32;
    forward!(observation_space -> Space, action_space -> Space, lives -> u32);
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        self.inner.reset(seed, &mut self.buf);
        obs.iter_mut().zip(&self.buf).for_each(|(o, &b)| *o = b as f32);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let step = self.inner.step(action, &mut self.buf);
        obs.iter_mut().zip(&self.buf).for_each(|(o, &b)| *o = b as f32);
        step
    }
}
