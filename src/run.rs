//! The run's bookkeeping: the experiment's flags and their parsing (with `--resume`), where the loop
//! starts, and the run directory `runs/<run-name>/` with what goes in it (CleanRL's SummaryWriter and
//! more): args.json, the CSVs, TensorBoard events, the progress bar, checkpoints, the saved model.

use crate::fail;
use crate::flags::{at_least_one, plain_name};
use crate::lock::{tmp_path, RunLock};
use crate::optim::FlatAdam;
use clap::ArgAction;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;
use tch::{nn, Device, Kind, Tensor};

/// What the library needs to know of a binary's `Args` (clap's derive, serde both ways).
pub trait Experiment: clap::Parser + serde::Serialize + serde::de::DeserializeOwned {
    /// The binary's name, `env!("CARGO_BIN_NAME")`: `--exp-name`'s default, and what args.json and
    /// checkpoints record so that `--resume` takes only this binary's runs.
    const NAME: &'static str;
    /// The binary's own flags that `--resume` may change, beside the run's length, the checkpoint
    /// interval, `--save-model`, `--cuda` and the thread counts.
    const RESUME_MAY_CHANGE: &'static [&'static str] = &[];
    /// The experiment's flags, flattened into `Args`.
    fn run(&self) -> &RunArgs;
    /// `--env-id`.
    fn env_id(&self) -> &str;
    /// `--torch-threads` and `--env-threads` by default: one each, fastest for small networks.
    fn threads() -> (usize, usize) {
        (1, 1)
    }
    /// The combinations of flags that cannot work (each flag's own range is its value parser's), checked
    /// by [`parse_args`], on `--resume`'s arguments too: bad input, one line, exit code 2.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
}

/// The experiment's flags, the same in every binary (each `Args` flattens them in).
#[derive(clap::Args, Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunArgs {
    /// the name of this experiment (part of the run directory's name)
    #[arg(long, value_parser = plain_name)] // default: the binary's name (parse_args)
    pub exp_name: String,
    /// seed of the experiment (envs get seed + i, torch gets seed)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// cuDNN's deterministic algorithms, its autotuner off, as CleanRL's flag (CPU runs are deterministic either way)
    #[arg(long, default_value_t = true)]
    pub torch_deterministic: bool,
    /// use CUDA when a GPU is present (`--cuda false` for the CPU)
    #[arg(long, default_value_t = true)]
    pub cuda: bool,
    /// libtorch intra-op threads (1 is fastest for small networks, every core for a CNN)
    #[arg(long, value_parser = at_least_one)] // default: Experiment::threads() (parse_args)
    pub torch_threads: usize,
    /// threads stepping the envs (results do not depend on it)
    #[arg(long, value_parser = at_least_one)]
    pub env_threads: usize,
    /// save the weights to the run directory, then evaluate them for 10 episodes
    #[arg(long, default_value_t = false)]
    pub save_model: bool,
    /// write a checkpoint (weights, optimizer, statistics) every N updates and after the last; 0: never
    #[arg(long, default_value_t = 10)]
    pub checkpoint_interval: usize,
    /// continue the run in RUN_DIR from its checkpoint, with its arguments; only --total-timesteps (to
    /// extend it), --checkpoint-interval, --save-model, --cuda and thread counts may be given anew.
    /// The envs start fresh episodes (an LSTM from a zero state)
    #[arg(long, value_name = "RUN_DIR")]
    pub resume: Option<std::path::PathBuf>,
}

/// A logged value: a number on the host, or a scalar tensor on the device (a loss, a KL estimate).
/// [`RunLog::update`] reads all of an update's device values to the host in one copy: on a GPU the
/// update waits for it once, not once per value.
#[derive(Clone, Copy)]
pub enum Logged<'a> {
    OnHost(f64),
    OnDevice(&'a Tensor),
}

