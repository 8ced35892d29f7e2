//! The optimizer's mechanics: Adam and global gradient-norm clipping (CleanRL's `optim.Adam` and
//! `nn.utils.clip_grad_norm_`), with the parameters, gradients and Adam's state held in flat vectors. What to
//! call and with which values (Core 3's epsilon, Core 11's norm) is the binaries' business.

use tch::{nn, Kind, Tensor};

/// Adam (torch.optim.Adam on the CPU: betas 0.9 and 0.999, no weight decay), each parameter a slice of one
/// flat vector: it keeps its shape and name, but its storage becomes a slice of `flat`. A step runs
/// torch.optim.Adam's operations once on the whole vectors. Each is elementwise, so every value is the one torch
/// computes for its parameter, to the bit.
pub struct FlatAdam {
    /// every trainable parameter, one after the other (an LSTM's first: see [`FlatAdam::new`])
    pub flat: Tensor,
    /// the gradients as one vector too: each parameter's `.grad()` is a view of its slice, so
    /// backward accumulates into it and zeroing or clipping is one operation on the whole
    pub grad: Tensor,
    pub(crate) m: Tensor,
    pub(crate) v: Tensor,
    pub(crate) t: i32,
    /// with seeds ([`FlatAdam::new_seeds`]): where each seed's values are, and its steps
    pub(crate) seeds: Option<Seeds>,
    eps: f64,
    /// each parameter's slice of the flat vectors: (offset, length), in the VarStore's order
    slices: Vec<(i64, i64)>,
    /// each parameter's slice of `grad`, views made once, in torch's order, `module.parameters()`'s: a layer's
    /// weight before its bias (tch makes the bias first); the order in which clipping adds up their norms
    grads_in_torch_order: Vec<Tensor>,
}

impl FlatAdam {
    /// Moves every trainable parameter of `vs` into one vector, in the VarStore's order, except that
    /// an LSTM's weights go first, in cuDNN's order (`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`,
    /// `bias_hh_l0`, then layer 1's...): cuDNN runs an LSTM on its weights in place only when they are
    /// one block at the start of their storage (ATen's `try_get_weight_buf`), and PyTorch warns and
    /// copies them at every call otherwise. `eps` is Adam's epsilon.
    pub fn new(vs: &nn::VarStore, eps: f64) -> FlatAdam {
        let made = vs.trainable_variables().iter().map(|t| t.data_ptr() as usize).collect::<Vec<_>>();
        let lstm_weights = lstm_weights_first(vs);
        let torch_order = torch_order(vs, &made);
        let mut params = vs.trainable_variables();
        // each parameter starts where torch's allocator would start it, 64 bytes aligned: MKL's matrix products
        // take other paths, with other last bits, on a misaligned weight. An LSTM's weights stay one block.
        let mut slices = Vec::new();
        let mut offset = 0i64;
        for (i, p) in params.iter().enumerate() {
            if i >= lstm_weights {
                offset = aligned(offset);
            }
            slices.push((offset, p.numel() as i64));
            offset += p.numel() as i64;
        }
        let (flat, grad) = tch::no_grad(|| {
            let options = params.first().map_or((Kind::Float, tch::Device::Cpu), |p| (p.kind(), p.device()));
            let flat = Tensor::zeros([aligned(offset)], options);
            for (p, &(at, n)) in params.iter().zip(&slices) {
                flat.narrow(0, at, n).copy_(&p.flatten(0, -1));
            }
            let grad = flat.zeros_like();
            (flat, grad)
        });
        // every parameter gets a gradient (backward of 0 * the sum of all), then both become views
        let zero =
            Tensor::stack(&params.iter().map(|p| p.sum(Kind::Float)).collect::<Vec<_>>(), 0).sum(Kind::Float) * 0.0;
        zero.backward();
        tch::no_grad(|| {
            for (p, &(at, n)) in params.iter_mut().zip(&slices) {
                let shape = p.size();
                p.set_data(&flat.narrow(0, at, n).view(shape.as_slice()));
                p.grad().set_data(&grad.narrow(0, at, n).view(shape.as_slice()));
            }
        });
        let grads_in_torch_order = torch_order.iter().map(|&i| grad.narrow(0, slices[i].0, slices[i].1)).collect();
        let (m, v, seeds) = (flat.zeros_like(), flat.zeros_like(), None);
        FlatAdam { m, v, flat, grad, t: 0, seeds, eps, slices, grads_in_torch_order }
    }

