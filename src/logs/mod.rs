//! The run's logs: the directory `runs/<run-name>/` and what goes in it (CleanRL's SummaryWriter and
//! more): here args.json, episodes.csv and updates.csv and their TensorBoard events; in its files, each a job,
//! the progress bar (`progress`), the saved model and eval.csv (`eval`), the logs of several seeds (`seeds`)
//! or processes (`processes`), and when a checkpoint is written (`checkpoints`, [`RunLog::checkpoint`]). What a
//! checkpoint holds is `checkpoint`'s; the logs cut back to it on `--resume`, `resume_logs`'s; the line a signal
//! prints, `signals`'.

use crate::checkpoint::Start;
use crate::cli::Experiment;
use crate::durable::{rename_durably, sync_dir, tmp_path};
use crate::exit::fail;
use crate::host::read_host;
use crate::lock::RunLock;
use crate::resume_logs;
use crate::signals;
use progress::Progress;
use seeds::SeedEvents;
use std::time::Instant;
use tch::Tensor;

mod checkpoints; // when a checkpoint is written, and what the logs vouch for before it
pub mod eval; // the saved model and eval.csv
mod processes; // the episodes of several processes in one log
mod progress; // the progress bar, or a line every 2% of the run
mod seeds; // several seeds in one log

/// A logged value: a number on the host, or a scalar tensor on the device (a loss, a KL estimate).
/// [`RunLog::update`] reads all of an update's device values to the host in one copy: on a GPU the
/// update waits for it once, not once per value.
#[derive(Clone, Copy)]
pub enum Logged<'a> {
    OnHost(f64),
    /// the update's learning rate, on the host: the checkpoint keeps it, and a `--resume` goes on from it where a
    /// variant adapts its rate (the one a variant logs as `charts/learning_rate`)
    Rate(f64),
    /// on the device: a scalar, or with seeds ([`RunLog::with_seeds`]) a value per seed, `[seeds]`
    OnDevice(&'a Tensor),
    /// a value per seed on the host (with seeds)
    OnHostEach(&'a [f64]),
    /// a column this run does not have (`debug/adaptive_kl` without `--adaptive-lr`): not written
    Off,
}

impl Logged<'_> {
    /// The value on the host (a device value: a copy of its own).
    pub fn value(&self) -> f64 {
        match self {
            Logged::OnHost(x) | Logged::Rate(x) => *x,
            Logged::OnDevice(t) => t.reshape([-1]).double_value(&[0]), // the first seed's, with seeds
            Logged::OnHostEach(xs) => xs.first().copied().unwrap_or(f64::NAN),
            Logged::Off => f64::NAN,
        }
    }
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
    /// the fourth column of episodes.csv, naming the process of each episode, where one process logs
    /// the episodes of several (the ranks of a data-parallel run, the workers of one learner)
    process_column: Option<&'static str>,
    episodes_header: bool,
    recent: std::collections::VecDeque<f64>,
    tb: tboard::EventWriter<std::fs::File>,
    /// the events file again, for its fsync
    tb_file: Option<std::fs::File>,
    /// a progress bar on a terminal; a plain line every 2% of the run otherwise
    progress: Progress,
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
    /// the last update's iteration, global_step and learning rate ([`Logged::Rate`]), for the checkpoint after it
    last: (usize, u64, f64),
    /// with seeds ([`RunLog::with_seeds`]): each seed's TensorBoard events, and its envs' count
    seeds: Vec<SeedEvents>,
    envs_per_seed: usize,
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
        resume_logs::check_logs(start, &dir); // --resume: logs that cannot go on are refused before the lock
        let lock = RunLock::take(&dir, A::NAME, &args.run().exp_name).unwrap_or_else(|e| fail(2, e));
        start.check_unchanged(&dir, A::NAME, args.env_id()); // --resume: the checkpoint read is still the run's
        let log = RunLog::open(dir, lock, args, device, start);
        let log = log.unwrap_or_else(|e| fail(1, format!("cannot write runs/{run_name}: {e}")));
        println!("run directory: {}", log.dir.display());
        let checkpoint = (start.iteration > 0).then_some(start.iteration);
        let (binary, dir, every) = (A::NAME, log.dir.clone(), args.run().checkpoint_interval);
        let line = signals::StopLine { binary, dir, update: start.iteration, checkpoint, every, mpi: false };
        signals::stop_with(line);
        log
    }

    /// With `--resume` the CSVs are cut back to the checkpoint (what was logged after it goes) and
    /// TensorBoard's events are written anew from them, so that no row is missing or repeated
    /// (`resume_logs::logs_anew`). Refuses (exit code 2, nothing changed) logs that do not reach the
    /// checkpoint.
    pub(crate) fn open<A: Experiment>(
        dir: std::path::PathBuf,
        lock: RunLock,
        args: &A,
        device: &str,
        start: &Start,
    ) -> std::io::Result<RunLog> {
        let kept = resume_logs::kept_logs(start, &dir)?;
        let mut json = serde_json::to_value(args)?;
        json["binary"] = A::NAME.into(); // what --resume checks
        json["device"] = device.into(); // the device the run used, as the line at start says
        let tmp = tmp_path(&dir.join("args.json"));
        std::fs::write(&tmp, serde_json::to_string_pretty(&json)? + "\n")?;
        rename_durably(&tmp, &dir.join("args.json"))?;
        let tb = resume_logs::logs_anew(start, &dir, &kept)?;
        // a second handle on the events file, to fsync it before each checkpoint (the writer owns the first)
        let tb_file = tb.filename().map(std::fs::File::open).transpose()?;
        let (updates_kept, episodes_kept) = kept;
        let append = |name: &str| -> std::io::Result<csv::Writer<std::fs::File>> {
            let file = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(name))?;
            Ok(csv::Writer::from_writer(file))
        };
        let (episodes, updates) = (append("episodes.csv")?, append("updates.csv")?);
        sync_dir(&dir)?; // the files' names (a new run's) on disk
        let return_column = episodes_kept.0.iter().position(|h| h == "charts/episodic_return"); // kept_logs checked it
        let returns = episodes_kept.1.iter().rev().take(20).rev();
        let recent = returns.filter_map(|row| row.get(return_column?)?.parse().ok()).collect();
        Ok(RunLog {
            dir,
            _lock: lock,
            episodes,
            updates,
            rows: updates_kept.1.len(),
            episode_rows: episodes_kept.1.len(),
            process_column: None,
            episodes_header: !episodes_kept.0.is_empty(),
            recent,
            tb,
            tb_file,
            progress: Progress::new(start.iteration, start.num_iterations),
            last_update: Instant::now(),
            start_time: start.start_time,
            checkpoint_interval: args.run().checkpoint_interval,
            checkpoint_seconds: 0.0,
            binary: A::NAME,
            env_id: args.env_id().to_string(),
            num_iterations: start.num_iterations,
            last: (start.iteration, start.global_step, f64::NAN),
            seeds: Vec::new(),
            envs_per_seed: 0,
        })
    }

    /// The episodes that ended at this step: CleanRL's `charts/episodic_return` and `episodic_length`
    /// (with seeds, each in its seed's row and events).
    pub fn episodes(&mut self, global_step: u64, finished: &[envs::FinishedEpisode]) {
        for ep in finished {
            match self.envs_per_seed {
                0 => self.episode_of_rank(0, global_step, ep.r, ep.l),
                n => self.episode_in(Some(ep.env / n), self.seeds[ep.env / n].seed as usize, global_step, ep.r, ep.l),
            }
        }
    }

    /// One episode of process `rank` (in a data-parallel run, one process logs them all).
    pub fn episode_of_rank(&mut self, rank: usize, global_step: u64, r: f64, l: u64) {
        self.episode_in(None, rank, global_step, r, l);
    }

    /// One episode, `process` in the process column (if any), in seed `seed`'s events (with seeds).
    fn episode_in(&mut self, seed: Option<usize>, process: usize, global_step: u64, r: f64, l: u64) {
        self.episodes_header();
        let mut record = vec![global_step.to_string(), r.to_string(), l.to_string()];
        if self.process_column.is_some() {
            record.push(process.to_string());
        }
        // a failed write surfaces at the next update's flush
        let _ = self.episodes.write_record(&record);
        self.episode_rows += 1;
        let tb = match seed {
            Some(k) => &mut self.seeds[k].tb,
            None => &mut self.tb,
        };
        let _ = tb.write_scalar(global_step as i64, "charts/episodic_return", r as f32);
        let _ = tb.write_scalar(global_step as i64, "charts/episodic_length", l as f32);
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
    ///
    /// With seeds ([`RunLog::with_seeds`]) a row per seed: a device value and `loss` hold a value per
    /// seed (`[seeds]`), as [`Logged::OnHostEach`] does, and a host value is every seed's.
    pub fn update(&mut self, row: &[(&str, Logged)], loss: &Tensor, env_seconds: f64, learning: Instant) {
        let n = self.seeds.len().max(1);
        let rate = row.iter().find_map(|(_, v)| if let Logged::Rate(x) = v { Some(*x) } else { None });
        let on_device = row.iter().filter_map(|(_, v)| if let Logged::OnDevice(t) = v { Some(*t) } else { None });
        let mut read = read_host(&on_device.chain([loss]).collect::<Vec<_>>()).into_iter();
        let mut next = || (0..n).map(|_| read.next().unwrap_or(f64::NAN)).collect::<Vec<f64>>();
        let columns: Vec<(&str, Vec<f64>)> = row
            .iter()
            .filter(|(_, v)| !matches!(v, Logged::Off))
            .map(|(name, v)| match v {
                Logged::OnHost(x) | Logged::Rate(x) => (*name, vec![*x; n]),
                Logged::OnHostEach(xs) => (*name, xs.to_vec()),
                _ => (*name, next()),
            })
            .collect();
        let losses = next();
        let (iteration_seconds, now) = (self.last_update.elapsed().as_secs_f64(), Instant::now());
        let learning_seconds = learning.elapsed().as_secs_f64();
        let checkpoint_seconds = std::mem::take(&mut self.checkpoint_seconds);
        let mut rows = Vec::new();
        for k in 0..n {
            let mut row: Vec<(&str, f64)> = columns.iter().map(|(name, values)| (*name, values[k])).collect();
            if let Some(seed) = self.seeds.get(k) {
                let at = row.iter().position(|(n, _)| *n == "global_step").map_or(0, |i| i + 1);
                row.insert(at, ("seed", seed.seed as f64));
            }
            // CleanRL's charts/SPS: steps per second since the run started, after explained_variance
            let global_step = row.iter().find(|(n, _)| *n == "global_step").map_or(0.0, |(_, v)| *v);
            let sps = (global_step / self.start_time.elapsed().as_secs_f64()).floor();
            let at = row.iter().position(|(n, _)| *n == "losses/explained_variance").map_or(row.len(), |i| i + 1);
            row.insert(at, ("charts/SPS", sps));
            row.push(("timing/collection_seconds", iteration_seconds - learning_seconds - checkpoint_seconds));
            row.push(("timing/env_seconds", env_seconds));
            row.push(("timing/learning_seconds", learning_seconds));
            row.push(("timing/checkpoint_seconds", checkpoint_seconds));
            if let Err(e) = self.write(&row, k) {
                self.fail(format!("cannot write the metrics: {e}"));
            }
            self.rows += 1;
            rows.push(row);
        }
        self.last_update = now;
        let row = &rows[0];
        let get = |name: &str| row.iter().find(|(n, _)| *n == name).map_or(f64::NAN, |(_, v)| *v);
        self.last = (get("iteration") as usize, get("global_step") as u64, rate.unwrap_or(f64::NAN));
        let mean = self.recent.iter().sum::<f64>() / self.recent.len() as f64;
        let mean = if self.recent.is_empty() { "none yet".to_string() } else { format!("{mean:.1}") };
        let sps = match n {
            1 => format!("SPS {}", get("charts/SPS")),
            n => format!("SPS {} a seed, {} in all", get("charts/SPS"), get("charts/SPS") * n as f64),
        };
        let updates = self.rows / n;
        signals::stopped_at(|at| at.update = updates);
        self.progress.show(updates, get("iteration"), get("global_step"), format!("{sps}, return (last 20) {mean}"));
        self.seeds_stopped(&rows); // with seeds: a line for a seed stopped for good, once
        let stopped = |k: usize| self.seeds.get(k).is_some_and(|seed| seed.stopped_at > 0);
        if let Some(k) = (0..losses.len()).find(|&k| !losses[k].is_finite() && !stopped(k)) {
            let get = |name: &str| rows[k].iter().find(|(n, _)| *n == name).map_or(f64::NAN, |(_, v)| *v);
            let losses =
                ["losses/policy_loss", "losses/value_loss", "losses/entropy"].map(|c| format!("{c} {}", get(c)));
            let seed = self.seeds.get(k).map_or(String::new(), |s| format!(" of seed {}", s.seed));
            self.fail(format!(
                "the loss{seed} became non-finite at update {} ({})",
                get("iteration"),
                losses.join(", ")
            ));
        }
    }

    /// episodes.csv's header, once: before its first row or at the first update, whichever comes first
    fn episodes_header(&mut self) {
        if !self.episodes_header {
            self.episodes_header = true;
            let process = self.process_column;
            let header = ["global_step", "charts/episodic_return", "charts/episodic_length"].into_iter().chain(process);
            let _ = self.episodes.write_record(header); // a failed write surfaces at the next flush
        }
    }

    /// One row of updates.csv, seed `k`'s with seeds.
    fn write(&mut self, row: &[(&str, f64)], k: usize) -> std::io::Result<()> {
        self.episodes_header();
        if self.rows == 0 {
            self.updates.write_record(row.iter().map(|(name, _)| name))?;
        }
        // a seed as the integer it is (an f64 holds 53 bits: --seed 2^64 - 2 and 2^64 - 1 would print alike)
        let seed = self.seeds.get(k).map(|s| s.seed);
        let cell = |(name, value): &(&str, f64)| match (*name, seed) {
            ("seed", Some(seed)) => seed.to_string(),
            _ => value.to_string(),
        };
        self.updates.write_record(row.iter().map(cell))?;
        let step = row.iter().find(|(name, _)| *name == "global_step").map_or(0, |(_, v)| *v as i64);
        let tb = self.seeds.get_mut(k).map_or(&mut self.tb, |seed| &mut seed.tb);
        for (tag, value) in row.iter().filter(|(name, _)| name.contains('/')) {
            // TensorBoard keeps f32, as CleanRL's SummaryWriter does
            tb.write_scalar(step, tag, *value as f32).map_err(std::io::Error::other)?;
        }
        self.updates.flush()?;
        self.episodes.flush()
    }

    /// Ends the progress bar where it stands, then fails with exit code 1 (metrics so far are kept).
    pub fn fail(&self, msg: String) -> ! {
        self.progress.abandon();
        fail(1, format!("{msg}; the metrics so far are in {}", self.dir.display()))
    }
}

