//! Grids and the maps between levels: uneven partitions (larger blocks first), restriction by
//! block mean / sum / harmonic mean, prolongation by injection. Block reductions add left to
//! right over the block in row-major order, as the reference's numba loops do.

/// A rectangular grid of `ny` rows and `nx` columns over an `lx` by `ly` domain (unit thickness).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    pub nx: usize,
    pub ny: usize,
    pub lx: f64,
    pub ly: f64,
}

impl Grid {
    pub fn dx(&self) -> f64 {
        self.lx / self.nx as f64
    }
    pub fn dy(&self) -> f64 {
        self.ly / self.ny as f64
    }
    pub fn cell_volume(&self) -> f64 {
        self.dx() * self.dy()
    }
    pub fn cells(&self) -> usize {
        self.nx * self.ny
    }
}

/// `get_partition(l, n)`: the boundaries of `n` blocks over `l` cells, the first `l % n` blocks
/// one cell larger (61 over 8: 0, 8, 16, 24, 32, 40, 47, 54, 61).
pub fn partition(l: usize, n: usize) -> Vec<usize> {
    assert!(n >= 1 && n <= l, "cannot split {l} cells into {n} blocks");
    let (size, extra) = (l / n, l % n);
    let mut bounds = vec![0];
    for b in 0..n {
        bounds.push(bounds[b] + size + usize::from(b < extra));
    }
    bounds
}

/// How a coarse grid's cells cover a fine grid's: coarse cell (i, j) is fine rows
/// `rows[i]..rows[i + 1]` and columns `cols[j]..cols[j + 1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Partition {
    pub rows: Vec<usize>,
    pub cols: Vec<usize>,
}

/// A block reduction for `Partition::restrict`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reduce {
    Mean,
    Sum,
    HarmonicMean,
}

impl Partition {
    /// `get_partition_ind(fine.nx, fine.ny, coarse.nx, coarse.ny)`.
    pub fn between(fine: &Grid, coarse: &Grid) -> Partition {
        Partition { rows: partition(fine.ny, coarse.ny), cols: partition(fine.nx, coarse.nx) }
    }

    fn fine_nx(&self) -> usize {
        *self.cols.last().expect("partition bounds")
    }

    pub fn coarse_cells(&self) -> usize {
        (self.rows.len() - 1) * (self.cols.len() - 1)
    }

    /// The coarse cell holding fine cell `fine` (row-major index).
    pub fn coarse_of(&self, fine: usize) -> usize {
        let (r, c) = (fine / self.fine_nx(), fine % self.fine_nx());
        let i = self.rows.partition_point(|&b| b <= r) - 1;
        let j = self.cols.partition_point(|&b| b <= c) - 1;
        i * (self.cols.len() - 1) + j
    }

    /// Fine field to coarse field, block by block.
    pub fn restrict(&self, fine: &[f64], reduce: Reduce) -> Vec<f64> {
        let mut coarse = Vec::with_capacity(self.coarse_cells());
        self.restrict_into(fine, reduce, &mut coarse);
        coarse
    }

    /// `restrict` into a reused buffer.
    pub fn restrict_into(&self, fine: &[f64], reduce: Reduce, coarse: &mut Vec<f64>) {
        let nx = self.fine_nx();
        coarse.clear();
        for rows in self.rows.windows(2) {
            for cols in self.cols.windows(2) {
                let (mut acc, n) = (0.0, ((rows[1] - rows[0]) * (cols[1] - cols[0])) as f64);
                for r in rows[0]..rows[1] {
                    for &x in &fine[r * nx + cols[0]..r * nx + cols[1]] {
                        acc += if reduce == Reduce::HarmonicMean { 1.0 / x } else { x };
                    }
                }
                coarse.push(match reduce {
                    Reduce::Sum => acc,
                    Reduce::Mean => acc / n,
                    Reduce::HarmonicMean => 1.0 / (acc / n),
                });
            }
        }
    }

    /// Coarse field to fine field: every fine cell takes its block's value.
    pub fn prolong(&self, coarse: &[f64], fine: &mut [f64]) {
        let (nx, ncols) = (self.fine_nx(), self.cols.len() - 1);
        for (i, rows) in self.rows.windows(2).enumerate() {
            for (j, cols) in self.cols.windows(2).enumerate() {
                for r in rows[0]..rows[1] {
                    fine[r * nx + cols[0]..r * nx + cols[1]].fill(coarse[i * ncols + j]);
                }
            }
        }
    }
}

/// numpy's `np.sum` of a contiguous float64 array: `0.0 +` its pairwise sum (a plain loop below
/// 8 values, 8 accumulators up to 128, halves above).
pub fn np_sum(x: &[f64]) -> f64 {
    0.0 + pairwise(x)
}

fn pairwise(x: &[f64]) -> f64 {
    let n = x.len();
    if n < 8 {
        x.iter().fold(0.0, |acc, &v| acc + v)
    } else if n <= 128 {
        let mut r: [f64; 8] = x[..8].try_into().expect("8 values");
        let body = n - n % 8;
        for i in (8..body).step_by(8) {
            for j in 0..8 {
                r[j] += x[i + j];
            }
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &v in &x[body..] {
            res += v;
        }
        res
    } else {
        let mut half = n / 2;
        half -= half % 8;
        pairwise(&x[..half]) + pairwise(&x[half..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_put_the_larger_blocks_first() {
        assert_eq!(partition(61, 8), [0, 8, 16, 24, 32, 40, 47, 54, 61]);
        assert_eq!(partition(30, 8), [0, 4, 8, 12, 16, 20, 24, 27, 30]);
        assert_eq!(partition(15, 15), (0..=15).collect::<Vec<_>>());
    }

    #[test]
    fn restrict_and_prolong() {
        let fine_grid = Grid { nx: 3, ny: 2, lx: 3.0, ly: 2.0 };
        let coarse_grid = Grid { nx: 2, ny: 1, lx: 3.0, ly: 2.0 };
        let part = Partition::between(&fine_grid, &coarse_grid);
        let fine = [1.0, 2.0, 4.0, 3.0, 4.0, 4.0];
        assert_eq!(part.restrict(&fine, Reduce::Sum), [10.0, 8.0]);
        assert_eq!(part.restrict(&fine, Reduce::Mean), [2.5, 4.0]);
        assert_eq!(part.restrict(&fine, Reduce::HarmonicMean), [1.0 / ((1.0 + 0.5 + 1.0 / 3.0 + 0.25) / 4.0), 4.0]);
        let mut back = [0.0; 6];
        part.prolong(&[7.0, 9.0], &mut back);
        assert_eq!(back, [7.0, 7.0, 9.0, 7.0, 7.0, 9.0]);
        assert_eq!((part.coarse_of(2), part.coarse_of(4)), (1, 0));
    }
}