impl Logged<'_> {
    /// The value on the host (a device value: a copy of its own).
    pub fn value(&self) -> f64 {
        match self {
            Logged::OnHost(x) => *x,
            Logged::OnDevice(t) => t.double_value(&[]),
        }
    }
}

/// Scalar tensors of one device, read to the host in one copy (one wait for a GPU), as f64.
pub fn read_host(ts: &[&Tensor]) -> Vec<f64> {
    if ts.is_empty() {
        return Vec::new();
    }
    let all = Tensor::cat(&ts.iter().map(|t| t.to_kind(Kind::Double).reshape([-1])).collect::<Vec<_>>(), 0);
    let numel = all.numel();
    let mut host = vec![0f64; numel];
    all.to_device(Device::Cpu).copy_data(&mut host, numel);
    host
}

/// The run directory `runs/<run-name>/` and what goes in it: args.json, episodes.csv and
/// updates.csv (flushed every update), TensorBoard events with the CSVs' tags and steps
/// (`tensorboard --logdir runs`), the model and eval.csv; and the progress on the terminal.
pub struct RunLog {
    dir: std::path::PathBuf,
    /// held to the end of the process: no other process writes this run
    _lock: RunLock,
    episodes: csv::Writer<std::fs::File>,
    updates: csv::Writer<std::fs::File>,
    rows: usize,
    /// episodes.csv's rows so far (the checkpoint records both counts; a resume checks them)
    episode_rows: usize,
    /// the number of processes whose episodes this log records (the ranks of a data-parallel run):
    /// above one, episodes.csv gets a fourth column naming each episode's rank
    ranks: usize,
    episodes_header: bool,
    recent: std::collections::VecDeque<f64>,
    tb: tboard::EventWriter<std::fs::File>,
    /// a progress bar on a terminal; a plain line every 2% of the run otherwise
    bar: Option<ProgressBar>,
    /// when the previous update was logged (or the run started): the iteration's wall time
    last_update: Instant,
    /// when the run started, as if it had never stopped (for the checkpoint's elapsed time)
    start_time: Instant,
    checkpoint_interval: usize,
    /// the time the last checkpoint took to write, logged with the next update
    checkpoint_seconds: f64,
    binary: &'static str,
    env_id: String,
    num_iterations: usize,
    /// the last update's iteration, global_step and learning rate, for the checkpoint after it
    last: (usize, u64, f64),
    /// when this process started, and at which iteration: the time left is estimated from the pace since
    resumed: (Instant, usize),
}

impl RunLog {
    /// Makes a directory of the run's own: `runs/<run_name>`, or `<run_name>-2`, `-3`, ... when
    /// another run (e.g. one started in the same second) has that name; with `--resume`, opens the
    /// run's directory again. Either way this process takes the run's lock first (one writer per
    /// run: a second is refused with exit code 2, having changed nothing); other failures exit with 1.
    /// `device` is the device line (recorded in args.json); the run's length is `start`'s.
    pub fn create<A: Experiment>(run_name: &str, args: &A, device: &str, start: &Start) -> RunLog {
        let dir = match &args.run().resume {
            Some(dir) => dir.clone(),
            None => new_run_dir(run_name).unwrap_or_else(|e| fail(1, format!("cannot create runs/{run_name}: {e}"))),
        };
        if start.checkpoint.is_some() {
            // refused before the lock, whose file would then name this process
            kept_logs(&dir, start).unwrap_or_else(|e| fail(1, format!("cannot read {}: {e}", dir.display())));
        }
        let lock = RunLock::take(&dir, A::NAME).unwrap_or_else(|e| fail(2, e));
        if let Some(read) = &start.checkpoint {
            // another process may have resumed the run and ended between our reading and our lock
            let now = read_checkpoint(&dir, A::NAME, args.env_id()).map(|(meta, _)| meta.checksum);
            if now != Ok(read.checksum) {
                fail(2, format!("{}: its checkpoint changed while this process started; resume again", dir.display()));
            }
        }
        let log = RunLog::open(dir, lock, args, device, start);
        log.unwrap_or_else(|e| fail(1, format!("cannot write runs/{run_name}: {e}")))
    }

