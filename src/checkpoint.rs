//! Checkpoints: `write` puts the weights, Adam's state, the update's learning rate, the running statistics and
//! the counters in the run's `checkpoint.safetensors`; [`Start`] is where the loop starts, a new run or where
//! the run's checkpoint stood, read back and checked bit for bit (with the seed it goes on from). `RunLog` calls
//! `write` (it knows when, and how many rows it logged); cutting the logs back to a checkpoint is
//! `resume_logs`'s.

use crate::cli::Experiment;
use crate::cli::Failure;
use crate::logs::{rename_durably, tmp_path};
use crate::optim::FlatAdam;
use std::path::Path;
use std::time::Instant;
use tch::{Device, Tensor};

/// What the run's log knows when a checkpoint is written: whose run it is, the update it logged
/// last, and how many rows it logged.
pub(crate) struct Progress<'a> {
    pub(crate) binary: &'a str,
    pub(crate) env_id: &'a str,
    /// the update logged last: its iteration, global_step and learning rate ([`crate::Logged::Rate`])
    pub(crate) last: (usize, u64, f64),
    /// when the run started, as if it had never stopped (the checkpoint keeps the time so far)
    pub(crate) start_time: Instant,
    /// the rows of updates.csv and episodes.csv so far
    pub(crate) logged: (usize, usize),
}

/// Writes the weights, Adam's state, the running statistics `stats` of the variant's normalization
/// wrappers (none: `&[]`) and the counters of `progress` in `dir/checkpoint.safetensors`: to a
/// temporary file, then renamed, so that a crash while writing leaves the previous one. The error
/// is one line.
pub(crate) fn write(
    dir: &Path,
    progress: Progress,
    optimizer: &FlatAdam,
    stats: &[envs::SharedRms],
) -> Result<(), String> {
    let mut tensors = std::collections::BTreeMap::new();
    for (name, t) in [("weights", &optimizer.flat), ("adam.m", &optimizer.m), ("adam.v", &optimizer.v)] {
        tensors.insert(name.to_string(), optimizer.packed(t).to_device(Device::Cpu));
    }
    if let Some(seeds) = &optimizer.seeds {
        tensors.insert("adam.seed_steps".into(), Tensor::from_slice(&seeds.steps));
        let stopped_at: Vec<i64> = seeds.stopped_at.iter().map(|&at| at as i64).collect();
        tensors.insert("adam.seed_stopped_at".into(), Tensor::from_slice(&stopped_at));
        // for good, at that update
    }
    for (i, handle) in stats.iter().enumerate() {
        let rms = handle.lock();
        tensors.insert(format!("rms.{i}"), Tensor::from_slice(&[&rms.mean[..], &rms.var[..], &[rms.count]].concat()));
    }
    let (iteration, global_step, learning_rate) = progress.last;
    let meta = CheckpointMeta {
        binary: progress.binary.into(),
        env_id: progress.env_id.into(),
        iteration,
        global_step,
        adam_step: optimizer.t,
        learning_rate,
        elapsed_seconds: progress.start_time.elapsed().as_secs_f64(),
        stats: stats.len(),
        checksum: checksum(&tensors),
        logged: Some(progress.logged),
    };
    let json = serde_json::to_vec(&meta).expect("numbers and strings");
    tensors.insert("meta".into(), Tensor::from_slice(&json));
    let path = dir.join("checkpoint.safetensors");
    let tmp = tmp_path(&path);
    let written = Tensor::write_safetensors(&tensors.iter().collect::<Vec<_>>(), &tmp)
        .map_err(std::io::Error::other)
        .and_then(|()| rename_durably(&tmp, &path));
    written.map_err(|e| format!("cannot write {}: {e}", path.display()))
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
    /// the learning rate of the checkpoint's last update, as it logged it ([`crate::Logged::Rate`]; none for a new
    /// run), for a variant that adapts it
    pub learning_rate: Option<f64>,
    /// what the checkpoint said of itself (none for a new run): its run's logs must reach it
    pub(crate) checkpoint: Option<CheckpointMeta>,
}