    /// Adam for `seeds` networks stacked in `vs`, each parameter with the seeds as its first dimension
    /// (`[seeds, ...]`, each seed's values contiguous): [`FlatAdam::step_seeds`] moves only the seeds still
    /// stepping, each with its own step count, and a seed stopped for good ([`FlatAdam::stop_for_good`]) never
    /// moves again. `flat` is laid out as [`FlatAdam::new`] lays it out, parameter after parameter, so that every
    /// parameter stays one contiguous block (as autograd lays out gradients).
    pub fn new_seeds(vs: &nn::VarStore, eps: f64, seeds: usize) -> FlatAdam {
        let mut adam = FlatAdam::new(vs, eps);
        let mut seed_of = vec![0i64; adam.flat.numel()]; // the alignment's gaps: seed 0's, zeros that stay zeros
        for &(at, n) in &adam.slices {
            let per_seed = n as usize / seeds;
            for (k, chunk) in seed_of[at as usize..][..n as usize].chunks_mut(per_seed).enumerate() {
                chunk.fill(k as i64);
            }
        }
        let seed_of = Tensor::from_slice(&seed_of).to_device(adam.flat.device());
        adam.seeds = Some(Seeds { seed_of, steps: vec![0; seeds], stopped_at: vec![0; seeds] });
        adam
    }

    /// `t` (`flat`, `m` or `v`) without the alignment's gaps: the parameters end to end, as a checkpoint keeps them.
    pub fn packed(&self, t: &Tensor) -> Tensor {
        Tensor::cat(&self.slices.iter().map(|&(at, n)| t.narrow(0, at, n)).collect::<Vec<_>>(), 0)
    }

    /// How many values [`FlatAdam::packed`] gives: the number of parameters.
    pub fn packed_len(&self) -> i64 {
        self.slices.iter().map(|&(_, n)| n).sum()
    }

    /// Copies `packed`, laid out as [`FlatAdam::packed`] gives it, into `t`'s slices.
    pub fn unpack_into(&self, packed: &Tensor, t: &Tensor) {
        let mut from = 0;
        tch::no_grad(|| {
            for &(at, n) in &self.slices {
                t.narrow(0, at, n).copy_(&packed.narrow(0, from, n));
                from += n;
            }
        });
    }

    pub fn zero_grad(&mut self) {
        let _ = self.grad.zero_();
    }

    /// `nn.utils.clip_grad_norm_`: scales the gradients so that their global norm is at most
    /// `max_norm`; returns the norm before, left on the device (no sync per minibatch). As torch computes it:
    /// each parameter's norm, then the norm of those; the factor `max_norm / (norm + 1e-6)`, at most 1.
    pub fn clip_grad_norm(&mut self, max_norm: f64) -> Tensor {
        tch::no_grad(|| {
            let norm = match self.seeds {
                Some(_) => self.grad.norm(),
                None => {
                    let each: Vec<Tensor> = self.grads_in_torch_order.iter().map(vector_norm).collect();
                    vector_norm(&Tensor::stack(&each, 0))
                }
            };
            // Python's `max_norm / tensor` is `tensor.reciprocal() * max_norm`
            let _ = self.grad.g_mul_(&((&norm + 1e-6).reciprocal() * max_norm).clamp_max(1.0));
            norm
        })
    }

    /// One Adam step: m and v are running means of g and g², and each parameter moves by
    /// lr * m_hat / (sqrt(v_hat) + eps), with the bias-corrected m_hat = m / (1 - beta1^t)
    /// and v_hat = v / (1 - beta2^t).
    pub fn step(&mut self, lr: f64) {
        self.t += 1;
        adam_step([&mut self.m, &mut self.v, &mut self.flat], &self.grad, lr, self.t, self.eps)
    }