    /// With `--resume` the CSVs are cut back to the checkpoint (what was logged after it goes) and
    /// TensorBoard's events are written anew from them, so that no row is missing or repeated.
    /// Refuses (exit code 2, nothing changed) logs that do not reach the checkpoint.
    fn open<A: Experiment>(
        dir: std::path::PathBuf,
        lock: RunLock,
        args: &A,
        device: &str,
        start: &Start,
    ) -> std::io::Result<RunLog> {
        let (updates_kept, episodes_kept) = kept_logs(&dir, start)?;
        let mut json = serde_json::to_value(args)?;
        json["binary"] = A::NAME.into(); // what --resume checks
        json["device"] = device.into(); // the device the run used, as the line at start says
        let tmp = tmp_path(&dir.join("args.json"));
        std::fs::write(&tmp, serde_json::to_string_pretty(&json)? + "\n")?;
        std::fs::rename(tmp, dir.join("args.json"))?;
        rewrite(&dir.join("updates.csv"), &updates_kept)?;
        rewrite(&dir.join("episodes.csv"), &episodes_kept)?;
        let old_events: Vec<_> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("events.out.tfevents.")))
            .collect();
        if start.iteration > 0 {
            println!("resuming {} at iteration {}, global_step {}", dir.display(), start.iteration, start.global_step);
        }
        let mut tb = tboard::EventWriter::create(&dir).map_err(std::io::Error::other)?;
        for (header, rows) in [&updates_kept, &episodes_kept] {
            let step = header.iter().position(|h| h == "global_step").unwrap_or(0);
            for row in rows {
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
        let append = |name: &str| -> std::io::Result<csv::Writer<std::fs::File>> {
            let file = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(name))?;
            Ok(csv::Writer::from_writer(file))
        };
        let (episodes, updates) = (append("episodes.csv")?, append("updates.csv")?);
        let bar = std::io::stderr().is_terminal().then(|| {
            let template = "{elapsed_precise} [{wide_bar}] {pos}/{len} updates, {eta_precise} left, {msg}";
            let style = ProgressStyle::with_template(template).expect("valid template");
            ProgressBar::new(start.num_iterations as u64).with_style(style).with_position(start.iteration as u64)
        });
        let return_column = episodes_kept.0.iter().position(|h| h == "charts/episodic_return").unwrap_or(1);
        let returns = episodes_kept.1.iter().rev().take(20).rev();
        let recent = returns.map(|row| row[return_column].parse().unwrap_or(f64::NAN)).collect();
        Ok(RunLog {
            dir,
            _lock: lock,
            episodes,
            updates,
            rows: updates_kept.1.len(),
            episode_rows: episodes_kept.1.len(),
            ranks: 1,
            episodes_header: !episodes_kept.0.is_empty(),
            recent,
            tb,
            bar,
            last_update: Instant::now(),
            start_time: start.start_time,
            checkpoint_interval: args.run().checkpoint_interval,
            checkpoint_seconds: 0.0,
            binary: A::NAME,
            env_id: args.env_id().to_string(),
            num_iterations: start.num_iterations,
            last: (start.iteration, start.global_step, f64::NAN),
            resumed: (Instant::now(), start.iteration),
        })
    }

    /// A log of the episodes of `ranks` processes (a data-parallel run): episodes.csv gets a fourth
    /// column, each episode's rank.
    pub fn with_ranks(self, ranks: usize) -> RunLog {
        RunLog { ranks, ..self }
    }

    /// The episodes that ended at this step: CleanRL's `charts/episodic_return` and `episodic_length`.
    pub fn episodes(&mut self, global_step: u64, finished: &[envs::FinishedEpisode]) {
        for ep in finished {
            self.episode_of_rank(0, global_step, ep.r, ep.l);
        }
    }

    /// One episode of process `rank` (in a data-parallel run, one process logs them all).
    pub fn episode_of_rank(&mut self, rank: usize, global_step: u64, r: f64, l: u64) {
        self.episodes_header();
        let mut record = vec![global_step.to_string(), r.to_string(), l.to_string()];
        if self.ranks > 1 {
            record.push(rank.to_string());
        }
        // a failed write surfaces at the next update's flush
        let _ = self.episodes.write_record(&record);
        self.episode_rows += 1;
        let _ = self.tb.write_scalar(global_step as i64, "charts/episodic_return", r as f32);
        let _ = self.tb.write_scalar(global_step as i64, "charts/episodic_length", l as f32);
        self.recent.push_back(r);
        if self.recent.len() > 20 {
            self.recent.pop_front();
        }
    }

    /// Appends one row of (column, value) pairs (the header first) and the timing columns:
    /// the iteration's collection time (its wall time less learning), env stepping, learning, and
    /// writing the checkpoint after the previous update.
    /// Flushes, and shows progress. A non-finite `loss` (the last minibatch's) then ends the run,
    /// its rows kept. `env_seconds`: the time the envs took to step since the last update;
    /// `learning`: when the update (the epochs) began.
    pub fn update(&mut self, row: &[(&str, Logged)], loss: &Tensor, env_seconds: f64, learning: Instant) {
        let on_device = row.iter().filter_map(|(_, v)| if let Logged::OnDevice(t) = v { Some(*t) } else { None });
        let mut read = read_host(&on_device.chain([loss]).collect::<Vec<_>>()).into_iter();
        let mut row: Vec<(&str, f64)> = row
            .iter()
            .map(|(name, v)| (*name, if let Logged::OnHost(x) = v { *x } else { read.next().unwrap_or(f64::NAN) }))
            .collect();
        let loss = read.next().unwrap_or(f64::NAN);
        let (iteration_seconds, now) = (self.last_update.elapsed().as_secs_f64(), Instant::now());
        let learning_seconds = learning.elapsed().as_secs_f64();
        let checkpoint_seconds = std::mem::take(&mut self.checkpoint_seconds);
        // CleanRL's charts/SPS: steps per second since the run started, after explained_variance
        let global_step = row.iter().find(|(n, _)| *n == "global_step").map_or(0.0, |(_, v)| *v);
        let sps = (global_step / self.start_time.elapsed().as_secs_f64()).floor();
        let at = row.iter().position(|(n, _)| *n == "losses/explained_variance").map_or(row.len(), |i| i + 1);
        row.insert(at, ("charts/SPS", sps));
        row.push(("timing/collection_seconds", iteration_seconds - learning_seconds - checkpoint_seconds));
        row.push(("timing/env_seconds", env_seconds));
        row.push(("timing/learning_seconds", learning_seconds));
        row.push(("timing/checkpoint_seconds", checkpoint_seconds));
        self.last_update = now;
        if let Err(e) = self.write(&row) {
            self.fail(format!("cannot write the metrics: {e}"));
        }
        self.rows += 1;
        let get = |name: &str| row.iter().find(|(n, _)| *n == name).map_or(f64::NAN, |(_, v)| *v);
        self.last = (get("iteration") as usize, get("global_step") as u64, get("charts/learning_rate"));
        let iterations = self.num_iterations;
        let mean = self.recent.iter().sum::<f64>() / self.recent.len() as f64; // NaN before any episode
        let msg = format!("SPS {}, return (last 20) {mean:.1}", get("charts/SPS"));
        match &self.bar {
            Some(bar) => {
                bar.set_position(get("iteration") as u64);
                bar.set_message(msg);
            }
            None if self.rows.is_multiple_of(iterations.div_ceil(50)) || self.rows == iterations => {
                // the time left at this process's pace so far
                let ((since, first), iteration) = (self.resumed, get("iteration"));
                let pace = since.elapsed().as_secs_f64() / (iteration - first as f64);
                let left = (pace * (iterations as f64 - iteration)) as u64;
                let eta = format!("{:02}:{:02}:{:02}", left / 3600, left / 60 % 60, left % 60);
                println!("update {}/{iterations}, global_step {}, {eta} left, {msg}", self.rows, get("global_step"));
            }
            None => {}
        }
        if !loss.is_finite() {
            let losses =
                ["losses/policy_loss", "losses/value_loss", "losses/entropy"].map(|c| format!("{c} {}", get(c)));
            self.fail(format!("the loss became non-finite at update {} ({})", get("iteration"), losses.join(", ")));
        }
    }

    /// episodes.csv's header, once: before its first row or at the first update, whichever comes first
    fn episodes_header(&mut self) {
        if !self.episodes_header {
            self.episodes_header = true;
            let rank = (self.ranks > 1).then_some("rank");
            let header = ["global_step", "charts/episodic_return", "charts/episodic_length"].into_iter().chain(rank);
            let _ = self.episodes.write_record(header); // a failed write surfaces at the next flush
        }
    }

    fn write(&mut self, row: &[(&str, f64)]) -> std::io::Result<()> {
        self.episodes_header();
        if self.rows == 0 {
            self.updates.write_record(row.iter().map(|(name, _)| name))?;
        }
        self.updates.write_record(row.iter().map(|(_, value)| value.to_string()))?;
        let step = row.iter().find(|(name, _)| *name == "global_step").map_or(0, |(_, v)| *v as i64);
        for (tag, value) in row.iter().filter(|(name, _)| name.contains('/')) {
            // TensorBoard keeps f32, as CleanRL's SummaryWriter does
            self.tb.write_scalar(step, tag, *value as f32).map_err(std::io::Error::other)?;
        }
        self.updates.flush()?;
        self.episodes.flush()
    }

    /// Saves the weights as `<name>.safetensors` in the run directory: written to a temporary
    /// file, then renamed, so a crash never leaves a half-written model. Fails with exit code 1.
    pub fn save(&self, vs: &nn::VarStore, name: &str) -> std::path::PathBuf {
        let path = self.dir.join(format!("{name}.safetensors"));
        let tmp = tmp_path(&path);
        let saved = vs.save(&tmp).and_then(|()| Ok(std::fs::rename(&tmp, &path)?));
        saved.unwrap_or_else(|e| fail(1, format!("cannot save {}: {e}", path.display())));
        println!("model saved to {}", path.display());
        path
    }

    /// Writes eval.csv (one row per episode, CleanRL's tag) and prints the mean.
    pub fn eval(&self, returns: &[f64]) {
        let write = || -> std::io::Result<()> {
            let mut w = csv::Writer::from_path(self.dir.join("eval.csv"))?;
            w.write_record(["episode", "eval/episodic_return"])?;
            for (i, r) in returns.iter().enumerate() {
                w.write_record(&[i.to_string(), r.to_string()])?;
            }
            w.flush()
        };
        write().unwrap_or_else(|e| fail(1, format!("cannot write eval.csv: {e}")));
        let mean = returns.iter().sum::<f64>() / returns.len() as f64;
        println!("eval: mean episodic return {mean:.1} over {} episodes", returns.len());
    }

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

    /// Ends the progress bar where it stands, then fails with exit code 1 (metrics so far are kept).
    pub fn fail(&self, msg: String) -> ! {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
        fail(1, format!("{msg}; the metrics so far are in {}", self.dir.display()))
    }
}

