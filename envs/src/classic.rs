//! Classic control, written to match gymnasium 0.29.1 step for step: the same float64
//! arithmetic in the same order, observations cast to f32 at the end. Start states come from numpy's generator,
//! as gymnasium seeds it: `reset(seed)` makes `Generator(PCG64(SeedSequence(seed)))`, and an unseeded reset goes
//! on with it.

use crate::numpy::Pcg64;
use crate::render;
use crate::{Action, Env, Space, Step};
use std::f64::consts::PI;

/// gymnasium's `Env.reset(seed=seed)`: a seed starts the env's generator anew; none goes on with it.
fn rng_from(seed: Option<u64>, rng: &mut Pcg64) {
    if let Some(seed) = seed {
        *rng = Pcg64::new(seed);
    }
}

fn step_result(reward: f64, terminated: bool) -> Step {
    Step { reward, terminated, truncated: false, episode: None }
}

/// gymnasium's `x ** 2` on a Python float or numpy float64 scalar (and `math.pow(x, 2)`): libm's
/// `pow`, which is not always the correctly rounded `x * x` (1 ulp apart in about 1 of 10^3
/// squares; numpy's `np.square` and ndarray `** 2` are `x * x`, but no env squares an ndarray).
/// The opaque exponent keeps LLVM from turning the call back into `x * x`.
fn libm_square(x: f64) -> f64 {
    x.powf(std::hint::black_box(2.0))
}

/// `CartPole-v1`: push a cart left or right to keep the pole upright.
pub struct CartPole {
    /// x, x_dot, theta, theta_dot
    pub state: [f64; 4],
    steps_beyond_terminated: Option<u32>,
    rng: Pcg64,
}

impl CartPole {
    const GRAVITY: f64 = 9.8;
    const MASSCART: f64 = 1.0;
    const MASSPOLE: f64 = 0.1;
    const LENGTH: f64 = 0.5; // half the pole's length
    const FORCE_MAG: f64 = 10.0;
    const TAU: f64 = 0.02; // seconds between updates (Euler integration)
    const X_THRESHOLD: f64 = 2.4;

    pub fn new() -> Self {
        CartPole { state: [0.0; 4], steps_beyond_terminated: None, rng: Pcg64::new(0) }
    }

    fn theta_threshold() -> f64 {
        12.0 * 2.0 * PI / 360.0
    }

    fn write_obs(&self, obs: &mut [f32]) {
        for (o, s) in obs.iter_mut().zip(self.state) {
            *o = s as f32;
        }
    }
}

impl Default for CartPole {
    fn default() -> Self {
        Self::new()
    }
}

impl Env for CartPole {
    type Obs = f32;
    fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        Some(render::cartpole(&self.state, rgb))
    }
    fn observation_space(&self) -> Space {
        let (x, t) = (Self::X_THRESHOLD as f32 * 2.0, Self::theta_threshold() as f32 * 2.0);
        Space::bounded_box(vec![-x, f32::MIN, -t, f32::MIN], vec![x, f32::MAX, t, f32::MAX])
    }
    fn action_space(&self) -> Space {
        Space::Discrete(2)
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        rng_from(seed, &mut self.rng);
        for s in &mut self.state {
            *s = self.rng.uniform(-0.05, 0.05);
        }
        self.steps_beyond_terminated = None;
        self.write_obs(obs);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let total_mass = Self::MASSPOLE + Self::MASSCART;
        let polemass_length = Self::MASSPOLE * Self::LENGTH;
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if action.discrete() == 1 { Self::FORCE_MAG } else { -Self::FORCE_MAG };
        let (costheta, sintheta) = (theta.cos(), theta.sin());
        let temp = (force + polemass_length * libm_square(theta_dot) * sintheta) / total_mass;
        let thetaacc = (Self::GRAVITY * sintheta - costheta * temp)
            / (Self::LENGTH * (4.0 / 3.0 - Self::MASSPOLE * libm_square(costheta) / total_mass));
        let xacc = temp - polemass_length * thetaacc * costheta / total_mass;
        self.state = [
            x + Self::TAU * x_dot,
            x_dot + Self::TAU * xacc,
            theta + Self::TAU * theta_dot,
            theta_dot + Self::TAU * thetaacc,
        ];
        let [x, _, theta, _] = self.state;
        let t = Self::theta_threshold();
        #[allow(clippy::manual_range_contains)] // gymnasium's comparisons (a NaN state does not terminate)
        let terminated = x < -Self::X_THRESHOLD || x > Self::X_THRESHOLD || theta < -t || theta > t;
        // gymnasium pays 1 on the terminating step too, and 0 for steps taken after it
        let reward = match (terminated, self.steps_beyond_terminated) {
            (false, _) => 1.0,
            (true, None) => {
                self.steps_beyond_terminated = Some(0);
                1.0
            }
            (true, Some(n)) => {
                self.steps_beyond_terminated = Some(n + 1);
                0.0
            }
        };
        self.write_obs(obs);
        step_result(reward, terminated)
    }
}