    /// [`FlatAdam::step`] for the seeds whose `stepping` is true and that are not stopped for good, each
    /// with its own step count; the others' parameters and state stay as they are, whatever their
    /// gradient holds (a NaN too). A seed that moves, moves as `step` would move it at its count, to the
    /// bit; while every seed steps at one count, this is `step` itself.
    pub fn step_seeds(&mut self, lr: f64, stepping: &[bool]) {
        let Some(seeds) = &mut self.seeds else { return self.step(lr) };
        let stepping: Vec<bool> = stepping.iter().zip(&seeds.stopped_at).map(|(&s, &at)| s && at == 0).collect();
        let t = self.t;
        if seeds.steps.iter().all(|&s| s == t) && stepping.iter().all(|&s| s) {
            seeds.steps.iter_mut().for_each(|s| *s += 1);
            return self.step(lr);
        }
        seeds.steps.iter_mut().zip(&stepping).for_each(|(steps, &s)| *steps += s as i32);
        self.t = seeds.steps.iter().copied().max().unwrap_or(0);
        // the seeds that step, by their step count: each group's step on copies, kept where its seeds are
        let mut counts: Vec<i32> = seeds.steps.iter().zip(&stepping).filter(|(_, &s)| s).map(|(&t, _)| t).collect();
        counts.sort_unstable();
        counts.dedup();
        for t in counts {
            let group: Vec<bool> = seeds.steps.iter().zip(&stepping).map(|(&steps, &s)| s && steps == t).collect();
            let moving = Tensor::from_slice(&group).to_device(self.flat.device()).index_select(0, &seeds.seed_of);
            tch::no_grad(|| {
                let mut moved = [self.m.copy(), self.v.copy(), self.flat.copy()];
                adam_step(moved.each_mut(), &self.grad, lr, t, self.eps);
                for (now, moved) in [&mut self.m, &mut self.v, &mut self.flat].into_iter().zip(moved) {
                    now.copy_(&moved.where_self(&moving, now));
                }
            });
        }
    }

    /// Stops for good each seed whose `finite` is 0 (its loss or gradient was not finite at `update`):
    /// from now on, and after a `--resume`, [`FlatAdam::step_seeds`] leaves its weights and Adam state
    /// as they are. A seed already stopped keeps the update it stopped at.
    pub fn stop_for_good(&mut self, finite: &[f64], update: usize) {
        let Some(seeds) = &mut self.seeds else { return };
        for (at, &finite) in seeds.stopped_at.iter_mut().zip(finite) {
            if finite == 0.0 && *at == 0 {
                *at = update;
            }
        }
    }

    /// Each seed's update at which it was stopped for good, 0 for a seed that steps on (none without seeds).
    pub fn stopped_at(&self) -> &[usize] {
        self.seeds.as_ref().map_or(&[], |seeds| &seeds.stopped_at)
    }
}

/// torch.optim.Adam's step on one parameter (`_single_tensor_adam`, torch 2.11), operation for operation:
/// `lerp_`, `mul_` and `addcmul_`, the bias corrections as Python's floats, `addcdiv_`. tch's `addcmul_` and
/// `addcdiv_` take no `value`; the tensor scaled by it first gives the same values (the kernels multiply it in
/// first). On several parameters laid end to end it gives each the values of its own step.
pub fn adam_step([m, v, param]: [&mut Tensor; 3], grad: &Tensor, lr: f64, t: i32, eps: f64) {
    let (beta1, beta2) = (0.9f64, 0.999f64);
    let step = t as f64;
    let (bias_correction1, bias_correction2) = (1.0 - beta1.powf(step), 1.0 - beta2.powf(step));
    let step_size = lr / bias_correction1;
    let bias_correction2_sqrt = bias_correction2.powf(std::hint::black_box(0.5)); // Python's `** 0.5`: libm's pow
    tch::no_grad(|| {
        let _ = m.lerp_(grad, 1.0 - beta1);
        let _ = v.g_mul_scalar_(beta2).addcmul_(&(grad * (1.0 - beta2)), grad);
        let denom = (v.sqrt() / bias_correction2_sqrt) + eps;
        let _ = param.addcdiv_(&(&*m * -step_size), &denom);
    })
}

/// `torch.linalg.vector_norm(t)`: the 2-norm of all of `t`'s values.
fn vector_norm(t: &Tensor) -> Tensor {
    t.linalg_norm(2.0, None::<&[i64]>, false, None::<tch::Kind>) // a 1-D tensor: linalg.vector_norm
}

/// Seeds stacked in one network ([`FlatAdam::new_seeds`]).
pub(crate) struct Seeds {
    /// the seed of each element of the flat vector
    seed_of: Tensor,
    /// each seed's own step count (a seed can stop early)
    pub(crate) steps: Vec<i32>,
    /// the update at which each seed was stopped for good, 0 while it steps
    pub(crate) stopped_at: Vec<usize>,
}

/// Where each parameter starts in the flat vectors, in elements: c10's CPU allocator aligns to 64 bytes.
const ALIGN: i64 = 16;

fn aligned(offset: i64) -> i64 {
    (offset + ALIGN - 1) / ALIGN * ALIGN
}