/// `--resume`: a CSV file's header and its rows up to the last whose `column` is at most `limit` (a
/// row cut short by a crash ends them); none when the file does not exist (a new run).
fn rows_up_to(path: &std::path::Path, column: &str, limit: f64) -> std::io::Result<Table> {
    if !path.exists() {
        return Ok(Default::default());
    }
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_path(path)?;
    let header = reader.headers()?.clone();
    let i = header.iter().position(|h| h == column).unwrap_or(0);
    let fits = |r: &csv::StringRecord| r.len() == header.len() && r[i].parse::<f64>().is_ok_and(|x| x <= limit);
    let rows: Vec<_> = reader.records().map_while(|r| r.ok().filter(fits)).collect();
    Ok((header, rows))
}

/// The rows of updates.csv and episodes.csv up to where the loop starts; with `--resume` they must
/// hold every row up to the checkpoint (one line, exit code 2 otherwise).
fn kept_logs(dir: &std::path::Path, start: &Start) -> std::io::Result<(Table, Table)> {
    let (iteration, global_step) = (start.iteration as f64, start.global_step as f64);
    let updates_kept = rows_up_to(&dir.join("updates.csv"), "iteration", iteration)?;
    let episodes_kept = rows_up_to(&dir.join("episodes.csv"), "global_step", global_step)?;
    if let Some(checkpoint) = &start.checkpoint {
        logs_reach(checkpoint, updates_kept.1.len(), episodes_kept.1.len())
            .unwrap_or_else(|e| fail(2, format!("cannot resume {}: {e}", dir.display())));
    }
    Ok((updates_kept, episodes_kept))
}

