//! Channelized permeability fields (the reference's `batch_generate`, test case 1 / ResSim-v1):
//! log-permeability `base` everywhere except one straight channel of value `channel`, its width
//! and both ends drawn at random. Drawn from numpy's legacy `RandomState` stream (MT19937, which
//! we implement here), so `batch_generate(seed)` gives the reference's fields exactly.

/// numpy's legacy MT19937 (`np.random.seed(int)`), enough of it for `uniform`.
pub struct Mt19937 {
    mt: [u32; 624],
    index: usize,
}

impl Mt19937 {
    /// `np.random.seed(seed)`: the classic `init_genrand`.
    pub fn new(seed: u32) -> Mt19937 {
        let mut mt = [0u32; 624];
        mt[0] = seed;
        for i in 1..624 {
            mt[i] = 1812433253u32.wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30)).wrapping_add(i as u32);
        }
        Mt19937 { mt, index: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.index >= 624 {
            for i in 0..624 {
                let y = (self.mt[i] & 0x8000_0000) | (self.mt[(i + 1) % 624] & 0x7fff_ffff);
                let mag = if y & 1 == 1 { 0x9908_b0df } else { 0 };
                self.mt[i] = self.mt[(i + 397) % 624] ^ (y >> 1) ^ mag;
            }
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random_sample()`: 53 random bits in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        let (a, b) = ((self.next_u32() >> 5) as f64, (self.next_u32() >> 6) as f64);
        (a * 67108864.0 + b) / 9007199254740992.0
    }

    /// `uniform(low, high)`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }
}

/// Python's `round` (half to even), returning an index.
fn round_half_even(x: f64) -> i64 {
    x.round_ties_even() as i64
}

/// One field, `ny` rows by `nx` columns, row-major: the channel runs across the columns, its
/// top row moving linearly from `left·ny` to `right·ny`, `width·ny` rows wide.
pub fn channel_field(nx: usize, ny: usize, channel: f64, base: f64, width: f64, left: f64, right: f64) -> Vec<f64> {
    let (index_left, index_right) = (round_half_even(left * ny as f64), round_half_even(right * ny as f64));
    let rows = round_half_even(width * ny as f64);
    let mut logk = vec![base; nx * ny];
    for col in 0..nx {
        let top = ((index_right - index_left) as f64 / nx as f64) * col as f64 + index_left as f64;
        for w in 0..rows {
            // the reference would fail on a channel past the last row; clamp instead
            let row = (round_half_even(top) + w).clamp(0, ny as i64 - 1) as usize;
            logk[row * nx + col] = channel;
        }
    }
    logk
}

/// `batch_generate(nx, ny, channel_k, base_k, channel_width_range, sample_size, seed)`.
pub fn batch_generate(
    nx: usize,
    ny: usize,
    channel: f64,
    base: f64,
    width_range: (f64, f64),
    n: usize,
    seed: u32,
) -> Vec<Vec<f64>> {
    let mut rng = Mt19937::new(seed);
    (0..n)
        .map(|_| {
            let width = rng.uniform(width_range.0, width_range.1);
            let left = rng.uniform(0.0, 1.0 - width);
            let right = rng.uniform(0.0, 1.0 - width);
            channel_field(nx, ny, channel, base, width, left, right)
        })
        .collect()
}

/// A log-permeability field of `ny` rows by `nx` columns from a CSV file: one line per grid
/// row (row 0 first), `nx` comma-separated numbers per line, each the natural log of the cell's
/// permeability in millidarcy (as `batch_generate` makes them: 5.5 in its channels, -2 around
/// them). The injectors are in column 0, the producers in the last column. Blank lines and lines
/// starting with `#` are skipped; spaces around values are allowed. A file that is not this is
/// one line saying where it is wrong.
pub fn read_logk_csv(path: &std::path::Path, nx: usize, ny: usize) -> Result<Vec<f64>, crate::EnvError> {
    let bad = |what: String| crate::EnvError(format!("permeability file {}: {what}", path.display()));
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .flexible(true)
        .from_path(path)
        .map_err(|e| bad(format!("cannot read it ({e})")))?;
    let mut logk = Vec::with_capacity(nx * ny);
    let mut rows = 0;
    for record in reader.records() {
        let record = record.map_err(|e| bad(format!("not CSV text ({e})")))?;
        let line = record.position().map_or(rows + 1, |p| p.line() as usize);
        if record.len() == 1 && record[0].is_empty() {
            continue; // a blank line
        }
        rows += 1;
        if rows > ny {
            return Err(bad(format!("more than {ny} rows; the grid is {nx}x{ny}")));
        }
        if record.len() != nx {
            return Err(bad(format!(
                "line {line} has {} values; the grid is {nx}x{ny} (one line per row, {nx} values each)",
                record.len()
            )));
        }
        for (col, field) in record.iter().enumerate() {
            match field.parse::<f64>() {
                Ok(v) if v.is_finite() => logk.push(v),
                _ => return Err(bad(format!("line {line}, value {}: '{field}' is not a finite number", col + 1))),
            }
        }
    }
    if rows != ny {
        return Err(bad(format!("{rows} rows; the grid is {nx}x{ny} (one line per row)")));
    }
    Ok(logk)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mt19937_matches_the_reference_sequence() {
        // first outputs of init_genrand(5489), from the MT19937 reference implementation
        let mut rng = Mt19937::new(5489);
        assert_eq!([rng.next_u32(), rng.next_u32(), rng.next_u32()], [3499211612, 581869302, 3890346734]);
    }
}