/// The VarStore's trainable variables in torch's order, `module.parameters()`'s: a module's own parameters, then
/// each submodule's in turn, in the order they were made (`made`, their data pointers: an LSTM's weights moved
/// first are not first for torch). Within a module a `bias` made right before its `weight` goes after it
/// (nn.Linear registers its weight first). So a parameter at the top, as `actor_logstd`, comes first. Indices into
/// the trainable variables as they are now.
fn torch_order(vs: &nn::VarStore, made: &[usize]) -> Vec<usize> {
    let vars = vs.variables_.lock().expect("the VarStore's lock (one thread)");
    let now: Vec<usize> = vars.trainable_variables.iter().map(|v| v.tensor.data_ptr() as usize).collect();
    let made: Vec<usize> = made.iter().filter_map(|p| now.iter().position(|q| q == p)).collect();
    let name = |i: usize| {
        let t = &vars.trainable_variables[i].tensor;
        vars.named_variables
            .iter()
            .find(|(_, v)| v.data_ptr() == t.data_ptr())
            .map_or(String::new(), |(n, _)| n.clone())
    };
    let paths: Vec<(usize, Vec<String>)> =
        made.into_iter().map(|i| (i, name(i).split('.').map(String::from).collect())).collect();
    let mut order = Vec::new();
    module_first(&paths, 0, &mut order);
    order
}

/// [`torch_order`] within one module: `paths` are its parameters' names, split at the dots, from `depth` on.
fn module_first(paths: &[(usize, Vec<String>)], depth: usize, order: &mut Vec<usize>) {
    let mut own: Vec<(usize, &str)> =
        paths.iter().filter(|(_, p)| p.len() == depth + 1).map(|(i, p)| (*i, p[depth].as_str())).collect();
    let mut k = 0;
    while k + 1 < own.len() {
        if own[k].1 == "bias" && own[k + 1].1 == "weight" {
            own.swap(k, k + 1);
            k += 1;
        }
        k += 1;
    }
    order.extend(own.iter().map(|(i, _)| i));
    let mut children: Vec<&String> = Vec::new();
    for (_, p) in paths.iter().filter(|(_, p)| p.len() > depth + 1) {
        if !children.contains(&&p[depth]) {
            children.push(&p[depth]);
        }
    }
    for child in children {
        let inside: Vec<(usize, Vec<String>)> =
            paths.iter().filter(|(_, p)| p.len() > depth + 1 && &p[depth] == child).cloned().collect();
        module_first(&inside, depth + 1, order);
    }
}