impl Start {
    /// With `--resume`: reads the run's checkpoint into the optimizer (weights and Adam's state) and
    /// the statistics; the seed it gives is `seed + 1,000,003 x iteration`, for libtorch and the envs' fresh
    /// episodes (two resumes from one checkpoint give the same metrics). A bad checkpoint is bad input.
    pub fn new<A: Experiment>(
        args: &A,
        num_iterations: usize,
        optimizer: &mut FlatAdam,
        stats: &[envs::SharedRms],
    ) -> Result<Start, Failure> {
        let Some(dir) = &args.run().resume else {
            let (start_time, seed) = (Instant::now(), args.run().seed);
            let learning_rate = None;
            return Ok(Start {
                iteration: 0,
                num_iterations,
                global_step: 0,
                start_time,
                seed,
                learning_rate,
                checkpoint: None,
            });
        };
        let (meta, tensors) = read_checkpoint(dir, A::NAME, args.env_id()).map_err(Failure::bad_input)?;
        let tensor = |name: &str| tensors.get(name).ok_or_else(|| format!("{}: no {name}", dir.display()));
        let loaded = (|| -> Result<(), String> {
            for (name, into) in [("weights", &optimizer.flat), ("adam.m", &optimizer.m), ("adam.v", &optimizer.v)] {
                let saved = tensor(name)?;
                if saved.size() != [optimizer.packed_len()] {
                    let (n, m) = (saved.numel(), optimizer.packed_len());
                    return Err(format!("its network has {n} parameters, this run's has {m} (another network)"));
                }
                optimizer.unpack_into(saved, into);
            }
            optimizer.t = meta.adam_step;
            if let Some(seeds) = &mut optimizer.seeds {
                let steps = Vec::<i32>::try_from(tensor("adam.seed_steps")?).map_err(|e| e.to_string())?;
                if steps.len() != seeds.steps.len() {
                    return Err(format!("it holds {} seeds, this run has {}", steps.len(), seeds.steps.len()));
                }
                seeds.steps = steps;
                // a seed stopped for good stays stopped (a checkpoint written before there were such seeds: none)
                if let Some(stopped_at) = tensors.get("adam.seed_stopped_at") {
                    let stopped_at = Vec::<i64>::try_from(stopped_at).map_err(|e| e.to_string())?;
                    seeds.stopped_at = stopped_at.iter().map(|&at| at as usize).collect();
                }
            }
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
        loaded.map_err(|e| Failure::bad_input(format!("cannot resume from {}: {e}", dir.display())))?;
        if meta.iteration >= num_iterations {
            let (run, i) = (dir.display(), meta.iteration);
            let complete = format!("{run} is complete ({i} of {num_iterations} iterations); a larger total extends it");
            return Err(Failure::bad_input(complete));
        }
        let seed = args.run().seed.wrapping_add(1_000_003 * meta.iteration as u64);
        let elapsed = std::time::Duration::from_secs_f64(meta.elapsed_seconds);
        let start_time = Instant::now().checked_sub(elapsed).unwrap_or_else(Instant::now);
        let (iteration, global_step, learning_rate) = (meta.iteration, meta.global_step, Some(meta.learning_rate));
        Ok(Start { iteration, num_iterations, global_step, start_time, seed, learning_rate, checkpoint: Some(meta) })
    }
}

/// What a checkpoint says of itself, beside its tensors (stored as JSON in the tensor "meta").
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct CheckpointMeta {
    binary: String,
    env_id: String,
    pub(crate) iteration: usize,
    pub(crate) global_step: u64,
    adam_step: i32,
    /// the learning rate the last update logged as [`crate::Logged::Rate`]
    learning_rate: f64,
    elapsed_seconds: f64,
    /// how many running statistics (`rms.0`, `rms.1`, ...)
    stats: usize,
    /// FNV-1a over every other tensor's bytes, in name order: a damaged file does not load
    checksum: u64,
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

fn read_checkpoint(
    dir: &Path,
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

impl Start {
    /// With `--resume`, once the run's lock is held: another process may have resumed the run and
    /// ended between our reading of the checkpoint and our lock, and the checkpoint read is then not
    /// the run's (bad input). A new run: nothing to check.
    pub(crate) fn check_unchanged(&self, dir: &Path, bin: &str, env_id: &str) -> Result<(), Failure> {
        if let Some(read) = &self.checkpoint {
            let now = read_checkpoint(dir, bin, env_id).map(|(meta, _)| meta.checksum);
            if now != Ok(read.checksum) {
                let changed =
                    format!("{}: its checkpoint changed while this process started; resume again", dir.display());
                return Err(Failure::bad_input(changed));
            }
        }
        Ok(())
    }
}