/// `Acrobot-v1`: swing the lower link of a two-link pendulum above a line ("book" dynamics).
pub struct Acrobot {
    /// theta1, theta2, dtheta1, dtheta2
    pub state: [f64; 4],
    rng: Pcg64,
}

impl Acrobot {
    const DT: f64 = 0.2;
    const LINK_LENGTH_1: f64 = 1.0;
    const LINK_MASS_1: f64 = 1.0;
    const LINK_MASS_2: f64 = 1.0;
    const LINK_COM_POS_1: f64 = 0.5;
    const LINK_COM_POS_2: f64 = 0.5;
    const LINK_MOI: f64 = 1.0;
    const MAX_VEL_1: f64 = 4.0 * PI;
    const MAX_VEL_2: f64 = 9.0 * PI;
    const AVAIL_TORQUE: [f64; 3] = [-1.0, 0.0, 1.0];

    pub fn new() -> Self {
        Acrobot { state: [0.0; 4], rng: Pcg64::new(0) }
    }

    fn terminal(&self) -> bool {
        let [t1, t2, ..] = self.state;
        -t1.cos() - (t2 + t1).cos() > 1.0
    }

    fn write_obs(&self, obs: &mut [f32]) {
        let [t1, t2, d1, d2] = self.state;
        let values = [t1.cos(), t1.sin(), t2.cos(), t2.sin(), d1, d2];
        for (o, v) in obs.iter_mut().zip(values) {
            *o = v as f32;
        }
    }

    /// Time derivative of (theta1, theta2, dtheta1, dtheta2) under torque `a`.
    fn dsdt(s: [f64; 4], a: f64) -> [f64; 4] {
        let (m1, m2, l1) = (Self::LINK_MASS_1, Self::LINK_MASS_2, Self::LINK_LENGTH_1);
        let (lc1, lc2, i1, i2, g) = (Self::LINK_COM_POS_1, Self::LINK_COM_POS_2, Self::LINK_MOI, Self::LINK_MOI, 9.8);
        let [theta1, theta2, dtheta1, dtheta2] = s;
        // the constants' squares (0.5, 1.0) are exact, so powi there is gymnasium's pow
        let d1 = m1 * lc1.powi(2) + m2 * (l1.powi(2) + lc2.powi(2) + 2.0 * l1 * lc2 * theta2.cos()) + i1 + i2;
        let d2 = m2 * (lc2.powi(2) + l1 * lc2 * theta2.cos()) + i2;
        let phi2 = m2 * lc2 * g * (theta1 + theta2 - PI / 2.0).cos();
        let phi1 = -m2 * l1 * lc2 * libm_square(dtheta2) * theta2.sin()
            - 2.0 * m2 * l1 * lc2 * dtheta2 * dtheta1 * theta2.sin()
            + (m1 * lc1 + m2 * l1) * g * (theta1 - PI / 2.0).cos()
            + phi2;
        let ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * libm_square(dtheta1) * theta2.sin() - phi2)
            / (m2 * lc2.powi(2) + i2 - libm_square(d2) / d1);
        let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
        [dtheta1, dtheta2, ddtheta1, ddtheta2]
    }
}

impl Default for Acrobot {
    fn default() -> Self {
        Self::new()
    }
}

/// Wrap `x` into `[m, big_m)` as gymnasium's `wrap` does.
fn wrap(mut x: f64, m: f64, big_m: f64) -> f64 {
    let diff = big_m - m;
    while x > big_m {
        x -= diff;
    }
    while x < m {
        x += diff;
    }
    x
}

