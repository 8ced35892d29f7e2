//! A run's first updates in one file, to check them against CleanRL's: with the environment variable
//! `PPO_TRACE=FILE`, the first update's inputs and results go to FILE (safetensors). It holds the initial weights
//! (`init.<name>`), the rollout as the network saw it (`rollout.obs`, `.actions`, `.rewards`, `.dones`,
//! `.next_obs`, `.next_done`), every epoch's minibatch order (`order.<epoch>`, counted on over updates: the
//! permutations the binary passed through [`Trace::order`]), the weights after the update (`after.<name>`) and the
//! update's logged values (`scalar.<column>`). With `PPO_TRACE_UPDATES=N`, the first N updates: update k > 1's
//! under `u<k>.` (`u2.rollout.obs`, `u2.after.<name>`, `u2.scalar.<column>`). Without PPO_TRACE it does nothing.
//! tests/parity.rs compares such a file with CleanRL's; docs/runs.md shows how to read one.

use crate::cli::Failure;
use tch::{nn, Device, Tensor};

/// What a run traces (see the module's header); every call does nothing without PPO_TRACE.
pub struct Trace {
    path: Option<std::path::PathBuf>,
    /// the network's weights (handles that share the VarStore's storage: they read its current values)
    variables: Vec<(String, Tensor)>,
    tensors: Vec<(String, Tensor)>,
    /// the epochs' orders `order` saw since the trace last wrote them
    orders: Vec<Tensor>,
    epochs: usize,
    /// the updates traced so far, and how many to trace (PPO_TRACE_UPDATES, 1 by default)
    updates: (usize, usize),
}

impl Trace {
    /// Starts the trace with the initial weights; the weights after each traced update are `vs`'s too.
    pub fn start(vs: &nn::VarStore) -> Trace {
        let path = std::env::var_os("PPO_TRACE").map(Into::into);
        let wanted = std::env::var("PPO_TRACE_UPDATES").ok().and_then(|n| n.parse().ok()).unwrap_or(1);
        let mut variables: Vec<_> = vs.variables().into_iter().collect();
        variables.sort_by(|a, b| a.0.cmp(&b.0));
        let mut trace =
            Trace { path, variables, tensors: Vec::new(), orders: Vec::new(), epochs: 0, updates: (0, wanted) };
        trace.weights("init");
        trace
    }

    fn weights(&mut self, prefix: &str) {
        if self.path.is_some() {
            for (name, t) in &self.variables {
                self.tensors.push((format!("{prefix}.{name}"), t.to_device(Device::Cpu).copy()));
            }
        }
    }

    /// Passes an epoch's minibatch order through (Core 6's permutation, drawn in the binary), keeping a
    /// copy as the next `order.<epoch>` while tracing.
    pub fn order(&mut self, inds: Tensor) -> Tensor {
        if self.path.is_some() {
            self.orders.push(inds.to_device(Device::Cpu).copy());
        }
        inds
    }

    /// A tensor of this update's rollout beyond those `finish` takes (`rollout.<name>`: a variant's
    /// own, e.g. the action masks).
    pub fn rollout(&mut self, name: &str, t: &Tensor) {
        if self.path.is_some() {
            let prefix = if self.updates.0 == 0 { String::new() } else { format!("u{}.", self.updates.0 + 1) };
            self.tensors.push((format!("{prefix}rollout.{name}"), t.to_device(Device::Cpu).contiguous()));
        }
    }

    /// Records the update and writes the file (again) at the end of each traced update; after the
    /// last one, later calls do nothing.
    pub fn finish(
        &mut self,
        row: &[(&str, crate::logs::Logged)],
        [obs, actions, next_obs]: [&Tensor; 3],
        [rewards, dones]: [&[Vec<f32>]; 2],
        next_done: &[f32],
    ) -> Result<(), Failure> {
        let Some(path) = self.path.clone() else { return Ok(()) };
        // the orders in which this update's epochs visited the batch (rows, or envs for an LSTM)
        for order in std::mem::take(&mut self.orders) {
            self.tensors.push((format!("order.{}", self.epochs), order));
            self.epochs += 1;
        }
        self.updates.0 += 1;
        let prefix = if self.updates.0 == 1 { String::new() } else { format!("u{}.", self.updates.0) };
        self.weights(&format!("{prefix}after"));
        let host = |rows: &[Vec<f32>]| Tensor::from_slice(&rows.concat());
        let rollout = [("obs", obs.to_device(Device::Cpu)), ("actions", actions.to_device(Device::Cpu))];
        let rollout = rollout.into_iter().chain([("rewards", host(rewards)), ("dones", host(dones))]);
        let rollout =
            rollout.chain([("next_obs", next_obs.to_device(Device::Cpu)), ("next_done", host(&[next_done.to_vec()]))]);
        self.tensors.extend(rollout.map(|(name, t)| (format!("{prefix}rollout.{name}"), t.contiguous())));
        let logged = row.iter().filter(|(_, v)| !matches!(v, crate::logs::Logged::Off));
        let scalars = logged.map(|(name, v)| (format!("{prefix}scalar.{name}"), Tensor::from_slice(&[v.value()])));
        self.tensors.extend(scalars);
        let written = Tensor::write_safetensors(&self.tensors, &path);
        written.map_err(|e| Failure::running(format!("cannot write the trace {}: {e}", path.display())))?;
        if self.updates.0 >= self.updates.1 {
            self.path = None;
        }
        Ok(())
    }
}
