//! The two-phase flow solver for f(s) = s and constant total mobility (the reference's linear
//! mobility with equal viscosities and no residual saturations).
//!
//! Pressure: −∇·(k λ ∇p) = q by two-point flux on the grid, pinned by `A[0,0] += 1` (the
//! reference's "Dirichlet" condition, which leaves the right-hand side alone). λ does not depend
//! on s, so the matrix depends only on the permeability field: we factor it once (banded
//! Cholesky, bandwidth nx) and keep A⁻¹ e_c for every cell c where a well can put a rate. A
//! control step's pressure is then Σ_c q_c A⁻¹ e_c.
//!
//! Saturation: backward Euler with upwind fluxes, s¹ − s⁰ + α(U s¹ − (q⁺ + s¹ q⁻)) = 0,
//! α = dt/(vol·φ). U's diagonal is a cell's total outflow, its off-diagonals the inflows from
//! upstream neighbours; every upstream neighbour has a higher pressure, so the upwind graph has
//! no cycles and in a topological order of it (e.g. decreasing pressure) the system is
//! triangular: one sweep per substep. We order by Kahn's algorithm (linear time, no sort).

use super::levels::Grid;

/// Per (level, permeability field): the face transmissibilities and the pressure responses to a
/// unit rate in each cell that can hold a well.
pub struct Pressure {
    n: usize,
    /// cells where q may be non-zero, and A⁻¹ e_c for each (column c of `green`, n values)
    support: Vec<usize>,
    green: Vec<f64>,
    /// transmissibility of the face between (r, j-1) and (r, j): ny rows of nx + 1 (ends 0)
    pub tx: Vec<f64>,
    /// transmissibility of the face between (r-1, j) and (r, j): ny + 1 rows of nx (ends 0)
    pub ty: Vec<f64>,
}

impl Pressure {
    /// `k`: permeability per cell (row-major), `mobility`: the constant total mobility.
    pub fn new(grid: &Grid, k: &[f64], mobility: f64, support: Vec<usize>) -> Pressure {
        let (nx, ny, n) = (grid.nx, grid.ny, grid.cells());
        let kl: Vec<f64> = k.iter().map(|&k| k * mobility).collect();
        let (dx, dy) = (grid.dx(), grid.dy());
        let mut tx = vec![0.0; ny * (nx + 1)];
        let mut ty = vec![0.0; (ny + 1) * nx];
        for r in 0..ny {
            for j in 1..nx {
                tx[r * (nx + 1) + j] = 2.0 * dy / dx / (1.0 / kl[r * nx + j - 1] + 1.0 / kl[r * nx + j]);
            }
        }
        for r in 1..ny {
            for j in 0..nx {
                ty[r * nx + j] = 2.0 * dx / dy / (1.0 / kl[(r - 1) * nx + j] + 1.0 / kl[r * nx + j]);
            }
        }
        // the SPD five-point matrix in band form: row i holds columns i - nx ..= i
        let b = nx;
        let w = b + 1;
        let mut band = vec![0.0; n * w];
        let at = |i: usize, j: usize| i * w + (j + b - i); // j in i - b ..= i
        for r in 0..ny {
            for j in 0..nx {
                let i = r * nx + j;
                let (west, east) = (tx[r * (nx + 1) + j], tx[r * (nx + 1) + j + 1]);
                let (north, south) = (ty[r * nx + j], ty[(r + 1) * nx + j]);
                band[at(i, i)] = west + east + north + south;
                if j > 0 {
                    band[at(i, i - 1)] = -west;
                }
                if r > 0 {
                    band[at(i, i - nx)] = -north;
                }
            }
        }
        band[at(0, 0)] += 1.0;
        cholesky_in_place(&mut band, n, b);
        let mut green = vec![0.0; support.len() * n];
        for (c, &cell) in support.iter().enumerate() {
            let x = &mut green[c * n..(c + 1) * n];
            x[cell] = 1.0;
            cholesky_solve(&band, n, b, x, cell);
        }
        Pressure { n, support, green, tx, ty }
    }