impl Env for Acrobot {
    type Obs = f32;
    fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        Some(render::acrobot(&self.state, rgb))
    }
    fn observation_space(&self) -> Space {
        let (v1, v2) = (Self::MAX_VEL_1 as f32, Self::MAX_VEL_2 as f32);
        Space::bounded_box(vec![-1.0, -1.0, -1.0, -1.0, -v1, -v2], vec![1.0, 1.0, 1.0, 1.0, v1, v2])
    }
    fn action_space(&self) -> Space {
        Space::Discrete(3)
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        rng_from(seed, &mut self.rng);
        for s in &mut self.state {
            // gymnasium stores Acrobot's start state as float32
            *s = self.rng.uniform(-0.1, 0.1) as f32 as f64;
        }
        self.write_obs(obs);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let torque = Self::AVAIL_TORQUE[action.discrete()];
        // one classic Runge-Kutta 4 step over [0, dt], as gymnasium's rk4 does it
        let y0 = self.state;
        let (dt, dt2) = (Self::DT, Self::DT / 2.0);
        let add = |y: [f64; 4], h: f64, k: [f64; 4]| std::array::from_fn(|i| y[i] + h * k[i]);
        let k1 = Self::dsdt(y0, torque);
        let k2 = Self::dsdt(add(y0, dt2, k1), torque);
        let k3 = Self::dsdt(add(y0, dt2, k2), torque);
        let k4 = Self::dsdt(add(y0, dt, k3), torque);
        let ns: [f64; 4] = std::array::from_fn(|i| y0[i] + dt / 6.0 * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]));
        self.state = [
            wrap(ns[0], -PI, PI),
            wrap(ns[1], -PI, PI),
            ns[2].clamp(-Self::MAX_VEL_1, Self::MAX_VEL_1),
            ns[3].clamp(-Self::MAX_VEL_2, Self::MAX_VEL_2),
        ];
        let terminated = self.terminal();
        self.write_obs(obs);
        step_result(if terminated { 0.0 } else { -1.0 }, terminated)
    }
}

// The track both mountain cars drive on: position bounds, speed limit, start positions.
const MC_MIN_POSITION: f64 = -1.2;
const MC_MAX_POSITION: f64 = 0.6;
const MC_MAX_SPEED: f64 = 0.07;

fn mountain_car_space() -> Space {
    let (p, v) = ((MC_MIN_POSITION as f32, MC_MAX_POSITION as f32), MC_MAX_SPEED as f32);
    Space::bounded_box(vec![p.0, -v], vec![p.1, v])
}

/// A random start: position uniform in [-0.6, -0.4), at rest.
fn mountain_car_start(seed: Option<u64>, rng: &mut Pcg64) -> [f64; 2] {
    rng_from(seed, rng);
    [rng.uniform(-0.6, -0.4), 0.0]
}

fn write_position_velocity(state: [f64; 2], obs: &mut [f32]) {
    obs[0] = state[0] as f32;
    obs[1] = state[1] as f32;
}

/// `MountainCar-v0`: drive an underpowered car up the right hill.
pub struct MountainCar {
    /// position, velocity
    pub state: [f64; 2],
    rng: Pcg64,
}

impl MountainCar {
    const GOAL_POSITION: f64 = 0.5;
    const GOAL_VELOCITY: f64 = 0.0;
    const FORCE: f64 = 0.001;
    const GRAVITY: f64 = 0.0025;

    pub fn new() -> Self {
        MountainCar { state: [0.0; 2], rng: Pcg64::new(0) }
    }
}

impl Default for MountainCar {
    fn default() -> Self {
        Self::new()
    }
}

impl Env for MountainCar {
    type Obs = f32;
    fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        Some(render::mountain_car(self.state[0], Self::GOAL_POSITION, rgb))
    }
    fn observation_space(&self) -> Space {
        mountain_car_space()
    }
    fn action_space(&self) -> Space {
        Space::Discrete(3)
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        self.state = mountain_car_start(seed, &mut self.rng);
        write_position_velocity(self.state, obs);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let [mut position, mut velocity] = self.state;
        velocity += (action.discrete() as f64 - 1.0) * Self::FORCE + (3.0 * position).cos() * (-Self::GRAVITY);
        velocity = velocity.clamp(-MC_MAX_SPEED, MC_MAX_SPEED);
        position += velocity;
        position = position.clamp(MC_MIN_POSITION, MC_MAX_POSITION);
        if position == MC_MIN_POSITION && velocity < 0.0 {
            velocity = 0.0;
        }
        let terminated = position >= Self::GOAL_POSITION && velocity >= Self::GOAL_VELOCITY;
        self.state = [position, velocity];
        write_position_velocity(self.state, obs);
        step_result(-1.0, terminated)
    }
}

/// The single value of a one-dimensional `Box` action; panics on any other kind (a caller bug).
fn continuous1(action: Action) -> f32 {
    match action {
        Action::Continuous([a]) => *a,
        other => panic!("expected one continuous action, got {other:?}"),
    }
}

/// `Pendulum-v1`: swing a pendulum up and hold it, with a torque in [-2, 2].
pub struct Pendulum {
    /// theta (0 is upright), theta_dot
    pub state: [f64; 2],
    rng: Pcg64,
}

impl Pendulum {
    const MAX_SPEED: f64 = 8.0;
    const MAX_TORQUE: f32 = 2.0;
    const DT: f64 = 0.05;
    const G: f64 = 10.0;
    const M: f64 = 1.0;
    const L: f64 = 1.0;