impl Drop for RunLog {
    /// A run that ends with `--track` given (CleanRL's Weights & Biases flag): the command that sends
    /// its TensorBoard events there, since no W&B client runs here.
    fn drop(&mut self) {
        let dir = self.dir.display();
        println!("results: {dir} (`cargo run --release --bin plot -- {dir}` draws them; docs/runs.md)");
        if let Some((project, entity)) = crate::cli::TRACK.get() {
            let entity = entity.as_ref().map_or(String::new(), |e| format!(" -e {e}"));
            let (dir, to) = (self.dir.display(), "sends this run to Weights & Biases");
            println!("--track: `wandb sync --sync-tensorboard -p {project}{entity} {dir}` {to}");
        }
    }
}

/// A new directory `runs/<run_name>` (`-2`, `-3`, ... appended while the name is taken).
fn new_run_dir(run_name: &str) -> std::io::Result<std::path::PathBuf> {
    std::fs::create_dir_all("runs")?;
    for suffix in 1.. {
        let name = if suffix == 1 { run_name.to_string() } else { format!("{run_name}-{suffix}") };
        let dir = std::path::Path::new("runs").join(name);
        // a namespaced id's run (`ALE/Breakout-v5__...`) in its namespace's folder, as CleanRL's SummaryWriter puts it
        std::fs::create_dir_all(dir.parent().unwrap_or(std::path::Path::new("runs")))?;
        match std::fs::create_dir(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            created => return created.map(|()| dir),
        }
    }
    unreachable!("a free name")
}