/// Puts the weights of the VarStore's first LSTM (by name: `<prefix>.weight_ih_l<k>`, ...) first
/// among its trainable variables, in cuDNN's order; the others keep their order after them. Returns how many
/// it put first.
fn lstm_weights_first(vs: &nn::VarStore) -> usize {
    let mut vars = vs.variables_.lock().expect("the VarStore's lock (one thread)");
    let mut names: Vec<&String> = vars.named_variables.keys().filter(|n| n.ends_with("weight_ih_l0")).collect();
    names.sort();
    let Some(prefix) = names.first().map(|n| n.trim_end_matches("weight_ih_l0").to_string()) else { return 0 };
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
    lstm.len()
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

    /// Every parameter and its gradient start 64 bytes aligned, as torch's allocator starts its own: MKL's
    /// matrix product gives other last bits on a misaligned weight. A bias of 1 and a log std of 1 come first.
    #[test]
    fn each_parameter_starts_where_torchs_allocator_would_start_it() {
        let vs = nn::VarStore::new(Device::Cpu);
        let _logstd = vs.root().zeros("actor_logstd", &[1, 1]);
        let _critic = nn::linear(vs.root() / "critic", 64, 1, Default::default());
        let _actor = nn::linear(vs.root() / "actor", 3, 64, Default::default());
        let optimizer = FlatAdam::new(&vs, 1e-5);
        for (name, t) in vs.variables() {
            assert_eq!(t.data_ptr() as usize % 64, 0, "{name} starts {} bytes past 64", t.data_ptr() as usize % 64);
            assert_eq!(t.grad().data_ptr() as usize % 64, 0, "{name}'s gradient");
        }
        assert_eq!(optimizer.flat.numel() % ALIGN as usize, 0);
    }

    /// Clipping adds the parameters' norms in `module.parameters()`'s order: the top module's own parameter first
    /// (made last), then the submodules as made, each weight before its bias, the LSTM's where it was made (its
    /// weights lead the flat vector, not this order).
    #[test]
    fn clipping_takes_the_parameters_in_torchs_order() {
        let vs = nn::VarStore::new(Device::Cpu);
        let _network = nn::linear(vs.root() / "network", 4, 8, Default::default());
        let _lstm = nn::lstm(vs.root() / "lstm", 8, 16, Default::default());
        let _actor = nn::linear(vs.root() / "actor", 16, 2, Default::default());
        let _logstd = vs.root().zeros("actor_logstd", &[1, 2]);
        let optimizer = FlatAdam::new(&vs, 1e-5);
        let vars = vs.variables();
        let name = |g: &Tensor| vars.iter().find(|(_, t)| t.grad().data_ptr() == g.data_ptr()).map(|(n, _)| n.clone());
        let names: Vec<_> = optimizer.grads_in_torch_order.iter().map(|g| name(g).unwrap_or_default()).collect();
        let lstm = ["lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0"];
        let want =
            [&["actor_logstd", "network.weight", "network.bias"][..], &lstm, &["actor.weight", "actor.bias"]].concat();
        assert_eq!(names, want);
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

    /// Two seeds stacked: a step with seed 1 stopped (and its gradient NaN) moves seed 0 as a one-seed FlatAdam
    /// moves it, to the bit, and leaves seed 1's parameters and Adam state as they were; the next step of both
    /// corrects each with its own step count; a seed stopped for good never moves again.
    #[test]
    fn seeds_step_each_on_their_own() {
        let (vs, one) = (nn::VarStore::new(Device::Cpu), nn::VarStore::new(Device::Cpu));
        let w = vs.root().var("w", &[2, 3], nn::Init::Const(1.0));
        let w0 = one.root().var("w", &[3], nn::Init::Const(1.0));
        let (mut seeds, mut alone) = (FlatAdam::new_seeds(&vs, 1e-8, 2), FlatAdam::new(&one, 1e-8));
        let step = |seeds: &mut FlatAdam, alone: &mut FlatAdam, seed1: f32, stepping: &[bool]| {
            let grads = Tensor::from_slice(&[3f32, 4.0, 0.0, seed1, 0.0, 0.4]).view([2, 3]);
            seeds.zero_grad();
            alone.zero_grad();
            (&w * &grads).sum(Kind::Float).backward();
            (&w0 * grads.get(0)).sum(Kind::Float).backward();
            seeds.step_seeds(0.1, stepping);
            alone.step(0.1);
        };
        // the flat vectors end in the alignment's zeros
        let row = |t: &Tensor, k: i64| Vec::<f32>::try_from(t.narrow(0, 0, 6).view([2, 3]).get(k)).expect("floats");
        let alone_row = |t: &Tensor| Vec::<f32>::try_from(t.narrow(0, 0, 3)).expect("floats");
        step(&mut seeds, &mut alone, f32::NAN, &[true, false]);
        assert_eq!(row(&seeds.flat, 0), alone_row(&alone.flat), "seed 0 moved otherwise than alone");
        assert_eq!((row(&seeds.m, 0), row(&seeds.v, 0)), (alone_row(&alone.m), alone_row(&alone.v)));
        assert_eq!(row(&seeds.flat, 1), [1.0; 3], "a stopped seed moved");
        assert_eq!((row(&seeds.m, 1), row(&seeds.v, 1)), (vec![0.0; 3], vec![0.0; 3]), "a stopped seed's state moved");
        assert_eq!(seeds.seeds.as_ref().map(|s| s.steps.clone()), Some(vec![1, 0]));
        // both step now: seed 1's first step moves each parameter by lr against its gradient's sign
        step(&mut seeds, &mut alone, 0.3, &[true, true]);
        assert_eq!(row(&seeds.flat, 0), alone_row(&alone.flat));
        let moved: Vec<f32> = row(&seeds.flat, 1).iter().map(|x| x - 1.0).collect();
        assert!(moved.iter().zip([-0.1f32, 0.0, -0.1]).all(|(a, b)| (a - b).abs() < 1e-6), "{moved:?}");
        // seed 1 stopped for good at update 7: it stays, whatever its gradient, while seed 0 goes on
        seeds.stop_for_good(&[1.0, 0.0], 7);
        seeds.stop_for_good(&[1.0, 0.0], 8);
        assert_eq!(seeds.stopped_at(), [0, 7]);
        let before = row(&seeds.flat, 1);
        step(&mut seeds, &mut alone, f32::INFINITY, &[true, true]);
        assert_eq!(row(&seeds.flat, 0), alone_row(&alone.flat));
        assert_eq!(row(&seeds.flat, 1), before, "a seed stopped for good moved");
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