/// A CSV file's header and rows.
type Table = (csv::StringRecord, Vec<csv::StringRecord>);

/// Writes a CSV file anew with `table` (what was logged after the checkpoint goes), atomically.
fn rewrite(path: &std::path::Path, (header, rows): &Table) -> std::io::Result<()> {
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
    std::fs::rename(tmp, path)
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

/// A new directory `runs/<run_name>` (`-2`, `-3`, ... appended while the name is taken).
fn new_run_dir(run_name: &str) -> std::io::Result<std::path::PathBuf> {
    std::fs::create_dir_all("runs")?;
    for suffix in 1.. {
        let name = if suffix == 1 { run_name.to_string() } else { format!("{run_name}-{suffix}") };
        let dir = std::path::Path::new("runs").join(name);
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            created => return created.map(|()| dir),
        }
    }
    unreachable!("a free name")
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

/// `Args::parse()` on [`command`], every error in one line with exit code 2; with `--resume`, the
/// run's own arguments.
/// Checks that the env id is known and is this binary's, and sets libtorch's threads (`--torch-threads`).
pub fn parse_args<A: Experiment>() -> A {
    let matches = command::<A>().try_get_matches();
    let parsed = matches.and_then(|m| A::from_arg_matches(&m).map(|args| (args, m)));
    let (args, matches) = parsed.unwrap_or_else(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => e.exit(),
        _ => fail(2, one_line(&e)),
    });
    let cuda_given = matches.value_source("cuda") == Some(clap::parser::ValueSource::CommandLine);
    crate::device::CUDA_ASKED.store(cuda_given && args.run().cuda, std::sync::atomic::Ordering::Relaxed);
    let args = match &args.run().resume {
        Some(dir) => resumed_args(dir, &args, &matches).unwrap_or_else(|e| fail(2, e)),
        None => args,
    };
    envs::check_id(A::NAME, args.env_id()).unwrap_or_else(|e| fail(2, e));
    if args.run().resume.is_none() {
        run_dir_can_be_made(&args).unwrap_or_else(|e| fail(2, e));
    }
    args.check().unwrap_or_else(|e| fail(2, e));
    tch::set_num_threads(args.run().torch_threads as i32);
    args
}

