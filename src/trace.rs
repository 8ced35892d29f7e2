//! A testing aid (tests/parity.rs): with the environment variable PPO_TRACE=FILE, the first update's
//! inputs and results go to FILE (safetensors): the initial weights (`init.<name>`), the rollout as
//! the network saw it (`rollout.obs`, `.actions`, `.rewards`, `.dones`, `.next_obs`, `.next_done`),
//! every epoch's minibatch order (`order.<epoch>`), the weights after the update (`after.<name>`)
//! and the update's logged values (`scalar.<column>`). Without the variable it does nothing.

use crate::fail;
use tch::{nn, Device, Tensor};

/// What a run traces (see the module's header); every call does nothing without PPO_TRACE.
pub struct Trace {
    path: Option<std::path::PathBuf>,
    tensors: Vec<(String, Tensor)>,
    epochs: usize,
}

impl Trace {
    /// Starts the trace with the initial weights.
    pub fn start(vs: &nn::VarStore) -> Trace {
        let mut trace = Trace { path: std::env::var_os("PPO_TRACE").map(Into::into), tensors: Vec::new(), epochs: 0 };
        trace.weights("init", vs);
        trace
    }

    fn weights(&mut self, prefix: &str, vs: &nn::VarStore) {
        if self.path.is_some() {
            for (name, t) in vs.variables() {
                self.tensors.push((format!("{prefix}.{name}"), t.to_device(Device::Cpu).copy()));
            }
        }
    }

    /// The order in which the next epoch visits the batch (rows, or envs for an LSTM).
    pub fn order(&mut self, inds: &Tensor) {
        if self.path.is_some() {
            self.tensors.push((format!("order.{}", self.epochs), inds.to_device(Device::Cpu).copy()));
            self.epochs += 1;
        }
    }

    /// Writes the file at the end of the first update (later calls do nothing). Fails with exit code 1.
    pub fn finish(
        &mut self,
        vs: &nn::VarStore,
        row: &[(&str, crate::run::Logged)],
        [obs, actions, next_obs]: [&Tensor; 3],
        [rewards, dones]: [&[Vec<f32>]; 2],
        next_done: &[f32],
    ) {
        self.weights("after", vs);
        let Some(path) = self.path.take() else { return };
        let host = |rows: &[Vec<f32>]| Tensor::from_slice(&rows.concat());
        let rollout = [("obs", obs.to_device(Device::Cpu)), ("actions", actions.to_device(Device::Cpu))];
        let rollout = rollout.into_iter().chain([("rewards", host(rewards)), ("dones", host(dones))]);
        let rollout =
            rollout.chain([("next_obs", next_obs.to_device(Device::Cpu)), ("next_done", host(&[next_done.to_vec()]))]);
        self.tensors.extend(rollout.map(|(name, t)| (format!("rollout.{name}"), t.contiguous())));
        self.tensors.extend(row.iter().map(|(name, v)| (format!("scalar.{name}"), Tensor::from_slice(&[v.value()]))));
        let written = Tensor::write_safetensors(&self.tensors, &path);
        written.unwrap_or_else(|e| fail(1, format!("cannot write the trace {}: {e}", path.display())));
    }
}
