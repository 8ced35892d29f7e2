//! The optimizer's mechanics: Adam over one flat vector of all parameters, and global gradient-norm
//! clipping on that vector (CleanRL's `optim.Adam` and `nn.utils.clip_grad_norm_`). What to call and
//! with which values (Core 3's epsilon, Core 11's norm) is the binaries' business.

use tch::{nn, Kind, Tensor};

/// Adam (torch.optim.Adam's update: betas 0.9 and 0.999, no weight decay) over all parameters
/// as one flat vector: each parameter keeps its shape and name but its storage becomes a slice
/// of `flat`. For networks this small libtorch's per-call overhead dominates, and a handful of
/// large ops replace ~200 tiny per-parameter ones (about a quarter of the update's time).
pub struct FlatAdam {
    /// every trainable parameter, one after the other (an LSTM's first: see [`FlatAdam::new`])
    pub flat: Tensor,
    /// the gradients as one vector too: each parameter's `.grad()` is a view of its slice, so
    /// backward accumulates into it and zeroing or clipping is one operation on the whole
    pub grad: Tensor,
    pub(crate) m: Tensor,
    pub(crate) v: Tensor,
    pub(crate) t: i32,
    eps: f64,
}

impl FlatAdam {
    /// Moves every trainable parameter of `vs` into one vector, in the VarStore's order, except that
    /// an LSTM's weights go first, in cuDNN's order (`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`,
    /// `bias_hh_l0`, then layer 1's...): cuDNN runs an LSTM on its weights in place only when they are
    /// one block at the start of their storage (ATen's `try_get_weight_buf`), and PyTorch warns and
    /// copies them at every call otherwise. `eps` is Adam's epsilon.
    pub fn new(vs: &nn::VarStore, eps: f64) -> FlatAdam {
        lstm_weights_first(vs);
        let mut params = vs.trainable_variables();
        let (flat, grad) = tch::no_grad(|| {
            let flat = Tensor::cat(&params.iter().map(|p| p.flatten(0, -1)).collect::<Vec<_>>(), 0);
            let grad = flat.zeros_like();
            (flat, grad)
        });
        // every parameter gets a gradient (backward of 0 * the sum of all), then both become views
        let zero =
            Tensor::stack(&params.iter().map(|p| p.sum(Kind::Float)).collect::<Vec<_>>(), 0).sum(Kind::Float) * 0.0;
        zero.backward();
        tch::no_grad(|| {
            let mut offset = 0;
            for p in params.iter_mut() {
                let (numel, shape) = (p.numel() as i64, p.size());
                p.set_data(&flat.narrow(0, offset, numel).view(shape.as_slice()));
                p.grad().set_data(&grad.narrow(0, offset, numel).view(shape.as_slice()));
                offset += numel;
            }
        });
        FlatAdam { m: flat.zeros_like(), v: flat.zeros_like(), flat, grad, t: 0, eps }
    }

    pub fn zero_grad(&mut self) {
        let _ = self.grad.zero_();
    }

    /// `nn.utils.clip_grad_norm_`: scales the gradients so that their global norm is at most
    /// `max_norm`; returns the norm before, left on the device (no sync per minibatch).
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> Tensor {
        tch::no_grad(|| {
            let norm = self.grad.norm();
            let _ = self.grad.g_mul_(&(max_norm / (&norm + 1e-6)).clamp_max(1.0));
            norm
        })
    }

    /// One Adam step: m and v are running means of g and g², and each parameter moves by
    /// lr * m_hat / (sqrt(v_hat) + eps), with the bias-corrected m_hat = m / (1 - beta1^t)
    /// and v_hat = v / (1 - beta2^t).
    pub fn step(&mut self, lr: f64) {
        let (beta1, beta2) = (0.9f64, 0.999f64);
        self.t += 1;
        let (bias_correction1, bias_correction2) = (1.0 - beta1.powi(self.t), 1.0 - beta2.powi(self.t));
        tch::no_grad(|| {
            let _ = self.m.lerp_(&self.grad, 1.0 - beta1); // m = beta1 m + (1 - beta1) g
            let _ = self.v.lerp_(&self.grad.square(), 1.0 - beta2); // v = beta2 v + (1 - beta2) g^2
            let denom = self.v.sqrt() / bias_correction2.sqrt() + self.eps;
            let _ = self.flat.g_sub_(&(&self.m / denom * (lr / bias_correction1)));
        })
    }
}