/// What clap parses for a binary: `A`'s flags with CleanRL's booleans (`--cuda` alone means true,
/// `--cuda false` turns it off), and the defaults that come from the binary (its name for
/// `--exp-name`, its thread counts).
fn command<A: Experiment>() -> clap::Command {
    let optional_value = |arg: clap::Arg| match arg.get_action() {
        ArgAction::SetTrue => {
            let default = arg.get_default_values().first().cloned().unwrap_or_else(|| "false".into());
            arg.action(ArgAction::Set)
                .num_args(0..=1)
                .default_missing_value("true")
                .default_value(default)
                .value_name("BOOL")
        }
        _ => arg,
    };
    let command = A::command().args_override_self(true).allow_negative_numbers(true).mut_args(optional_value);
    let default = |value: String| move |arg: clap::Arg| arg.required(false).default_value(value);
    let command = command.mut_arg("exp_name", default(A::NAME.into()));
    let command = command.mut_arg("torch_threads", default(A::threads().0.to_string()));
    command.mut_arg("env_threads", default(A::threads().1.to_string()))
}

/// Seconds since 1970, for the run's name.
pub fn unix_time() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The flags that `--resume` takes from the command line; the others are the run's (args.json).
/// (and the binary's `Experiment::RESUME_MAY_CHANGE`).
const RESUME_MAY_CHANGE: [&str; 7] =
    ["resume", "total_timesteps", "checkpoint_interval", "save_model", "cuda", "torch_threads", "env_threads"];

