//! What CleanRL takes from `torch.distributions`, with torch's operations in torch's order (torch 2.11): the
//! values and the gradients are torch's, to the bit. tch has no distributions.

use tch::Tensor;

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
