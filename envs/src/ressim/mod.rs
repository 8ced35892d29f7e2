//! The multilevel waterflooding environment ("ressim") of multilevel PPO (Dixit & Elsheikh),
//! native: 2-D incompressible two-phase flow (water pushes oil from injectors in the first
//! column to producers in the last), controlled by the well rates, observed at the wells, paid
//! the oil produced. Every level simulates the same reservoir on its own grid: coarse levels
//! take block means of porosity and saturation, block sums of rates and block harmonic means of
//! permeability; observations and actions always live on the finest grid.
//!
//! A control step allocates nothing (buffers are kept in the env; the factorized pressure
//! operators are shared by all envs of a level).
//!
//! Two configurations: `ResSim-case1` (the reference fork's test case 1: 61×61, levels 8², 15²,
//! 30², 61²) and `ResSim-v1` (the paper's: 128×128, levels 8², 16², 32², 64², 128²). Checked
//! against the Python reference's own output in `tests/ressim.rs`.

mod levels;
pub mod perm;
mod sim;

pub use levels::{np_sum, partition, Grid, Partition, Reduce};

use crate::{Action, Env, EnvError, Space, Step};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sim::{Pressure, Saturation};
use std::sync::{Arc, Mutex, OnceLock};

/// The configuration ids, their fine grids and levels.
pub const IDS: [&str; 2] = ["ResSim-case1", "ResSim-v1"];

/// Everything that defines a configuration, on its finest grid.
#[derive(Debug, Clone)]
pub struct Config {
    pub id: &'static str,
    pub fine: Grid,
    /// grid sizes (nx, ny) of the levels, coarsest first; the last is the fine grid
    pub levels: Vec<(usize, usize)>,
    pub phi: f64,
    /// water and oil viscosity (equal: the solver needs f(s) = s)
    pub mu: f64,
    pub dt: f64,
    /// implicit saturation substeps per control step
    pub nstep: usize,
    /// control steps per episode
    pub terminal_step: u32,
    /// the initial well rates on the fine grid (also where the wells are)
    pub q_fine: Vec<f64>,
    /// fine log-permeability fields (k = exp(logk) / 1.01325e15)
    pub logk: Vec<Vec<f64>>,
}

/// Where a configuration's log-permeability fields come from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Fields {
    /// `n` channelized fields of the reference generator (`perm::batch_generate`) with this
    /// seed; the built-in set (`BUILT_IN`) is 16 fields of seed 1
    Generated { n: usize, seed: u32 },
    /// one field read from a CSV file (`read_logk_csv`: one line per grid row, one value per
    /// column, ln of the permeability in millidarcy)
    File(std::path::PathBuf),
}

/// The fields every configuration has unless told otherwise.
pub const BUILT_IN: Fields = Fields::Generated { n: 16, seed: 1 };

/// A configuration by id, with its permeability fields from `fields`.
pub fn config(id: &str, fields: &Fields) -> Result<Config, EnvError> {
    let (n, wells_from, wells_step) = match id {
        "ResSim-case1" => (61, 0, 2),
        "ResSim-v1" => (128, 2, 4),
        _ => return Err(EnvError::unknown(id)),
    };
    let fine = Grid { nx: n, ny: n, lx: 1200.0 * 0.3048, ly: 1200.0 * 0.3048 };
    let (phi, dt, nstep, terminal_step) = (0.2, 5.0, 5, 5);
    let ooip = fine.lx * fine.ly * phi;
    // in this order, to the last bit
    let q_total = ooip / (nstep as f64 * terminal_step as f64 * dt) * 0.7;
    // case 1 divides by round(nx / 2) (Python rounds 30.5 to 30) although it has 31 wells
    let per_well = if id == "ResSim-case1" { q_total / (n as f64 / 2.0).round_ties_even() } else { q_total / 32.0 };
    let mut q_fine = vec![0.0; n * n];
    for r in (wells_from..n).step_by(wells_step) {
        q_fine[r * n] = per_well;
        q_fine[r * n + n - 1] = -per_well;
    }
    let levels = if id == "ResSim-case1" { vec![8, 15, 30, 61] } else { vec![8, 16, 32, 64, 128] };
    Ok(Config {
        id: if id == "ResSim-case1" { IDS[0] } else { IDS[1] },
        fine,
        levels: levels.into_iter().map(|l| (l, l)).collect(),
        phi,
        mu: 3e-4,
        dt,
        nstep,
        terminal_step,
        q_fine,
        logk: match fields {
            &Fields::Generated { n: n_fields, seed } => {
                perm::batch_generate(n, n, 5.5, -2.0, (0.1, 0.3), n_fields, seed)
            }
            Fields::File(path) => vec![perm::read_logk_csv(path, n, n)?],
        },
    })
}