    pub fn new() -> Self {
        Pendulum { state: [0.0; 2], rng: Pcg64::new(0) }
    }

    fn write_obs(&self, obs: &mut [f32]) {
        let [theta, theta_dot] = self.state;
        obs[0] = theta.cos() as f32;
        obs[1] = theta.sin() as f32;
        obs[2] = theta_dot as f32;
    }
}

impl Default for Pendulum {
    fn default() -> Self {
        Self::new()
    }
}

impl Env for Pendulum {
    type Obs = f32;
    fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        Some(render::pendulum(self.state[0], rgb))
    }
    fn observation_space(&self) -> Space {
        let v = Self::MAX_SPEED as f32;
        Space::bounded_box(vec![-1.0, -1.0, -v], vec![1.0, 1.0, v])
    }
    fn action_space(&self) -> Space {
        Space::bounded_box(vec![-Self::MAX_TORQUE], vec![Self::MAX_TORQUE])
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        rng_from(seed, &mut self.rng);
        self.state = [self.rng.uniform(-PI, PI), self.rng.uniform(-1.0, 1.0)];
        self.write_obs(obs);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let [theta, theta_dot] = self.state;
        // gymnasium clips the torque in float32; everything after is float64
        let u = continuous1(action).clamp(-Self::MAX_TORQUE, Self::MAX_TORQUE) as f64;
        let normalized = (theta + PI).rem_euclid(2.0 * PI) - PI;
        let costs = libm_square(normalized) + 0.1 * libm_square(theta_dot) + 0.001 * libm_square(u);
        let accel = 3.0 * Self::G / (2.0 * Self::L) * theta.sin() + 3.0 / (Self::M * Self::L * Self::L) * u;
        let new_theta_dot = (theta_dot + accel * Self::DT).clamp(-Self::MAX_SPEED, Self::MAX_SPEED);
        self.state = [theta + new_theta_dot * Self::DT, new_theta_dot];
        self.write_obs(obs);
        step_result(-costs, false)
    }
}

/// `MountainCarContinuous-v0`: MountainCar with a force in [-1, 1], +100 at the goal and a
/// small cost per unit of force squared.
pub struct MountainCarContinuous {
    /// position, velocity (float32 values after the first step, as gymnasium stores them)
    pub state: [f64; 2],
    rng: Pcg64,
}

impl MountainCarContinuous {
    const GOAL_POSITION: f64 = 0.45;
    const POWER: f64 = 0.0015;

    pub fn new() -> Self {
        MountainCarContinuous { state: [0.0; 2], rng: Pcg64::new(0) }
    }
}

impl Default for MountainCarContinuous {
    fn default() -> Self {
        Self::new()
    }
}

impl Env for MountainCarContinuous {
    type Obs = f32;
    fn render(&self, rgb: &mut Vec<u8>) -> Option<(usize, usize)> {
        Some(render::mountain_car(self.state[0], Self::GOAL_POSITION, rgb))
    }
    fn observation_space(&self) -> Space {
        mountain_car_space()
    }
    fn action_space(&self) -> Space {
        Space::bounded_box(vec![-1.0], vec![1.0])
    }
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        self.state = mountain_car_start(seed, &mut self.rng);
        write_position_velocity(self.state, obs);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let [mut position, mut velocity] = self.state;
        let a = continuous1(action) as f64;
        velocity += a.clamp(-1.0, 1.0) * Self::POWER - 0.0025 * (3.0 * position).cos();
        velocity = velocity.clamp(-MC_MAX_SPEED, MC_MAX_SPEED);
        position = (position + velocity).clamp(MC_MIN_POSITION, MC_MAX_POSITION);
        if position == MC_MIN_POSITION && velocity < 0.0 {
            velocity = 0.0;
        }
        // the goal test sees the float64 values; the stored state is float32
        let terminated = position >= Self::GOAL_POSITION && velocity >= 0.0;
        self.state = [position as f32 as f64, velocity as f32 as f64];
        write_position_velocity(self.state, obs);
        // gymnasium's math.pow (a float32's square is exact, so pow and * agree; same call anyway)
        step_result(if terminated { 100.0 } else { 0.0 } - libm_square(a) * 0.1, terminated)
    }
}

#[cfg(test)]
mod tests {
    use super::libm_square;

    /// A square where glibc's pow (FMA and plain builds alike) is 1 ulp off `x * x`, as Python's
    /// `math.pow(0.5037174151763892, 2)` is: the helper must call pow, not multiply.
    #[test]
    fn libm_square_calls_pow() {
        let x = std::hint::black_box(0.5037174151763892f64);
        assert_eq!(libm_square(x), 0.25373123435198286);
        assert_eq!(x * x, 0.2537312343519829);
    }
}