    /// p = A⁻¹ q; `q` must vanish outside the support (checked in debug builds).
    pub fn solve(&self, q: &[f64], p: &mut [f64]) {
        debug_assert!(
            q.iter().enumerate().all(|(i, &v)| v == 0.0 || self.support.contains(&i)),
            "rate outside the well cells"
        );
        p.fill(0.0);
        for (c, &cell) in self.support.iter().enumerate() {
            let rate = q[cell];
            if rate != 0.0 {
                for (p, g) in p.iter_mut().zip(&self.green[c * self.n..(c + 1) * self.n]) {
                    *p += rate * g;
                }
            }
        }
    }
}

/// Cholesky A = L Lᵀ of an SPD band matrix (lower bandwidth `b`, row i stored as columns
/// i - b ..= i); L overwrites A.
fn cholesky_in_place(band: &mut [f64], n: usize, b: usize) {
    let w = b + 1;
    for i in 0..n {
        let lo = i.saturating_sub(b);
        for j in lo..=i {
            let k0 = lo.max(j.saturating_sub(b));
            // Σ_k L[i][k] L[j][k] over k in k0..j: contiguous in both rows
            let (ri, rj) = (i * w + (k0 + b - i), j * w + (k0 + b - j));
            let len = j - k0;
            let dot: f64 = band[ri..ri + len].iter().zip(&band[rj..rj + len]).map(|(a, b)| a * b).sum();
            let s = band[i * w + (j + b - i)] - dot;
            band[i * w + (j + b - i)] = if j == i {
                assert!(s > 0.0, "pressure matrix not positive definite");
                s.sqrt()
            } else {
                s / band[j * w + b]
            };
        }
    }
}

/// Solves L Lᵀ x = e where `x` holds e on entry, zero before index `first`.
fn cholesky_solve(l: &[f64], n: usize, b: usize, x: &mut [f64], first: usize) {
    let w = b + 1;
    for i in first..n {
        let lo = i.saturating_sub(b).max(first);
        let row = &l[i * w + (lo + b - i)..i * w + b];
        let dot: f64 = row.iter().zip(&x[lo..i]).map(|(a, b)| a * b).sum();
        x[i] = (x[i] - dot) / l[i * w + b];
    }
    for i in (0..n).rev() {
        x[i] /= l[i * w + b];
        let lo = i.saturating_sub(b);
        let xi = x[i];
        for (k, lik) in (lo..i).zip(&l[i * w + (lo + b - i)..i * w + b]) {
            x[k] -= lik * xi;
        }
    }
}

/// Scratch space and the per-control-step upwind system, reused across steps.
#[derive(Default)]
pub struct Saturation {
    /// cells in an upstream-first (topological) order of the upwind graph
    order: Vec<usize>,
    /// up to 4 downstream neighbours per cell, and how many upstream ones are not yet ordered
    outflow: Vec<[usize; 4]>,
    n_outflow: Vec<u8>,
    pending: Vec<u8>,
    /// 1 + α (outflow − min(q, 0)), and α max(q, 0), per cell
    diag: Vec<f64>,
    source: Vec<f64>,
    /// α per cell
    alpha: Vec<f64>,
    /// up to 4 upstream neighbours per cell with α·inflow
    inflow: Vec<[(usize, f64); 4]>,
    n_inflow: Vec<u8>,
    /// total outflow through faces, per cell
    out: Vec<f64>,
}

/// The reference's Newton tolerance (scipy nonlin_solve's f_tol = eps^(1/3)), tested on the
/// residual at the start of each substep: below it, the substep leaves s unchanged.
const F_TOL: f64 = 6.055454452393343e-6;

