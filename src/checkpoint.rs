//! Checkpoints and `--resume`, all of it: `write` puts the weights, Adam's state, the running
//! statistics and the counters in the run's `checkpoint.safetensors`; [`Start`] is where the loop
//! starts, a new run or where the run's checkpoint stood, read back and checked bit for bit (with the
//! seed it goes on from); and the run's logs are cut back to the checkpoint (`Start::kept_logs`,
//! `Start::logs_anew`). `RunLog` calls it (it knows when to write a checkpoint and what it logged);
//! nothing here knows the log.

use crate::cli::Experiment;
use crate::fail;
use crate::lock::{rename_durably, tmp_path};
use crate::optim::FlatAdam;
use std::path::Path;
use std::time::Instant;
use tch::{Device, Tensor};

/// What the run's log knows when a checkpoint is written: whose run it is, the update it logged
/// last, and how many rows it logged.
pub(crate) struct Progress<'a> {
    pub(crate) binary: &'a str,
    pub(crate) env_id: &'a str,
    /// the update logged last: its iteration, global_step and learning rate
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
        tensors.insert(name.to_string(), t.to_device(Device::Cpu));
    }
    if let Some(seeds) = &optimizer.seeds {
        tensors.insert("adam.seed_steps".into(), Tensor::from_slice(&seeds.steps));
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

/// `--resume`: the logs must hold every row up to the checkpoint (as many as it counted when it was
/// written), or resuming would leave a hole in them.
fn logs_reach(checkpoint: &CheckpointMeta, updates: usize, episodes: usize) -> Result<(), String> {
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
    checkpoint: Option<CheckpointMeta>,
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
            if let Some(seeds) = &mut optimizer.seeds {
                let steps = Vec::<i32>::try_from(tensor("adam.seed_steps")?).map_err(|e| e.to_string())?;
                if steps.len() != seeds.steps.len() {
                    return Err(format!("it holds {} seeds, this run has {}", steps.len(), seeds.steps.len()));
                }
                seeds.steps = steps;
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
struct CheckpointMeta {
    binary: String,
    env_id: String,
    iteration: usize,
    global_step: u64,
    adam_step: i32,
    /// the learning rate of the last update
    learning_rate: f64,
    elapsed_seconds: f64,
    /// how many running statistics (`rms.0`, `rms.1`, ...)
    stats: usize,
    /// FNV-1a over every other tensor's bytes, in name order: a damaged file does not load
    checksum: u64,
    /// the rows of updates.csv and episodes.csv when it was written (absent before version 0.1's locks)
    #[serde(default)]
    logged: Option<(usize, usize)>,
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

/// A CSV file's header and rows.
pub(crate) type Table = (csv::StringRecord, Vec<csv::StringRecord>);

impl Start {
    /// With `--resume`, before the run's lock is taken (whose file would then name this process):
    /// refuses logs that do not reach the checkpoint, exit code 2 ([`Start::kept_logs`]), or that
    /// cannot be read, exit code 1. A new run: nothing to check.
    pub(crate) fn check_logs(&self, dir: &Path) {
        if self.checkpoint.is_some() {
            self.kept_logs(dir).unwrap_or_else(|e| fail(1, format!("cannot read {}: {e}", dir.display())));
        }
    }

    /// With `--resume`, once the run's lock is held: another process may have resumed the run and
    /// ended between our reading of the checkpoint and our lock, and the checkpoint read is then not
    /// the run's (exit code 2). A new run: nothing to check.
    pub(crate) fn check_unchanged(&self, dir: &Path, bin: &str, env_id: &str) {
        if let Some(read) = &self.checkpoint {
            let now = read_checkpoint(dir, bin, env_id).map(|(meta, _)| meta.checksum);
            if now != Ok(read.checksum) {
                fail(2, format!("{}: its checkpoint changed while this process started; resume again", dir.display()));
            }
        }
    }

    /// The rows of updates.csv and episodes.csv up to where the loop starts; with `--resume` they must
    /// hold every row up to the checkpoint (one line, exit code 2 otherwise). A new run's: none.
    pub(crate) fn kept_logs(&self, dir: &Path) -> std::io::Result<(Table, Table)> {
        let (iteration, global_step) = (self.iteration as f64, self.global_step as f64);
        let updates_kept = rows_up_to(&dir.join("updates.csv"), Some(("iteration", iteration)))?;
        let episodes_kept = rows_up_to(&dir.join("episodes.csv"), Some(("global_step", global_step)))?;
        let (updates, episodes) = (("updates.csv", &updates_kept.0), ("episodes.csv", &episodes_kept.0));
        for ((name, header), column) in
            [(updates, "iteration"), (episodes, "global_step"), (episodes, "charts/episodic_return")]
        {
            if !header.is_empty() && !header.iter().any(|h| h == column) {
                fail(2, format!("cannot resume {}: its {name} has no {column} column (damaged)", dir.display()));
            }
        }
        if let Some(checkpoint) = &self.checkpoint {
            logs_reach(checkpoint, updates_kept.1.len(), episodes_kept.1.len())
                .unwrap_or_else(|e| fail(2, format!("cannot resume {}: {e}", dir.display())));
        }
        Ok((updates_kept, episodes_kept))
    }

    /// The logs of `dir` cut back to where the loop starts, the rows `kept` ([`Start::kept_logs`]):
    /// the CSVs written anew with them (what was logged after the checkpoint goes), and TensorBoard's
    /// events too, so that no row is missing or repeated; the writer of the new events (a new run: a
    /// new file, empty).
    pub(crate) fn logs_anew(
        &self,
        dir: &Path,
        (updates_kept, episodes_kept): &(Table, Table),
    ) -> std::io::Result<tboard::EventWriter<std::fs::File>> {
        rewrite(&dir.join("updates.csv"), updates_kept)?;
        rewrite(&dir.join("episodes.csv"), episodes_kept)?;
        if self.iteration > 0 {
            println!("resuming {} at iteration {}, global_step {}", dir.display(), self.iteration, self.global_step);
        }
        events_from(dir, [updates_kept, episodes_kept], None)
    }
}

/// The TensorBoard events of `events_dir` written anew from the rows of `logs_dir`'s CSVs (as
/// [`Start::logs_anew`] left them): the rows of seed `seed` where the CSVs have a column `seed` (a log
/// of several seeds), all rows otherwise; the old events go once the new are written.
pub(crate) fn events_anew(
    events_dir: &Path,
    logs_dir: &Path,
    seed: Option<u64>,
) -> std::io::Result<tboard::EventWriter<std::fs::File>> {
    let [updates, episodes] = ["updates.csv", "episodes.csv"].map(|name| rows_up_to(&logs_dir.join(name), None));
    events_from(events_dir, [&updates?, &episodes?], seed)
}

fn events_from(
    dir: &Path,
    tables: [&Table; 2],
    seed: Option<u64>,
) -> std::io::Result<tboard::EventWriter<std::fs::File>> {
    let old_events: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("events.out.tfevents.")))
        .collect();
    let mut tb = tboard::EventWriter::create(dir).map_err(std::io::Error::other)?;
    for (header, rows) in tables {
        let step = header.iter().position(|h| h == "global_step").unwrap_or(0);
        let seed_column = header.iter().position(|h| h == "seed");
        let ours = |row: &csv::StringRecord| match (seed_column, seed) {
            (Some(i), Some(seed)) => row[i].parse::<f64>().is_ok_and(|s| s == seed as f64),
            (None, None) => true,
            _ => false, // a log of seeds has no events of its own; a seed's are in a log of seeds
        };
        for row in rows.iter().filter(|row| ours(row)) {
            let step = row[step].parse::<f64>().unwrap_or(0.0) as i64;
            for (tag, value) in header.iter().zip(row).filter(|(tag, _)| tag.contains('/')) {
                let value = value.parse::<f64>().unwrap_or(f64::NAN) as f32;
                tb.write_scalar(step, tag, value).map_err(std::io::Error::other)?;
            }
        }
    }
    for old in old_events {
        std::fs::remove_file(old)?;
    }
    Ok(tb)
}

/// `--resume`: a CSV file's header and its rows (a row cut short by a crash ends them), with `limit`
/// (column, value) up to the last whose column is at most the value; none when the file does not exist
/// (a new run).
fn rows_up_to(path: &Path, limit: Option<(&str, f64)>) -> std::io::Result<Table> {
    if !path.exists() {
        return Ok(Default::default());
    }
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_path(path)?;
    let header = reader.headers()?.clone();
    let column = limit.map(|(name, value)| (header.iter().position(|h| h == name).unwrap_or(0), value));
    let fits = |r: &csv::StringRecord| {
        r.len() == header.len() && column.is_none_or(|(i, limit)| r[i].parse::<f64>().is_ok_and(|x| x <= limit))
    };
    let rows: Vec<_> = reader.records().map_while(|r| r.ok().filter(fits)).collect();
    Ok((header, rows))
}

/// Writes a CSV file anew with `table` (what was logged after the checkpoint goes), atomically.
fn rewrite(path: &Path, (header, rows): &Table) -> std::io::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let tmp = tmp_path(path);
    let mut writer = csv::Writer::from_path(&tmp)?;
    if !header.is_empty() {
        writer.write_record(header)?;
    }
    for row in rows {
        writer.write_record(row)?;
    }
    writer.flush()?;
    drop(writer);
    rename_durably(&tmp, path)
}
