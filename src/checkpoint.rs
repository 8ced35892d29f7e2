//! Checkpoints and `--resume`: [`RunLog::checkpoint`] writes the weights, Adam's state, the running
//! statistics and the counters; [`Start`] is where the loop starts, a new run or where the run's
//! checkpoint stood, read back bit for bit.

use crate::cli::Experiment;
use crate::fail;
use crate::lock::tmp_path;
use crate::logs::RunLog;
use crate::optim::FlatAdam;
use std::time::Instant;
use tch::{Device, Tensor};

impl RunLog {
    /// Every `--checkpoint-interval` updates and after the last: the weights, Adam's state, the
    /// running statistics and the counters in `checkpoint.safetensors`, written to a temporary file
    /// and renamed, so that a crash while writing leaves the previous one. Fails with exit code 1.
    /// The counters are those of the update logged last; `stats` are the running statistics of the
    /// variant's normalization wrappers (none: `&[]`).
    pub fn checkpoint(&mut self, optimizer: &FlatAdam, stats: &[envs::SharedRms]) {
        let ((iteration, global_step, learning_rate), num_iterations) = (self.last, self.num_iterations);
        let every = self.checkpoint_interval;
        if every == 0 || !(iteration.is_multiple_of(every) || iteration == num_iterations) {
            return;
        }
        let write_start = Instant::now();
        let mut tensors = std::collections::BTreeMap::new();
        for (name, t) in [("weights", &optimizer.flat), ("adam.m", &optimizer.m), ("adam.v", &optimizer.v)] {
            tensors.insert(name.to_string(), t.to_device(Device::Cpu));
        }
        for (i, handle) in stats.iter().enumerate() {
            let rms = handle.lock();
            tensors
                .insert(format!("rms.{i}"), Tensor::from_slice(&[&rms.mean[..], &rms.var[..], &[rms.count]].concat()));
        }
        let meta = CheckpointMeta {
            binary: self.binary.into(),
            env_id: self.env_id.clone(),
            iteration,
            global_step,
            adam_step: optimizer.t,
            learning_rate,
            elapsed_seconds: self.start_time.elapsed().as_secs_f64(),
            stats: stats.len(),
            checksum: checksum(&tensors),
            logged: Some((self.rows, self.episode_rows)),
        };
        let json = serde_json::to_vec(&meta).expect("numbers and strings");
        tensors.insert("meta".into(), Tensor::from_slice(&json));
        let path = self.dir.join("checkpoint.safetensors");
        let tmp = tmp_path(&path);
        let written = Tensor::write_safetensors(&tensors.iter().collect::<Vec<_>>(), &tmp)
            .map_err(std::io::Error::other)
            .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            self.fail(format!("cannot write {}: {e}", path.display()));
        }
        self.checkpoint_seconds = write_start.elapsed().as_secs_f64();
    }
}

/// `--resume`: the logs must hold every row up to the checkpoint (as many as it counted when it was
/// written), or resuming would leave a hole in them.
pub(crate) fn logs_reach(checkpoint: &CheckpointMeta, updates: usize, episodes: usize) -> Result<(), String> {
    // checkpoints of versions before the counts: one update row per iteration
    let (want_updates, want_episodes) = checkpoint.logged.unwrap_or((checkpoint.iteration, episodes));
    if updates < want_updates {
        let (i, missing) = (checkpoint.iteration, want_updates - updates);
        Err(format!(
            "its updates.csv has {updates} rows up to the checkpoint's iteration {i}, {missing} fewer than were logged"
        ))
    } else if episodes < want_episodes {
        let (step, missing) = (checkpoint.global_step, want_episodes - episodes);
        let at = format!("up to the checkpoint's global_step {step}");
        Err(format!("its episodes.csv has {episodes} episodes {at}, {missing} fewer than were logged"))
    } else {
        Ok(())
    }
}

