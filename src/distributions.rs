//! What CleanRL takes from `torch.distributions`, with torch's operations in torch's order (torch 2.11): the
//! values and the gradients are torch's, to the bit. tch has no distributions.

use std::cell::OnceCell;
use tch::{Kind, Tensor};

/// `torch.distributions.Categorical(logits=...)`: one categorical per row of the last dimension.
pub struct Categorical {
    /// the logits normalized, as torch keeps them: `logits - logits.logsumexp(-1, keepdim=True)`
    pub logits: Tensor,
    probs: OnceCell<Tensor>,
}

impl Categorical {
    pub fn new(logits: &Tensor) -> Categorical {
        Categorical { logits: logits - logsumexp(logits), probs: OnceCell::new() }
    }

    /// `probs`: the softmax of the logits, made at its first use, as torch's lazy property. The gradients of its
    /// users reach the logits in the order the graph was made, so the place it is made matters to the bits.
    pub fn probs(&self) -> &Tensor {
        self.probs.get_or_init(|| self.logits.softmax(-1, Kind::Float))
    }

    /// `sample()`: `torch.multinomial(probs, 1, True)`, whose kernel for one sample is three operations: `q ~
    /// Exp(1)` from torch's generator, then `argmax(probs / q)`. Those run here, the same draws and the same bits.
    /// Its checks for NaN, negative and all-zero rows do not: each costs a sync and a dozen small operations per
    /// step. An action of probability 0 (masked, or underflowed) is never drawn.
    pub fn sample(&self) -> Tensor {
        tch::no_grad(|| {
            let probs = self.probs();
            let q = probs.empty_like().exponential_(1.0);
            (probs / q).argmax(-1, false)
        })
    }

    /// `log_prob(value)`: the normalized logit of each row's action.
    pub fn log_prob(&self, value: &Tensor) -> Tensor {
        self.logits.gather(-1, &value.unsqueeze(-1), false).squeeze_dim(-1)
    }

    /// `entropy()`: `-(logits * probs).sum(-1)`, the logits clamped at float32's lowest first (a -inf logit
    /// of probability 0 adds 0, not NaN).
    pub fn entropy(&self) -> Tensor {
        -(self.logits.clamp_min(f32::MIN as f64) * self.probs()).sum_dim_intlist(-1, false, Kind::Float)
    }
}

/// `x.logsumexp(-1, keepdim=True)`. ATen computes it as `log(sum(exp(x - m))) + m`, with `m` the row's maximum
/// (0 where that is infinite). Outside autograd, as in a rollout, those steps run here one by one, without
/// the guard for an infinite maximum: the same bits for finite logits, with fewer operations.
fn logsumexp(x: &Tensor) -> Tensor {
    if x.requires_grad() {
        return x.logsumexp(-1, true); // one node in the graph, with its own gradient
    }
    let max = x.amax(-1, true);
    (x - &max).exp().sum_dim_intlist(-1, true, Kind::Float).log() + max
}

/// `torch.distributions.Normal(loc, scale)`: one normal per element.
pub struct Normal {
    loc: Tensor,
    scale: Tensor,
}

impl Normal {
    /// As torch's constructor, `loc` and `scale` are broadcast to one shape (`broadcast_all`).
    pub fn new(loc: &Tensor, scale: &Tensor) -> Normal {
        let [loc, scale]: [Tensor; 2] = Tensor::broadcast_tensors(&[loc, scale]).try_into().expect("two tensors");
        Normal { loc, scale }
    }

    /// `sample()`: `torch.normal(loc, scale)`, outside autograd. Its kernel draws standard normals, then
    /// multiplies them by `scale` and adds `loc`.
    pub fn sample(&self) -> Tensor {
        tch::no_grad(|| self.loc.randn_like() * &self.scale + &self.loc)
    }

    /// `log_prob(value)`: `-((value - loc) ** 2) / (2 * var) - log(scale) - log(sqrt(2 pi))`, with
    /// `var = scale ** 2`. torch takes the log of `scale`, not a log std it may come from.
    pub fn log_prob(&self, value: &Tensor) -> Tensor {
        let var = self.scale.square(); // torch's `x ** 2` and `square` are one kernel: pow(x, 2)
        let log_scale = self.scale.log();
        -(value - &self.loc).square() / (2f64 * var) - log_scale - (2.0 * std::f64::consts::PI).sqrt().ln()
    }

    /// `entropy()`: `0.5 + 0.5 * log(2 pi) + log(scale)`, the constant added in f64 first, as Python does.
    pub fn entropy(&self) -> Tensor {
        self.scale.log() + (0.5 + 0.5 * (2.0 * std::f64::consts::PI).ln())
    }
}

#[cfg(test)]
mod tests {
    use super::Categorical;
    use tch::Tensor;

    /// Masked actions (probability 0, a logit of -inf) at the start, in the middle and at the end are never drawn.
    #[test]
    fn a_zero_probability_action_is_never_drawn() {
        for probs in [[0.0, 0.2, 0.8, 0.0], [0.1, 0.0, 0.0, 0.9], [0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0f32]] {
            let rows = Tensor::from_slice(&probs).view([1, 4]).expand([10_000, 4], false).contiguous();
            let actions = Vec::<i64>::try_from(Categorical::new(&rows.log()).sample()).expect("i64 actions");
            assert!(actions.iter().all(|&a| probs[a as usize] > 0.0), "{probs:?}");
        }
    }
}