/// Puts the weights of the VarStore's first LSTM (by name: `<prefix>.weight_ih_l<k>`, ...) first
/// among its trainable variables, in cuDNN's order; the others keep their order after them.
fn lstm_weights_first(vs: &nn::VarStore) {
    let mut vars = vs.variables_.lock().expect("the VarStore's lock (one thread)");
    let mut names: Vec<&String> = vars.named_variables.keys().filter(|n| n.ends_with("weight_ih_l0")).collect();
    names.sort();
    let Some(prefix) = names.first().map(|n| n.trim_end_matches("weight_ih_l0").to_string()) else { return };
    let mut lstm = Vec::new(); // data pointers, in cuDNN's order
    for layer in 0.. {
        let layer_names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"].map(|w| format!("{prefix}{w}_l{layer}"));
        let found: Vec<usize> =
            layer_names.iter().filter_map(|n| vars.named_variables.get(n)).map(|t| t.data_ptr() as usize).collect();
        if found.is_empty() {
            break;
        }
        lstm.extend(found);
    }
    let rank = |t: &Tensor| lstm.iter().position(|&p| p == t.data_ptr() as usize).unwrap_or(lstm.len());
    vars.trainable_variables.sort_by_key(|v| rank(&v.tensor));
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{nn::RNN, Device};

    /// What ATen's `try_get_weight_buf` checks before cuDNN may use an LSTM's weights in place: one
    /// storage, starting at its offset 0 with weight_ih, then weight_hh, bias_ih, bias_hh (layer by
    /// layer), each contiguous and right after the one before; and the gradients, which cuDNN writes,
    /// in the same layout. No GPU here shows PyTorch's warning, so the layout is asserted.
    #[test]
    fn an_lstms_weights_are_laid_out_as_cudnn_checks() {
        for (input, layers) in [(64, 1), (512, 1), (8, 2)] {
            let vs = nn::VarStore::new(Device::Cpu);
            let _before = nn::linear(vs.root() / "encoder", 4, input, Default::default());
            let config = nn::RNNConfig { num_layers: layers, ..Default::default() };
            let _lstm = nn::lstm(vs.root() / "lstm", input, 128, config);
            let _after = nn::linear(vs.root() / "actor", 128, 6, Default::default());
            let optimizer = FlatAdam::new(&vs, 1e-5);
            let vars = vs.variables();
            let (base, grad_base, mut offset) =
                (optimizer.flat.data_ptr() as usize, optimizer.grad.data_ptr() as usize, 0);
            for layer in 0..layers {
                for w in ["weight_ih", "weight_hh", "bias_ih", "bias_hh"] {
                    let name = format!("lstm.{w}_l{layer}");
                    let t = &vars[&name];
                    assert!(t.is_contiguous(), "{name} is not contiguous");
                    assert_eq!(t.data_ptr() as usize, base + 4 * offset, "{name} ({input}) is not at element {offset}");
                    assert_eq!(t.grad().data_ptr() as usize, grad_base + 4 * offset, "{name}'s gradient");
                    offset += t.numel();
                }
            }
            let _ = &_lstm.seq(&Tensor::zeros([2, 3, input], (Kind::Float, Device::Cpu)));
        }
    }

    /// Without an LSTM the order is the VarStore's, unchanged.
    #[test]
    fn without_an_lstm_the_varstores_order_is_kept() {
        let vs = nn::VarStore::new(Device::Cpu);
        let _a = nn::linear(vs.root() / "b", 3, 2, Default::default());
        let _b = nn::linear(vs.root() / "a", 2, 2, Default::default());
        let before: Vec<usize> = vs.trainable_variables().iter().map(|t| t.numel()).collect();
        let _optimizer = FlatAdam::new(&vs, 1e-5);
        let after: Vec<usize> = vs.trainable_variables().iter().map(|t| t.numel()).collect();
        assert_eq!(before, after);
    }

    /// One step of FlatAdam equals torch.optim.Adam's first step on a hand example: every parameter
    /// moves by -lr * sign(g) (m_hat = g, v_hat = g^2), up to eps.
    #[test]
    fn the_first_adam_step_moves_each_parameter_by_lr_against_its_gradient() {
        let vs = nn::VarStore::new(Device::Cpu);
        let w = vs.root().var("w", &[3], nn::Init::Const(1.0));
        let mut optimizer = FlatAdam::new(&vs, 1e-8);
        optimizer.zero_grad();
        (&w * Tensor::from_slice(&[2f32, -3.0, 0.5])).sum(Kind::Float).backward();
        assert!((optimizer.clip_grad_norm(1e9).double_value(&[]) - (4.0f64 + 9.0 + 0.25).sqrt()).abs() < 1e-5);
        optimizer.step(0.1);
        let got = Vec::<f32>::try_from(&w).expect("floats");
        for (g, want) in got.iter().zip([0.9f32, 1.1, 0.9]) {
            assert!((g - want).abs() < 1e-6, "{got:?}");
        }
    }
}