/// One level's grid and coarse properties, shared by all envs of that level.
pub struct Level {
    pub grid: Grid,
    /// this level's cells over the fine grid
    pub to_fine: Partition,
    pub phi: Vec<f64>,
    pub s_init: Vec<f64>,
    /// permeability per field (block harmonic means of the fine fields)
    pub k: Vec<Vec<f64>>,
    /// total injection rate (the sum of the level's initial positive rates) and oil in place
    pub c: f64,
    pub ooip: f64,
    /// level cells that can hold a rate, and the factorized pressure per field (made on first use)
    support: Vec<usize>,
    pressure: Vec<OnceLock<Pressure>>,
    /// the level cell of each fine producer and injector
    prod_cells: Vec<usize>,
    inj_cells: Vec<usize>,
}

/// A configuration with its levels, shared by every env of a run.
pub struct Shared {
    pub config: Config,
    pub levels: Vec<Level>,
    /// fine cells of the injectors and producers, row-major order
    pub injectors: Vec<usize>,
    pub producers: Vec<usize>,
}

/// The fine cell the reference balances rates in (`q[3, 3] -= sum(q)`; not a well).
const BALANCE_CELL: (usize, usize) = (3, 3);
const TOL: f64 = 1e-5;
const MD_TO_M2: f64 = 1.0 / 1.01325e15;

impl Shared {
    pub fn new(config: Config) -> Result<Shared, EnvError> {
        let fine = config.fine;
        let injectors: Vec<usize> = (0..fine.cells()).filter(|&i| config.q_fine[i] > TOL).collect();
        let producers: Vec<usize> = (0..fine.cells()).filter(|&i| config.q_fine[i] < -TOL).collect();
        let k_fine: Vec<Vec<f64>> =
            config.logk.iter().map(|f| f.iter().map(|&l| MD_TO_M2 * l.exp()).collect()).collect();
        let phi_fine = vec![config.phi; fine.cells()];
        let mut levels = Vec::new();
        for &(nx, ny) in &config.levels {
            let grid = Grid { nx, ny, lx: fine.lx, ly: fine.ly };
            if nx > fine.nx || ny > fine.ny {
                return Err(EnvError(format!(
                    "{}: level {nx}x{ny} is finer than the {}x{} grid",
                    config.id, fine.nx, fine.ny
                )));
            }
            let to_fine = Partition::between(&fine, &grid);
            let phi = to_fine.restrict(&phi_fine, Reduce::Mean);
            let q_init = to_fine.restrict(&config.q_fine, Reduce::Sum);
            let positive: Vec<f64> = q_init.iter().copied().filter(|&q| q > TOL).collect();
            let c = np_sum(&positive);
            let ooip = grid.lx * grid.ly * phi[0] * (1.0 - 0.0 - 0.0);
            let mut support: Vec<usize> = injectors.iter().chain(&producers).map(|&f| to_fine.coarse_of(f)).collect();
            support.push(to_fine.coarse_of(BALANCE_CELL.0 * fine.nx + BALANCE_CELL.1));
            support.sort_unstable();
            support.dedup();
            levels.push(Level {
                grid,
                phi,
                s_init: to_fine.restrict(&vec![0.0; fine.cells()], Reduce::Mean),
                k: k_fine.iter().map(|k| to_fine.restrict(k, Reduce::HarmonicMean)).collect(),
                c,
                ooip,
                support,
                pressure: (0..k_fine.len()).map(|_| OnceLock::new()).collect(),
                prod_cells: producers.iter().map(|&f| to_fine.coarse_of(f)).collect(),
                inj_cells: injectors.iter().map(|&f| to_fine.coarse_of(f)).collect(),
                to_fine,
            });
        }
        Ok(Shared { config, levels, injectors, producers })
    }

    /// The level whose grid is `nx` by `nx`, as an index into `levels`.
    pub fn level_index(&self, nx: usize) -> Result<usize, EnvError> {
        self.levels.iter().position(|l| l.grid.nx == nx).ok_or_else(|| {
            let known: Vec<String> = self.levels.iter().map(|l| l.grid.nx.to_string()).collect();
            EnvError(format!(
                "{} has no level with a {nx}x{nx} grid; its levels are {}",
                self.config.id,
                known.join(", ")
            ))
        })
    }

    fn pressure(&self, level: usize, field: usize) -> &Pressure {
        let l = &self.levels[level];
        l.pressure[field].get_or_init(|| Pressure::new(&l.grid, &l.k[field], 1.0 / self.config.mu, l.support.clone()))
    }
}

