//! When a checkpoint is written, and what the logs vouch for on disk before it.

use super::RunLog;
use crate::checkpoint;
use crate::optim::FlatAdam;
use crate::signals;
use std::time::Instant;

impl RunLog {
    /// Every `--checkpoint-interval` updates and after the last: the weights, Adam's state, the
    /// running statistics and the counters in `checkpoint.safetensors` (`checkpoint::write`), so that
    /// a crash while writing leaves the previous one. Fails with exit code 1. The counters are those of
    /// the update logged last; `stats` are the running statistics of the variant's normalization
    /// wrappers (none: `&[]`).
    pub fn checkpoint(&mut self, optimizer: &FlatAdam, stats: &[envs::SharedRms]) {
        let (iteration, every) = (self.last.0, self.checkpoint_interval);
        if every == 0 || !(iteration.is_multiple_of(every) || iteration == self.num_iterations) {
            return;
        }
        let write_start = Instant::now();
        // what the checkpoint vouches for reaches the disk before it: the rows and events up to its iteration
        let seeds = self.seeds.iter().filter_map(|seed| seed.file.as_ref());
        let synced = [self.updates.get_ref(), self.episodes.get_ref()].into_iter().chain(&self.tb_file).chain(seeds);
        if let Err(e) = synced.map(std::fs::File::sync_data).collect::<std::io::Result<Vec<()>>>() {
            self.fail(format!("cannot write the metrics to disk: {e}"));
        }
        let (binary, env_id, last, start_time) = (self.binary, &self.env_id[..], self.last, self.start_time);
        let progress =
            checkpoint::Progress { binary, env_id, last, start_time, logged: (self.rows, self.episode_rows) };
        if let Err(e) = checkpoint::write(&self.dir, progress, optimizer, stats) {
            self.fail(e);
        }
        signals::stopped_at(|at| at.checkpoint = Some(iteration));
        self.checkpoint_seconds = write_start.elapsed().as_secs_f64();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::Start;
    use crate::cli::tests::{run_args, Args};
    use crate::cli::RunArgs;
    use crate::lock::RunLock;
    use crate::logs::Logged;
    use tch::nn::Module;
    use tch::{nn, Device, Kind, Tensor};

    /// A checkpoint gives back the weights, Adam's state and the running statistics bit for bit,
    /// and the counters of the update logged last.
    #[test]
    fn a_checkpoint_restores_weights_adam_and_statistics_bit_for_bit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let make = || {
            let vs = nn::VarStore::new(Device::Cpu);
            let layer = nn::linear(vs.root() / "layer", 3, 2, Default::default());
            let optimizer = FlatAdam::new(&vs, 1e-5);
            (vs, layer, optimizer)
        };
        let (_vs, layer, mut saved) = make();
        for _ in 0..3 {
            saved.zero_grad();
            layer.forward(&Tensor::randn([4, 3], (Kind::Float, Device::Cpu))).square().sum(Kind::Float).backward();
            saved.step(1e-2);
        }
        let rms = envs::RunningMeanStd { mean: vec![0.1, -0.2], var: vec![3.0, 1e-3], count: 5.5 };
        let args = Args { run: RunArgs { resume: None, ..run_args() }, env_id: "CartPole-v1".into() };
        let start = Start::new(&args, 7, &mut make().2, &[]);
        let lock = RunLock::take(dir.path(), "ppo", "ppo").expect("lock");
        let mut log = RunLog::open(dir.path().to_path_buf(), lock, &args, "cpu", &start).expect("run log");
        let row = [("iteration", Logged::OnHost(7.0)), ("global_step", Logged::OnHost(700.0))];
        let row = [&row[..], &[("charts/learning_rate", Logged::Rate(1e-3))]].concat();
        log.update(&row, &Tensor::from(0f32), 0.0, Instant::now());
        log.checkpoint(&saved, &[envs::SharedRms::new(rms.clone())]);

        let args = Args { run: RunArgs { resume: Some(dir.path().to_path_buf()), ..run_args() }, ..args };
        let (_vs, _layer, mut restored) = make();
        let restored_rms = envs::SharedRms::new(envs::RunningMeanStd::new(2));
        let start = Start::new(&args, 8, &mut restored, std::slice::from_ref(&restored_rms));
        assert_eq!((start.iteration, start.global_step, start.learning_rate), (7, 700, Some(1e-3)));
        let bits = |t: &Tensor| crate::host::to_host(t).iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (a, b) in [(&saved.flat, &restored.flat), (&saved.m, &restored.m), (&saved.v, &restored.v)] {
            assert_eq!(bits(a), bits(b));
        }
        assert_eq!(saved.t, restored.t);
        assert_eq!(*restored_rms.lock(), rms);
    }
}