/// Where the loop starts: a new run at iteration 0 with `--seed`; with `--resume`, where the run's
/// checkpoint stood.
pub struct Start {
    /// the last iteration done: the loop goes on with the next
    pub iteration: usize,
    /// the iterations of the whole run
    pub num_iterations: usize,
    pub global_step: u64,
    /// when the run started, as if it had never stopped (SPS counts the time before the checkpoint)
    pub start_time: Instant,
    /// the envs' seed: `--seed`, or when resuming one derived from it and the iteration
    pub seed: u64,
    /// the learning rate of the checkpoint's last update (none for a new run), where a variant adapts it
    pub learning_rate: Option<f64>,
    /// what the checkpoint said of itself (none for a new run): its run's logs must reach it
    pub(crate) checkpoint: Option<CheckpointMeta>,
}

impl Start {
    /// With `--resume`: reads the run's checkpoint into the optimizer (weights and Adam's state) and
    /// the statistics, and seeds libtorch with `seed + 1,000,003 x iteration` (two resumes from one
    /// checkpoint give the same metrics); the envs start fresh episodes from that seed. Bad
    /// checkpoints: one line, exit code 2, nothing written.
    pub fn new<A: Experiment>(
        args: &A,
        num_iterations: usize,
        optimizer: &mut FlatAdam,
        stats: &[envs::SharedRms],
    ) -> Start {
        let Some(dir) = &args.run().resume else {
            let (start_time, seed) = (Instant::now(), args.run().seed);
            let learning_rate = None;
            return Start {
                iteration: 0,
                num_iterations,
                global_step: 0,
                start_time,
                seed,
                learning_rate,
                checkpoint: None,
            };
        };
        let (meta, tensors) = read_checkpoint(dir, A::NAME, args.env_id()).unwrap_or_else(|e| fail(2, e));
        let tensor = |name: &str| tensors.get(name).ok_or_else(|| format!("{}: no {name}", dir.display()));
        let loaded = (|| -> Result<(), String> {
            for (name, into) in [("weights", &optimizer.flat), ("adam.m", &optimizer.m), ("adam.v", &optimizer.v)] {
                let saved = tensor(name)?;
                if saved.size() != into.size() {
                    let (n, m) = (saved.numel(), into.numel());
                    return Err(format!("its network has {n} parameters, this run's has {m} (another network)"));
                }
                tch::no_grad(|| into.shallow_clone().copy_(saved));
            }
            optimizer.t = meta.adam_step;
            if stats.len() != meta.stats {
                return Err(format!("it holds {} running statistics, this run has {}", meta.stats, stats.len()));
            }
            for (i, handle) in stats.iter().enumerate() {
                let v = Vec::<f64>::try_from(tensor(&format!("rms.{i}"))?).map_err(|e| e.to_string())?;
                let mut rms = handle.lock();
                let d = rms.mean.len();
                if v.len() != 2 * d + 1 {
                    return Err(format!("its statistics {i} have {} values, this run's {}", v.len(), 2 * d + 1));
                }
                *rms = envs::RunningMeanStd { mean: v[..d].to_vec(), var: v[d..2 * d].to_vec(), count: v[2 * d] };
            }
            Ok(())
        })();
        loaded.unwrap_or_else(|e| fail(2, format!("cannot resume from {}: {e}", dir.display())));
        if meta.iteration >= num_iterations {
            let (run, i) = (dir.display(), meta.iteration);
            fail(2, format!("{run} is complete ({i} of {num_iterations} iterations); a larger total extends it"));
        }
        let seed = args.run().seed.wrapping_add(1_000_003 * meta.iteration as u64);
        tch::manual_seed(seed as i64);
        let elapsed = std::time::Duration::from_secs_f64(meta.elapsed_seconds);
        let start_time = Instant::now().checked_sub(elapsed).unwrap_or_else(Instant::now);
        let (iteration, global_step, learning_rate) = (meta.iteration, meta.global_step, Some(meta.learning_rate));
        Start { iteration, num_iterations, global_step, start_time, seed, learning_rate, checkpoint: Some(meta) }
    }
}