/// The shared data of a configuration with the built-in fields, made once per process.
pub fn shared(id: &str) -> Result<Arc<Shared>, EnvError> {
    shared_with(id, &BUILT_IN)
}

/// The shared data of a configuration with the given fields, made once per process.
pub fn shared_with(id: &str, fields: &Fields) -> Result<Arc<Shared>, EnvError> {
    static CACHE: Mutex<Vec<(Fields, Arc<Shared>)>> = Mutex::new(Vec::new());
    let mut cache = CACHE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, s)) = cache.iter().find(|(f, s)| s.config.id == id && f == fields) {
        return Ok(s.clone());
    }
    let s = Arc::new(Shared::new(config(id, fields)?)?);
    cache.push((fields.clone(), s.clone()));
    Ok(s)
}

/// `id` with the built-in fields on the level whose grid is `nx` by `nx` (`None`: the finest).
pub fn make(id: &str, nx: Option<usize>) -> Result<ResSim, EnvError> {
    make_with(id, &BUILT_IN, nx)
}

/// `id` with the given fields on the level whose grid is `nx` by `nx` (`None`: the finest).
pub fn make_with(id: &str, fields: &Fields, nx: Option<usize>) -> Result<ResSim, EnvError> {
    let shared = shared_with(id, fields)?;
    let level = match nx {
        Some(nx) => shared.level_index(nx)?,
        None => shared.levels.len() - 1,
    };
    Ok(ResSim::new(shared, level))
}

/// One env on one level.
pub struct ResSim {
    shared: Arc<Shared>,
    level: usize,
    pub s: Vec<f64>,
    pub p: Vec<f64>,
    pub k_index: usize,
    pub episode_step: u32,
    /// the last observation in float64 (the `Env` interface hands out float32)
    pub obs: Vec<f64>,
    /// the level's rates applied in the last step
    pub q: Vec<f64>,
    q_fine: Vec<f64>,
    action: Vec<f64>,
    sat: Saturation,
    s0: Vec<f64>,
    rng: ChaCha8Rng,
}

impl ResSim {
    pub fn new(shared: Arc<Shared>, level: usize) -> ResSim {
        let n = shared.levels[level].grid.cells();
        let obs_dim = 2 * shared.producers.len() + shared.injectors.len();
        let fine_cells = shared.config.fine.cells();
        ResSim {
            level,
            s: vec![0.0; n],
            p: vec![0.0; n],
            k_index: 0,
            episode_step: 0,
            obs: vec![0.0; obs_dim],
            q: vec![0.0; n],
            q_fine: vec![0.0; fine_cells],
            action: Vec::new(),
            sat: Saturation::default(),
            s0: Vec::with_capacity(n),
            rng: ChaCha8Rng::seed_from_u64(0),
            shared,
        }
    }

    pub fn grid(&self) -> Grid {
        self.shared.levels[self.level].grid
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Starts an episode on permeability field `k_index`.
    pub fn reset_to_field(&mut self, k_index: usize) {
        let l = &self.shared.levels[self.level];
        self.s.copy_from_slice(&l.s_init);
        self.p.fill(0.0);
        self.k_index = k_index;
        self.episode_step = 0;
        self.update_obs();
    }

    /// The reference's `phi_a` then `Phi_a`: well weights to fine rates (injectors share the
    /// total injection c in proportion to their weights, producers likewise), balanced in
    /// fine cell (3, 3), restricted to this level by block sums.
    fn decode(&mut self, action: &[f64]) {
        let sh = &self.shared;
        let l = &sh.levels[self.level];
        let n_inj = sh.injectors.len();
        let (a_inj, a_prod) = action.split_at(n_inj);
        let (sum_inj, sum_prod) = (np_sum(a_inj), np_sum(a_prod));
        self.q_fine.fill(0.0);
        for (&cell, &a) in sh.injectors.iter().zip(a_inj) {
            self.q_fine[cell] = l.c * (a / sum_inj);
        }
        for (&cell, &a) in sh.producers.iter().zip(a_prod) {
            self.q_fine[cell] = -l.c * (a / sum_prod);
        }
        let imbalance = np_sum(&self.q_fine);
        if imbalance.abs() < TOL {
            self.q_fine[BALANCE_CELL.0 * sh.config.fine.nx + BALANCE_CELL.1] -= imbalance;
        }
        l.to_fine.restrict_into(&self.q_fine, Reduce::Sum, &mut self.q);
    }

    /// One control step with float64 well weights (`Env::step` converts its float32 action).
    /// Returns (reward, done).
    pub fn step_f64(&mut self, action: &[f64]) -> (f64, bool) {
        assert_eq!(action.len(), self.shared.injectors.len() + self.shared.producers.len(), "one weight per well");
        self.decode(action);
        let shared = self.shared.clone();
        let l = &shared.levels[self.level];
        let cfg = &shared.config;
        let pressure = shared.pressure(self.level, self.k_index);
        pressure.solve(&self.q, &mut self.p);
        self.sat.prepare(&l.grid, pressure, &self.p, &self.q, &l.phi, cfg.dt);
        let mut oil = 0.0;
        for _ in 0..cfg.nstep {
            self.sat.substep(&mut self.s, &mut self.s0, &self.q);
            let produced: f64 =
                self.q.iter().zip(&self.s).filter(|(&q, _)| q < 0.0).map(|(&q, &s)| q * (1.0 - s)).sum();
            oil += -produced * cfg.dt;
        }
        self.episode_step += 1;
        self.update_obs();
        (oil / l.ooip, self.episode_step >= cfg.terminal_step)
    }

    /// [s at producers, p̂ at producers, p̂ at injectors], read on the fine grid (where each
    /// fine cell has its block's value), p̂ = the pressure min-max scaled to [-1, 1] over the
    /// whole field (+1 everywhere when the field is flat, as at reset).
    fn update_obs(&mut self) {
        let l = &self.shared.levels[self.level];
        let (pmin, pmax) =
            self.p.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &p| (lo.min(p), hi.max(p)));
        let slope = (1.0 - (-1.0)) / (pmax - pmin);
        let scaled = |p: f64| if p == pmax { 1.0 } else { slope * (p - pmin) + (-1.0) };
        let n_prod = l.prod_cells.len();
        for (k, &c) in l.prod_cells.iter().enumerate() {
            self.obs[k] = self.s[c];
            self.obs[n_prod + k] = scaled(self.p[c]);
        }
        for (k, &c) in l.inj_cells.iter().enumerate() {
            self.obs[2 * n_prod + k] = scaled(self.p[c]);
        }
    }

