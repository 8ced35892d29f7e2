//! What CleanRL takes from numpy: its variance.

/// numpy's `np.var` of a float32 array: the population variance, in float32, with numpy's pairwise sums.
pub fn var(xs: &[f32]) -> f32 {
    let n = xs.len() as f32;
    let mean = pairwise_sum(xs) / n;
    let squares: Vec<f32> = xs.iter().map(|x| (x - mean) * (x - mean)).collect();
    pairwise_sum(&squares) / n
}

/// numpy's sum of a float32 array (`pairwise_sum` in its loops): below 8 values one by one; up to 128, eight
/// running sums combined in pairs, then the rest; above, the two halves (a multiple of 8 first) added.
fn pairwise_sum(a: &[f32]) -> f32 {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(0.0, |sum, x| sum + x);
    }
    if n <= 128 {
        let mut r: [f32; 8] = a[..8].try_into().expect("8 values");
        let whole = n - n % 8;
        for chunk in a[8..whole].chunks_exact(8) {
            r.iter_mut().zip(chunk).for_each(|(r, x)| *r += x);
        }
        let sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        return a[whole..].iter().fold(sum, |sum, x| sum + x);
    }
    let half = n / 2 - (n / 2) % 8;
    pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
}

#[cfg(test)]
mod tests {
    /// numpy 1.26.4's `np.var(a)` of float32 arrays `a[i] = float32((i * 7919) % 1000) / 37 - 13`, bit for bit:
    /// lengths 5 (one running sum), 100 (eight), 512 and 2048 (halves).
    #[test]
    fn var_is_numpys_float32_variance() {
        let a = |n: usize| (0..n).map(|i| ((i * 7919) % 1000) as f32 / 37.0 - 13.0).collect::<Vec<f32>>();
        for (n, bits) in [(5, 0x429e3ff5u32), (100, 0x4278beed), (512, 0x42745ef2), (2048, 0x427359aa)] {
            assert_eq!(super::var(&a(n)).to_bits(), bits, "n = {n}");
        }
        assert_eq!(super::var(&[3.0, 3.0]), 0.0);
    }
}