/// What a checkpoint says of itself, beside its tensors (stored as JSON in the tensor "meta").
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct CheckpointMeta {
    pub(crate) binary: String,
    pub(crate) env_id: String,
    pub(crate) iteration: usize,
    pub(crate) global_step: u64,
    pub(crate) adam_step: i32,
    /// the learning rate of the last update
    pub(crate) learning_rate: f64,
    pub(crate) elapsed_seconds: f64,
    /// how many running statistics (`rms.0`, `rms.1`, ...)
    pub(crate) stats: usize,
    /// FNV-1a over every other tensor's bytes, in name order: a damaged file does not load
    pub(crate) checksum: u64,
    /// the rows of updates.csv and episodes.csv when it was written (absent before version 0.1's locks)
    #[serde(default)]
    pub(crate) logged: Option<(usize, usize)>,
}

fn checksum(tensors: &std::collections::BTreeMap<String, Tensor>) -> u64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for t in tensors.values() {
        let numel = t.numel();
        let mut bytes = vec![0u8; numel * t.kind().elt_size_in_bytes()];
        t.copy_data_u8(&mut bytes, numel);
        hash = bytes.iter().fold(hash, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3));
    }
    hash
}

pub(crate) fn read_checkpoint(
    dir: &std::path::Path,
    bin: &str,
    env_id: &str,
) -> Result<(CheckpointMeta, std::collections::BTreeMap<String, Tensor>), String> {
    let path = dir.join("checkpoint.safetensors");
    if !path.is_file() {
        let why = "it ran with --checkpoint-interval 0, or stopped before its first checkpoint";
        return Err(format!("cannot resume {}: it has no checkpoint.safetensors ({why})", dir.display()));
    }
    let damaged = |e: String| format!("cannot resume from {}: it is damaged or truncated ({e})", path.display());
    let mut tensors: std::collections::BTreeMap<String, Tensor> =
        Tensor::read_safetensors(&path).map_err(|e| damaged(e.to_string()))?.into_iter().collect();
    let meta = tensors.remove("meta").ok_or_else(|| damaged("no meta".into()))?;
    let meta: CheckpointMeta = Vec::<u8>::try_from(&meta)
        .map_err(|e| e.to_string())
        .and_then(|json| serde_json::from_slice(&json).map_err(|e| e.to_string()))
        .map_err(damaged)?;
    if checksum(&tensors) != meta.checksum {
        return Err(damaged("its checksum does not match".into()));
    }
    if meta.binary != bin || meta.env_id != env_id {
        let (b, e) = (&meta.binary, &meta.env_id);
        return Err(format!("{} is a checkpoint of {b} on {e}, not of {bin} on {env_id}", path.display()));
    }
    Ok((meta, tensors))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::tests::{run_args, Args};
    use crate::cli::RunArgs;
    use crate::lock::RunLock;
    use crate::logs::Logged;
    use tch::{nn, nn::Module, Kind};

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
        let lock = RunLock::take(dir.path(), "ppo").expect("lock");
        let mut log = RunLog::open(dir.path().to_path_buf(), lock, &args, "cpu", &start).expect("run log");
        let row = [("iteration", 7.0), ("global_step", 700.0), ("charts/learning_rate", 1e-3)]
            .map(|(n, v)| (n, Logged::OnHost(v)));
        log.update(&row, &Tensor::from(0f32), 0.0, Instant::now());
        log.checkpoint(&saved, &[envs::SharedRms::new(rms.clone())]);

        let args = Args { run: RunArgs { resume: Some(dir.path().to_path_buf()), ..run_args() }, ..args };
        let (_vs, _layer, mut restored) = make();
        let restored_rms = envs::SharedRms::new(envs::RunningMeanStd::new(2));
        let start = Start::new(&args, 8, &mut restored, std::slice::from_ref(&restored_rms));
        assert_eq!((start.iteration, start.global_step, start.learning_rate), (7, 700, Some(1e-3)));
        let bits = |t: &Tensor| crate::to_host(t).iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (a, b) in [(&saved.flat, &restored.flat), (&saved.m, &restored.m), (&saved.v, &restored.v)] {
            assert_eq!(bits(a), bits(b));
        }
        assert_eq!(saved.t, restored.t);
        assert_eq!(*restored_rms.lock(), rms);
    }
}
