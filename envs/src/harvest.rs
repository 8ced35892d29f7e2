//! `GridHarvest-v0`: a small native env whose invalid actions matter, for fast tests of invalid
//! action masking without the JVM. It is shaped like Gym-μRTS's global agent (not a copy of any
//! game): a one-hot grid observation, a `MultiDiscrete` action that names a source cell, an action
//! type and a target cell, and a mask of the source and target cells that can be chosen.
//!
//! A 10 x 10 grid holds one resource cell (never on the border) and 2 to 4 workers on its
//! neighbours. Action `[source, type, target]`, cells numbered row-major:
//! - type 1 (harvest): if `source` holds a worker and `target` is the resource next to it, +1;
//! - type 2 (move): if `source` holds a worker and `target` is an empty neighbour, it moves there;
//! - type 0 (no-op), and every other combination, does nothing (invalid actions are ignored, as
//!   the MicroRTS engine ignores them).
//!
//! The mask: sources are the workers' cells; every type is valid; targets are the cells next to a
//! worker that are the resource or empty. Episodes last `EPISODE_STEPS` steps (a time limit), so
//! the best return is `EPISODE_STEPS`: harvest on every step. A random policy that respects the
//! mask harvests on ~1 step in 24; one that ignores it on ~1 step in 10,000.

use crate::{Action, Env, Space, Step};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub const ID: &str = "GridHarvest-v0";
/// Steps per episode (`make` adds the `TimeLimit`); also the best return.
pub const EPISODE_STEPS: u32 = 20;
const SIZE: usize = 10;
const CELLS: usize = SIZE * SIZE;
/// One-hot planes per cell, last in the observation's shape: empty, worker, resource.
const PLANES: usize = 3;
const EMPTY: u8 = 0;
const WORKER: u8 = 1;
const RESOURCE: u8 = 2;
/// Action types (0 is the no-op).
const HARVEST: i64 = 1;
const MOVE: i64 = 2;

pub struct GridHarvest {
    cells: [u8; CELLS],
    /// Valid actions for the current observation, laid out as `Space::mask_dim` says.
    mask: Vec<bool>,
    rng: ChaCha8Rng,
}

impl GridHarvest {
    pub fn new() -> Self {
        GridHarvest { cells: [EMPTY; CELLS], mask: vec![false; CELLS + 3 + CELLS], rng: ChaCha8Rng::seed_from_u64(0) }
    }

    /// The in-grid 4-neighbours of `cell`.
    fn neighbours(cell: usize) -> impl Iterator<Item = usize> {
        let (r, c) = (cell / SIZE, cell % SIZE);
        let up = (r > 0).then(|| cell - SIZE);
        let down = (r + 1 < SIZE).then(|| cell + SIZE);
        let left = (c > 0).then(|| cell - 1);
        let right = (c + 1 < SIZE).then(|| cell + 1);
        [up, down, left, right].into_iter().flatten()
    }

    fn write_obs_and_mask(&mut self, obs: &mut [f32]) {
        for (cell, planes) in self.cells.iter().zip(obs.chunks_mut(PLANES)) {
            planes.fill(0.0);
            planes[*cell as usize] = 1.0;
        }
        let (sources, rest) = self.mask.split_at_mut(CELLS);
        let (types, targets) = rest.split_at_mut(3);
        types.fill(true);
        targets.fill(false);
        for (cell, &kind) in self.cells.iter().enumerate() {
            sources[cell] = kind == WORKER;
            if kind == WORKER {
                for n in Self::neighbours(cell) {
                    targets[n] = self.cells[n] != WORKER;
                }
            }
        }
    }
}

impl Default for GridHarvest {
    fn default() -> Self {
        Self::new()
    }
}

impl Env for GridHarvest {
    type Obs = f32;

    fn observation_space(&self) -> Space {
        let n = CELLS * PLANES;
        Space::Box { shape: vec![SIZE, SIZE, PLANES], low: vec![0.0; n], high: vec![1.0; n] }
    }

    fn action_space(&self) -> Space {
        Space::MultiDiscrete(vec![CELLS, 3, CELLS])
    }

    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        if let Some(seed) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(seed);
        }
        self.cells = [EMPTY; CELLS];
        let resource = self.rng.gen_range(1..SIZE - 1) * SIZE + self.rng.gen_range(1..SIZE - 1);
        self.cells[resource] = RESOURCE;
        // 2 to 4 workers: each neighbour of the resource in turn, until enough are placed
        let (workers, first) = (self.rng.gen_range(2..=4), self.rng.gen_range(0..4));
        let around: Vec<usize> = Self::neighbours(resource).collect();
        for k in 0..workers {
            self.cells[around[(first + k) % 4]] = WORKER;
        }
        self.write_obs_and_mask(obs);
    }

    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let Action::Discrete(&[source, kind, target]) = action else {
            panic!("GridHarvest takes [source, type, target], got {action:?}");
        };
        let (source, target) = (source as usize, target as usize);
        let adjacent = Self::neighbours(source).any(|n| n == target);
        let mut reward = 0.0;
        if self.cells[source] == WORKER && adjacent {
            match (kind, self.cells[target]) {
                (HARVEST, RESOURCE) => reward = 1.0,
                (MOVE, EMPTY) => (self.cells[source], self.cells[target]) = (EMPTY, WORKER),
                _ => {} // a no-op, or an action the engine would ignore
            }
        }
        self.write_obs_and_mask(obs);
        Step { reward, terminated: false, truncated: false, episode: None }
    }

    fn action_mask(&self) -> Option<&[bool]> {
        Some(&self.mask)
    }
}
