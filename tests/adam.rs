//! `FlatAdam::step` runs torch.optim.Adam's operations once on the whole flat vectors. This checks that each
//! parameter gets the values of the same operations run on it alone.

use ppo_details::optim::adam_step;
use ppo_details::FlatAdam;
use tch::{nn, Device, Kind, Tensor};

/// Parameter shapes, by name: CartPole's actor and critic (`ppo`), Atari's network (`ppo_atari`), and sizes that
/// are not multiples of 16.
fn shapes() -> Vec<(&'static str, Vec<Vec<i64>>)> {
    let cartpole = vec![vec![64, 4], vec![64], vec![64, 64], vec![64], vec![1, 64], vec![1], vec![2, 64], vec![2]];
    let mut atari = vec![vec![32, 4, 8, 8], vec![32], vec![64, 32, 4, 4], vec![64], vec![64, 64, 3, 3], vec![64]];
    atari.extend([vec![512, 3136], vec![512], vec![18, 512], vec![18], vec![1, 512], vec![1]]);
    let odd = vec![vec![7], vec![13, 3], vec![1], vec![17], vec![31, 5], vec![2]];
    vec![("CartPole", cartpole), ("Atari", atari), ("odd sizes", odd)]
}

/// 100 steps of `FlatAdam::step` on parameters of the given shapes against the same steps of [`adam_step`] on
/// each parameter alone, with the same random gradients and learning rates: equal to the bit.
fn flat_is_per_parameter(dims: &[Vec<i64>]) -> Result<(), String> {
    tch::manual_seed(3);
    let vs = nn::VarStore::new(Device::Cpu);
    let params: Vec<Tensor> =
        dims.iter().enumerate().map(|(i, d)| vs.root().randn(&format!("p{i}"), d, 0.0, 0.1)).collect();
    let mut alone: Vec<[Tensor; 3]> = params.iter().map(|p| [p.zeros_like(), p.zeros_like(), p.copy()]).collect();
    let mut adam = FlatAdam::new(&vs, 1e-5);
    for t in 1..=100 {
        let lr = 2.5e-4 * (1.0 - (t - 1) as f64 / 100.0);
        let grads: Vec<Tensor> = dims.iter().map(|d| Tensor::randn(d.as_slice(), (Kind::Float, Device::Cpu))).collect();
        adam.zero_grad();
        tch::no_grad(|| {
            for (p, g) in params.iter().zip(&grads) {
                let _ = p.grad().copy_(g);
            }
        });
        adam.step(lr);
        for (i, ([m, v, p], g)) in alone.iter_mut().zip(&grads).enumerate() {
            adam_step([m, v, p], g, lr, t, 1e-5);
            let differing = i64::try_from(p.ne_tensor(&params[i]).sum(Kind::Int64)).map_err(|e| e.to_string())?;
            if differing > 0 {
                return Err(format!("step {t}: {differing} values of parameter {i} {:?} differ", dims[i]));
            }
        }
    }
    Ok(())
}

/// With 1 and 2 threads, on CartPole's and Atari's shapes and sizes that are not multiples of 16: 100 steps of
/// the flat step give every parameter the values of the per-parameter steps, to the bit.
#[test]
fn the_flat_step_is_the_per_parameter_step_to_the_bit() {
    for threads in [1, 2] {
        tch::set_num_threads(threads);
        for (name, dims) in shapes() {
            if let Err(e) = flat_is_per_parameter(&dims) {
                panic!("{name}, {threads} threads: {e}");
            }
        }
    }
}