/// The longest name a file may have here (Linux's and macOS's NAME_MAX, in bytes).
const NAME_MAX: usize = 255;

/// Before anything starts: `runs` is a directory (or absent), and the run's directory name
/// `<env-id>__<exp-name>__<seed>__<unix time>` (with room for a `-N` suffix) is a name this file
/// system takes; the videos' folder has the same name.
fn run_dir_can_be_made<A: Experiment>(args: &A) -> Result<(), String> {
    let runs = std::path::Path::new("runs");
    if runs.exists() && !runs.is_dir() {
        return Err("runs is not a directory: the runs go in ./runs/, so move that file away".into());
    }
    let run = args.run();
    let fixed = format!("{}__{}__{}__{}-999", args.env_id(), "", run.seed, unix_time()).len();
    if fixed + run.exp_name.len() > NAME_MAX {
        let (n, most) = (run.exp_name.len(), NAME_MAX.saturating_sub(fixed));
        return Err(format!(
            "--exp-name is {n} bytes; the run directory's name <env-id>__<exp-name>__<seed>__<time> allows it {most}"
        ));
    }
    Ok(())
}

/// `--resume DIR`: the arguments in the run's args.json, with those of `RESUME_MAY_CHANGE` that the
/// command line gives; another flag given with a value other than the run's is an error. The
/// values go through the same parsers as the command line's (a value out of range, a key that is
/// no flag, a flag missing: one line, exit code 2); the binary's combination checks follow.
fn resumed_args<A: Experiment>(dir: &std::path::Path, given: &A, matches: &clap::ArgMatches) -> Result<A, String> {
    let cannot = |why: String| format!("cannot resume {}: {why}", dir.display());
    let json = std::fs::read_to_string(dir.join("args.json"))
        .map_err(|e| cannot(format!("no args.json there ({e}); --resume takes a run directory, runs/<run-name>")))?;
    let mut saved: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| cannot(format!("its args.json is damaged ({e})")))?;
    let bin = A::NAME;
    if saved["binary"] != bin {
        let other = saved["binary"].as_str().unwrap_or("an earlier version").to_string();
        return Err(cannot(format!("it is a run of {other}, not of {bin}")));
    }
    let given = serde_json::to_value(given).map_err(|e| e.to_string())?;
    for (key, value) in given.as_object().into_iter().flatten() {
        if matches.value_source(key) != Some(clap::parser::ValueSource::CommandLine) {
            continue;
        }
        if RESUME_MAY_CHANGE.contains(&key.as_str()) || A::RESUME_MAY_CHANGE.contains(&key.as_str()) {
            saved[key] = value.clone();
        } else if saved[key] != *value {
            let (flag, run) = (key.replace('_', "-"), &saved[key]);
            let may = "the run's length (to extend it), --checkpoint-interval, --save-model, --cuda and thread counts";
            return Err(cannot(format!(
                "--{flag} {value} is not the run's {run}; with --resume only {may} may change"
            )));
        }
    }
    let words = as_words::<A>(&saved, dir).map_err(|e| cannot(format!("its args.json {e}")))?;
    let matches = command::<A>()
        .try_get_matches_from(words)
        .map_err(|e| cannot(format!("its args.json has {}", one_line(&e))))?;
    A::from_arg_matches(&matches).map_err(|e| cannot(format!("its args.json does not fit {bin} ({})", one_line(&e))))
}