    /// The reference's `map_from`: takes another level's state (same configuration) — block
    /// means from a finer level, injection from a coarser one — with its field and step.
    pub fn map_from(&mut self, other: &ResSim) {
        assert!(Arc::ptr_eq(&self.shared, &other.shared), "map_from needs envs of one configuration");
        let (from, to) = (other.grid(), self.grid());
        if other.level > self.level {
            let part = Partition::between(&from, &to);
            part.restrict_into(&other.s, Reduce::Mean, &mut self.s);
            part.restrict_into(&other.p, Reduce::Mean, &mut self.p);
        } else {
            let part = Partition::between(&to, &from);
            part.prolong(&other.s, &mut self.s);
            part.prolong(&other.p, &mut self.p);
        }
        self.k_index = other.k_index;
        self.episode_step = other.episode_step;
        self.update_obs();
    }

    /// This level's saturation and pressure prolonged to the fine grid (the reference's ψ).
    pub fn psi(&self) -> (Vec<f64>, Vec<f64>) {
        let l = &self.shared.levels[self.level];
        let n = self.shared.config.fine.cells();
        let (mut s, mut p) = (vec![0.0; n], vec![0.0; n]);
        l.to_fine.prolong(&self.s, &mut s);
        l.to_fine.prolong(&self.p, &mut p);
        (s, p)
    }
}

impl Env for ResSim {
    type Obs = f32;
    fn observation_space(&self) -> Space {
        Space::bounded_box(vec![-1.0; self.obs.len()], vec![1.0; self.obs.len()])
    }
    fn action_space(&self) -> Space {
        let n = self.shared.injectors.len() + self.shared.producers.len();
        Space::bounded_box(vec![0.001; n], vec![1.0; n])
    }
    /// Draws the permeability field uniformly from the configuration's set.
    fn reset(&mut self, seed: Option<u64>, obs: &mut [f32]) {
        if let Some(seed) = seed {
            self.rng = ChaCha8Rng::seed_from_u64(seed);
        }
        let field = self.rng.gen_range(0..self.shared.config.logk.len());
        self.reset_to_field(field);
        write_obs(&self.obs, obs);
    }
    fn unwrapped(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        let Action::Continuous(a) = action else { panic!("ResSim needs a continuous action, got {action:?}") };
        let mut action = std::mem::take(&mut self.action);
        action.clear();
        action.extend(a.iter().map(|&x| x as f64));
        let (reward, done) = self.step_f64(&action);
        self.action = action;
        write_obs(&self.obs, obs);
        Step { reward, terminated: done, truncated: false, episode: None }
    }
}

fn write_obs(from: &[f64], to: &mut [f32]) {
    for (o, &v) in to.iter_mut().zip(from) {
        *o = v as f32;
    }
}