impl Saturation {
    /// Sets up the upwind system for fluxes from pressure `p` (fixed for the control step).
    pub fn prepare(&mut self, grid: &Grid, pressure: &Pressure, p: &[f64], q: &[f64], phi: &[f64], dt: f64) {
        let (nx, ny, n) = (grid.nx, grid.ny, grid.cells());
        let vol = grid.cell_volume();
        self.alpha.clear();
        self.alpha.extend(phi.iter().map(|&phi| dt / (vol * phi)));
        self.out.clear();
        self.out.resize(n, 0.0);
        self.inflow.resize(n, [(0, 0.0); 4]);
        self.n_inflow.clear();
        self.n_inflow.resize(n, 0);
        self.outflow.resize(n, [0; 4]);
        self.n_outflow.clear();
        self.n_outflow.resize(n, 0);
        let mut face = |from: usize, to: usize, flux: f64, out: &mut Vec<f64>| {
            // flux > 0 goes from `from` to `to`
            let (up, down, f) = if flux > 0.0 { (from, to, flux) } else { (to, from, -flux) };
            if f > 0.0 {
                out[up] += f;
                let k = self.n_inflow[down] as usize;
                self.inflow[down][k] = (up, f);
                self.n_inflow[down] += 1;
                let k = self.n_outflow[up] as usize;
                self.outflow[up][k] = down;
                self.n_outflow[up] += 1;
            }
        };
        for r in 0..ny {
            for j in 1..nx {
                let (a, b) = (r * nx + j - 1, r * nx + j);
                face(a, b, (p[a] - p[b]) * pressure.tx[r * (nx + 1) + j], &mut self.out);
            }
        }
        for r in 1..ny {
            for j in 0..nx {
                let (a, b) = (r * nx + j - nx, r * nx + j);
                face(a, b, (p[a] - p[b]) * pressure.ty[r * nx + j], &mut self.out);
            }
        }
        // Kahn's algorithm: a cell joins the order once all its upstream neighbours have
        self.pending.clone_from(&self.n_inflow);
        self.order.clear();
        self.order.extend((0..n).filter(|&i| self.pending[i] == 0));
        let mut next = 0;
        while next < self.order.len() {
            let i = self.order[next];
            next += 1;
            for &j in &self.outflow[i][..self.n_outflow[i] as usize] {
                self.pending[j] -= 1;
                if self.pending[j] == 0 {
                    self.order.push(j);
                }
            }
        }
        assert_eq!(self.order.len(), n, "the upwind graph has a cycle");
        self.diag.clear();
        self.diag.extend((0..n).map(|i| 1.0 + self.alpha[i] * (self.out[i] - q[i].min(0.0))));
        self.source.clear();
        self.source.extend((0..n).map(|i| self.alpha[i] * q[i].max(0.0)));
    }

    /// One implicit substep: `s` (the saturation at its start) becomes the solution, clipped
    /// to [0, 1]; `s0` is scratch.
    pub fn substep(&self, s: &mut [f64], s0: &mut Vec<f64>, q: &[f64]) {
        s0.clear();
        s0.extend_from_slice(s);
        // the reference's Newton iteration checks the residual at s⁰ before its first update
        let residual = |i: usize| {
            let inflow: f64 = self.inflow[i][..self.n_inflow[i] as usize].iter().map(|&(j, f)| f * s0[j]).sum();
            self.alpha[i] * (self.out[i] * s0[i] - inflow - (q[i].max(0.0) + s0[i] * q[i].min(0.0)))
        };
        if (0..s.len()).all(|i| residual(i).abs() <= F_TOL) {
            return;
        }
        // f(s) = s makes the system linear: one Newton update solves it; sweep downstream
        for &i in &self.order {
            let inflow: f64 = self.inflow[i][..self.n_inflow[i] as usize].iter().map(|&(j, f)| f * s[j]).sum();
            s[i] = (s0[i] + self.source[i] + self.alpha[i] * inflow) / self.diag[i];
        }
        for v in s.iter_mut() {
            *v = v.clamp(0.0, 1.0);
        }
    }
}