/// args.json's values as the command line that gives them: `--flag=value` for each of the
/// binary's flags (lists joined by commas), `--resume=DIR`.
fn as_words<A: Experiment>(saved: &serde_json::Value, dir: &std::path::Path) -> Result<Vec<String>, String> {
    let saved = saved.as_object().ok_or("is not an object")?;
    let command = command::<A>();
    let flags: Vec<_> = command.get_arguments().filter_map(|a| Some((a.get_id().as_str(), a.get_long()?))).collect();
    if let Some(key) =
        saved.keys().find(|k| !["binary", "device"].contains(&k.as_str()) && !flags.iter().any(|(id, _)| id == k))
    {
        return Err(format!("has \"{key}\", which is no flag of {}", A::NAME));
    }
    let mut words = vec![A::NAME.to_string(), format!("--resume={}", dir.display())];
    for (id, long) in flags.into_iter().filter(|(id, _)| *id != "resume") {
        let scalar = |v: &serde_json::Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        let values: Vec<String> = match saved.get(id).ok_or_else(|| format!("lacks \"{id}\" (--{long})"))? {
            serde_json::Value::Null => continue,
            serde_json::Value::Array(items) if items.is_empty() => continue,
            serde_json::Value::Array(items) => items.iter().map(scalar).collect(),
            value => vec![scalar(value)],
        };
        words.push(format!("--{long}={}", values.join(",")));
    }
    Ok(words)
}

/// clap's first paragraph (the error and the allowed values), in one line, without its usage lines.
fn one_line(e: &clap::Error) -> String {
    e.to_string().split("\n\n").next().unwrap_or_default().trim_start_matches("error: ").replace("\n  ", " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::FromArgMatches;
    use tch::{nn::Module, Kind};

    /// A binary's `Args` in miniature.
    #[derive(clap::Parser, serde::Serialize, serde::Deserialize)]
    struct Args {
        #[command(flatten)]
        #[serde(flatten)]
        run: RunArgs,
        #[arg(long, default_value = "CartPole-v1")]
        env_id: String,
    }

    impl Experiment for Args {
        const NAME: &'static str = "ppo";
        fn run(&self) -> &RunArgs {
            &self.run
        }
        fn env_id(&self) -> &str {
            &self.env_id
        }
        fn threads() -> (usize, usize) {
            (3, 2)
        }
    }

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

    fn run_args() -> RunArgs {
        let args: Args = parse_from(["ppo"]).expect("the defaults parse");
        args.run
    }

    /// `parse_args`'s command, from given words.
    fn parse_from<const N: usize>(words: [&str; N]) -> Result<Args, clap::Error> {
        Args::from_arg_matches(&command::<Args>().try_get_matches_from(words)?)
    }

    /// The binary's name and thread counts are the defaults of --exp-name and the thread flags.
    #[test]
    fn the_binarys_name_and_threads_are_the_defaults() {
        let args = run_args();
        assert_eq!((args.exp_name.as_str(), args.torch_threads, args.env_threads), ("ppo", 3, 2));
        let given = parse_from(["ppo", "--torch-threads", "5", "--exp-name", "x", "--cuda"]).expect("parses");
        assert_eq!((given.run.exp_name.as_str(), given.run.torch_threads, given.run.cuda), ("x", 5, true));
        let given = parse_from(["ppo", "--cuda", "false", "--save-model"]).expect("parses");
        assert_eq!((given.run.cuda, given.run.save_model), (false, true), "CleanRL's booleans");
    }
}
