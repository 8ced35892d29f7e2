//! What CleanRL takes from `torch.distributions` and numpy: a categorical sample, numpy's variance.

use tch::{Kind, Tensor};

/// One action per row of `probs`, as `torch.distributions.Categorical(probs).sample()` (tch has no
/// distributions): the CDF inverted at a uniform draw, [`invert_cdf`] (5 us here; multinomial takes 15).
/// An action of probability 0 (masked, or underflowed) is never drawn.
pub fn categorical_sample(probs: &Tensor) -> Tensor {
    invert_cdf(probs, &Tensor::rand([probs.size()[0], 1], (Kind::Float, probs.device())))
}

/// The action each row of `probs` takes for its draw `u` in [0, 1) (a column): the first whose
/// cumulative probability exceeds `u` times the row's total, that is, the number of entries of the
/// CDF at or below it. So an action of probability 0, whose CDF entry equals the one before it (0
/// for the first), is never the answer, for any `u`: not at `u = 0` (the first positive action),
/// nor past the last positive one (`u` times the total stays below the total: scaled by the sum
/// itself, a rounding shortfall of the sum cannot reach beyond it, and a product that rounds up to
/// the total is taken just below it).
pub fn invert_cdf(probs: &Tensor, u: &Tensor) -> Tensor {
    let cdf = probs.cumsum(-1, Kind::Float);
    let total = cdf.narrow(1, probs.size()[1] - 1, 1);
    let u = (u * &total).minimum(&total.nextafter(&total.zeros_like()));
    cdf.le_tensor(&u).sum_dim_intlist(-1, false, Kind::Int64)
}

/// numpy's `np.var`: the population variance (divided by n), two passes in f64.
pub fn var(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = xs.clone().count() as f64;
    let mean = xs.clone().sum::<f64>() / n;
    xs.map(|x| (x - mean).powi(2)).sum::<f64>() / n
}

#[cfg(test)]
mod tests {
    use tch::Tensor;

    /// The sampler at chosen draws: at u = 0 and just below 1, with actions of probability 0 at the
    /// start, in the middle and at the end, it returns the first action whose cumulative probability
    /// exceeds u, never one of probability 0; and the same for a sum short of 1 by rounding.
    #[test]
    fn a_zero_probability_action_is_never_drawn() {
        let below_one = 1.0 - f32::EPSILON / 2.0; // the largest f32 below 1: Tensor::rand's largest draw
        let cases: &[(&[f32], f32, i64)] = &[
            (&[0.0, 0.5, 0.5], 0.0, 1),       // masked first: u = 0 takes the first valid one
            (&[0.0, 0.0, 1.0], 0.0, 2),       // two masked first
            (&[0.5, 0.5, 0.0], below_one, 1), // masked last: the largest draw stops at the last valid one
            (&[0.5, 0.0, 0.5], 0.5, 2),       // masked in the middle: a draw at its (equal) CDF skips it
            (&[0.5, 0.0, 0.5], 0.4999, 0),
            (&[0.3, 0.0, 0.0, 0.7], 0.3, 3),
            (&[0.25, 0.25, 0.25, 0.25], 0.0, 0),
            (&[0.25, 0.25, 0.25, 0.25], 0.25, 1),
            (&[0.25, 0.25, 0.25, 0.25], below_one, 3),
            (&[0.3, 0.3, 0.3, 0.0], below_one, 2), // a sum short of 1 (0.9): scaled, never past index 2
            (&[1e-30, 0.0, 1.0], below_one, 2),
        ];
        for &(probs, u, want) in cases {
            let got =
                super::invert_cdf(&Tensor::from_slice(probs).view([1, -1]), &Tensor::from_slice(&[u]).view([1, 1]));
            assert_eq!(got.int64_value(&[0]), want, "probs {probs:?}, u {u}");
        }
        // every draw of a fine grid over [0, 1), one row per masking pattern: no masked action drawn
        let u = Tensor::linspace(0.0, below_one as f64, 100_001, (tch::Kind::Float, tch::Device::Cpu)).view([-1, 1]);
        for probs in [[0.0, 0.2, 0.8, 0.0], [0.1, 0.0, 0.0, 0.9], [0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]] {
            let rows = Tensor::from_slice(&probs).view([1, 4]).expand([100_001, 4], false);
            let actions = Vec::<i64>::try_from(super::invert_cdf(&rows, &u)).expect("i64 actions");
            assert!(actions.iter().all(|&a| probs[a as usize] > 0.0), "{probs:?}");
        }
    }

    /// numpy: np.var([1, 2, 3, 4]) == 1.25, np.var([3, 3]) == 0.
    #[test]
    fn var_is_numpys_population_variance() {
        assert_eq!(super::var([1.0, 2.0, 3.0, 4.0].into_iter()), 1.25);
        assert_eq!(super::var([3.0, 3.0].into_iter()), 0.0);
    }
}
