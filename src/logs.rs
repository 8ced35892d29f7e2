//! The run's logs: the directory `runs/<run-name>/` and what goes in it (CleanRL's SummaryWriter and more):
//! args.json, episodes.csv and updates.csv and their TensorBoard events, the progress bar, the logs of several
//! seeds or processes, when a checkpoint is written ([`RunLog::checkpoint`]), the saved model and eval.csv. What a
//! checkpoint holds is `checkpoint`'s; the logs cut back to it on `--resume`, `resume_logs`'s; the line a signal
//! prints, `signals`'.

use crate::checkpoint::{self, Start};
use crate::cli::{Experiment, Failure};
use crate::device::read_host;
use crate::lock::RunLock;
use crate::optim::FlatAdam;
use crate::resume_logs;
use crate::signals;
use envs::VecEnv;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;
use tch::{nn, Device, Tensor};

/// A logged value: a number on the host, or a scalar tensor on the device (a loss, a KL estimate).
/// [`RunLog::update`] reads all of an update's device values to the host in one copy: on a GPU the
/// update waits for it once, not once per value.
#[derive(Clone, Copy)]
pub enum Logged<'a> {
    OnHost(f64),
    /// the update's learning rate, on the host: the checkpoint keeps it, and a `--resume` goes on from it where a
    /// variant adapts its rate (the one a variant logs as `charts/learning_rate`)
    Rate(f64),
    /// on the device: a scalar, or with seeds ([`RunLog::set_seeds`]) a value per seed, `[seeds]`
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
    /// with seeds ([`RunLog::set_seeds`]): each seed's TensorBoard events, and its envs' count
    seeds: Vec<SeedEvents>,
    envs_per_seed: usize,
}

impl RunLog {
    /// Makes a directory of the run's own: `runs/<run_name>`, or `<run_name>-2`, `-3`, ... when
    /// another run (e.g. one started in the same second) has that name; with `--resume`, opens the
    /// run's directory again. Either way this process takes the run's lock first (one writer per
    /// run: a second is refused as bad input, having changed nothing); other failures are failures while running.
    /// `device` is the device line (recorded in args.json); the run's length is `start`'s.
    pub fn create<A: Experiment>(run_name: &str, args: &A, device: &str, start: &Start) -> Result<RunLog, Failure> {
        let dir = match &args.run().resume {
            Some(dir) => dir.clone(),
            None => {
                new_run_dir(run_name).map_err(|e| Failure::running(format!("cannot create runs/{run_name}: {e}")))?
            }
        };
        if start.checkpoint.is_some() {
            resume_logs::kept_logs(start, &dir)?; // --resume: logs that cannot go on are refused before the lock
        }
        let lock = RunLock::take(&dir, A::NAME, &args.run().exp_name).map_err(Failure::bad_input)?;
        start.check_unchanged(&dir, A::NAME, args.env_id())?; // --resume: the checkpoint read is still the run's
        let log = RunLog::open(dir, lock, args, device, start)?;
        println!("run directory: {}", log.dir.display());
        let checkpoint = (start.iteration > 0).then_some(start.iteration);
        let (binary, dir, every) = (A::NAME, log.dir.clone(), args.run().checkpoint_interval);
        let line = signals::StopLine { binary, dir, update: start.iteration, checkpoint, every, mpi: false };
        signals::stop_with(line);
        Ok(log)
    }

    /// With `--resume` the CSVs are cut back to the checkpoint (what was logged after it goes) and
    /// TensorBoard's events are written anew from them, so that no row is missing or repeated
    /// (`resume_logs::logs_anew`). Refuses logs that do not reach the checkpoint (bad input, nothing changed).
    pub(crate) fn open<A: Experiment>(
        dir: std::path::PathBuf,
        lock: RunLock,
        args: &A,
        device: &str,
        start: &Start,
    ) -> Result<RunLog, Failure> {
        let kept = resume_logs::kept_logs(start, &dir)?;
        let cannot_write = |e: std::io::Error| Failure::running(format!("cannot write {}: {e}", dir.display()));
        RunLog::open_kept(dir.clone(), lock, args, device, start, kept).map_err(cannot_write)
    }

    fn open_kept<A: Experiment>(
        dir: std::path::PathBuf,
        lock: RunLock,
        args: &A,
        device: &str,
        start: &Start,
        kept: (resume_logs::Table, resume_logs::Table),
    ) -> std::io::Result<RunLog> {
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
    /// Flushes, and shows progress. A non-finite `loss` (the last minibatch's) is then a failure, its rows kept.
    /// `env_seconds`: the time the envs took to step since the last update;
    /// `learning`: when the update (the epochs) began.
    ///
    /// With seeds ([`RunLog::set_seeds`]) a row per seed: a device value and `loss` hold a value per
    /// seed (`[seeds]`), as [`Logged::OnHostEach`] does, and a host value is every seed's.
    pub fn update(
        &mut self,
        row: &[(&str, Logged)],
        loss: &Tensor,
        env_seconds: f64,
        learning: Instant,
    ) -> Result<(), Failure> {
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
                return Err(self.failure(format!("cannot write the metrics: {e}")));
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
            return Err(self.failure(format!(
                "the loss{seed} became non-finite at update {} ({})",
                get("iteration"),
                losses.join(", ")
            )));
        }
        Ok(())
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

    /// A failure while running, `msg` and where the metrics so far are kept; the progress bar ends where it stands.
    pub fn failure(&self, msg: String) -> Failure {
        self.progress.abandon();
        Failure::running(format!("{msg}; the metrics so far are in {}", self.dir.display()))
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

// The run's progress: a bar on a terminal; otherwise a plain line every 2% of the run, with the time left.

struct Progress {
    bar: Option<ProgressBar>,
    num_iterations: usize,
    /// when this process started, and at which iteration: the time left is estimated from the pace since
    resumed: (Instant, usize),
}

impl Progress {
    /// Progress from `iteration` (0, or where `--resume` starts) of `num_iterations`.
    fn new(iteration: usize, num_iterations: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let template = "{elapsed_precise} [{wide_bar}] {pos}/{len} updates, {eta_precise} left, {msg}";
            let style = ProgressStyle::with_template(template).expect("valid template");
            ProgressBar::new(num_iterations as u64).with_style(style).with_position(iteration as u64)
        });
        Progress { bar, num_iterations, resumed: (Instant::now(), iteration) }
    }

    /// The update logged: `updates` of this run so far, at `iteration` and `global_step`, with `msg`.
    fn show(&self, updates: usize, iteration: f64, global_step: f64, msg: String) {
        let iterations = self.num_iterations;
        match &self.bar {
            Some(bar) => {
                bar.set_position(iteration as u64);
                bar.set_message(msg);
            }
            None if updates.is_multiple_of(iterations.div_ceil(50)) || updates == iterations => {
                // the time left at this process's pace so far
                let (since, first) = self.resumed;
                let pace = since.elapsed().as_secs_f64() / (iteration - first as f64);
                let left = (pace * (iterations as f64 - iteration)) as u64;
                let eta = format!("{:02}:{:02}:{:02}", left / 3600, left / 60 % 60, left % 60);
                println!("update {updates}/{iterations}, global_step {global_step}, {eta} left, {msg}");
            }
            None => {}
        }
    }

    /// A line on stderr, above the bar if there is one.
    fn eprintln(&self, line: &str) {
        self.bar.as_ref().map_or_else(|| eprintln!("{line}"), |bar| bar.suspend(|| eprintln!("{line}")));
    }

    /// The bar ends where it stands (the run fails).
    fn abandon(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
    }
}

// Several seeds in one log: a row per seed in updates.csv, the column `seed` in both CSVs, each seed's TensorBoard
// events in `seed_<seed>/`, and a seed stopped for good (non-finite) said once and at the end.

impl RunLog {
    /// A log of several seeds trained in one process, `envs_per_seed` envs each (seed k's are envs
    /// `k * envs_per_seed ..`): updates.csv has a row per seed per update and episodes.csv a fourth
    /// column, both with the column `seed`; each seed's TensorBoard events are in `seed_<seed>/` (with
    /// `--resume`, written anew from the CSVs), so that TensorBoard shows each seed as a run.
    pub fn set_seeds(&mut self, seeds: &[u64], envs_per_seed: usize) -> Result<(), Failure> {
        self.process_column = Some("seed");
        self.envs_per_seed = envs_per_seed;
        let events = seeds.iter().map(|&seed| SeedEvents::open(&self.dir, seed)).collect::<std::io::Result<_>>();
        self.seeds = events.map_err(|e| Failure::running(format!("cannot write {}: {e}", self.dir.display())))?;
        Ok(())
    }

    /// A line on stderr for each seed that this update's rows (`debug/nonfinite_at_update`) say stopped for good,
    /// once.
    fn seeds_stopped(&mut self, rows: &[Vec<(&str, f64)>]) {
        for (seed, row) in self.seeds.iter_mut().zip(rows) {
            let at = row.iter().find(|(n, _)| *n == "debug/nonfinite_at_update").map_or(0.0, |(_, v)| *v) as usize;
            if at > 0 && seed.stopped_at == 0 {
                seed.stopped_at = at;
                let get = |name: &str| row.iter().find(|(n, _)| *n == name).map_or(f64::NAN, |(_, v)| *v);
                let losses =
                    ["policy_loss", "value_loss", "entropy"].map(|c| format!("{c} {}", get(&format!("losses/{c}"))));
                let line = format!(
                    "seed {} stopped at update {at}: its loss or gradient became non-finite ({}); its weights and \
                     Adam state stay those of its last finite step, the other seeds go on",
                    seed.seed,
                    losses.join(", ")
                );
                self.progress.eprintln(&line);
            }
        }
    }

    /// The end of a run of seeds: a failure when a seed stopped for good (non-finite), once the others
    /// finished and were saved (the run directory's line first, as at any end).
    pub fn end(self) -> Result<(), Failure> {
        let stopped: Vec<String> = (self.seeds.iter().filter(|seed| seed.stopped_at > 0))
            .map(|seed| format!("{} (at update {})", seed.seed, seed.stopped_at))
            .collect();
        let (dir, self_seeds) = (self.dir.display().to_string(), self.seeds.len());
        drop(self);
        let all = stopped.len() == self_seeds;
        if !stopped.is_empty() {
            let seeds = stopped.join(", ");
            let others =
                if all { "no seed was left, so the run ended there" } else { "the other seeds ran to the end" };
            return Err(Failure::running(format!("seeds stopped non-finite: {seeds}; {others}; all are in {dir}")));
        }
        Ok(())
    }
}

/// A seed's TensorBoard events, in `seed_<seed>/` of the run directory.
struct SeedEvents {
    seed: u64,
    tb: tboard::EventWriter<std::fs::File>,
    /// the events file again, for its fsync
    file: Option<std::fs::File>,
    /// the update at which the seed was stopped for good (non-finite), 0 while it steps
    stopped_at: usize,
}

impl SeedEvents {
    /// The events of seed `seed` written anew from the run's CSVs (its rows: a new run has none).
    fn open(dir: &std::path::Path, seed: u64) -> std::io::Result<SeedEvents> {
        let seed_dir = dir.join(format!("seed_{seed}"));
        std::fs::create_dir_all(&seed_dir)?;
        let tb = resume_logs::events_anew(&seed_dir, dir, Some(seed))?;
        let file = tb.filename().map(std::fs::File::open).transpose()?;
        Ok(SeedEvents { seed, tb, file, stopped_at: 0 })
    }
}

// The episodes of several processes in one log (a data-parallel run's ranks, a learner's workers): episodes.csv gets a
// fourth column naming each episode's process, and a stop's line says the job runs under `mpirun`.

impl RunLog {
    /// A log of the episodes of `ranks` processes (a data-parallel run): episodes.csv gets a fourth
    /// column, each episode's rank (none for one rank: the file of one process).
    pub fn with_ranks(self, ranks: usize) -> RunLog {
        self.with_process_column((ranks > 1).then_some("rank"))
    }

    /// A learner's log of its rollout workers' episodes: episodes.csv gets a fourth column, `worker`,
    /// each episode's worker (its rank, 1 to N; 0 where one process is learner and worker).
    pub fn with_workers(self) -> RunLog {
        self.with_process_column(Some("worker"))
    }

    fn with_process_column(mut self, column: Option<&'static str>) -> RunLog {
        signals::stopped_at(|at| at.mpi = true);
        self.process_column = column;
        self
    }
}

// When a checkpoint is written, and what the logs vouch for on disk before it.

impl RunLog {
    /// Every `--checkpoint-interval` updates and after the last: the weights, Adam's state, the
    /// running statistics and the counters in `checkpoint.safetensors` (`checkpoint::write`), so that
    /// a crash while writing leaves the previous one. The counters are those of
    /// the update logged last; `stats` are the running statistics of the variant's normalization
    /// wrappers (none: `&[]`).
    pub fn checkpoint(&mut self, optimizer: &FlatAdam, stats: &[envs::SharedRms]) -> Result<(), Failure> {
        let (iteration, every) = (self.last.0, self.checkpoint_interval);
        if every == 0 || !(iteration.is_multiple_of(every) || iteration == self.num_iterations) {
            return Ok(());
        }
        let write_start = Instant::now();
        // what the checkpoint vouches for reaches the disk before it: the rows and events up to its iteration
        let seeds = self.seeds.iter().filter_map(|seed| seed.file.as_ref());
        let synced = [self.updates.get_ref(), self.episodes.get_ref()].into_iter().chain(&self.tb_file).chain(seeds);
        if let Err(e) = synced.map(std::fs::File::sync_data).collect::<std::io::Result<Vec<()>>>() {
            return Err(self.failure(format!("cannot write the metrics to disk: {e}")));
        }
        let (binary, env_id, last, start_time) = (self.binary, &self.env_id[..], self.last, self.start_time);
        let progress =
            checkpoint::Progress { binary, env_id, last, start_time, logged: (self.rows, self.episode_rows) };
        if let Err(e) = checkpoint::write(&self.dir, progress, optimizer, stats) {
            return Err(self.failure(e));
        }
        signals::stopped_at(|at| at.checkpoint = Some(iteration));
        self.checkpoint_seconds = write_start.elapsed().as_secs_f64();
        Ok(())
    }
}

// The end of a run with `--save-model`: the saved weights, and eval.csv with the evaluation's episodes (CleanRL's
// `cleanrl_utils/evals/ppo_eval.py`), played by [`play`].

impl RunLog {
    /// Saves the weights as `<name>.safetensors` in the run directory: written to a temporary
    /// file, then renamed, so a crash never leaves a half-written model.
    /// With seeds, each seed's weights alone too, `<name>_seed<seed>.safetensors` (the seeds' first
    /// dimension taken away: the file of a one-seed network).
    pub fn save(&self, vs: &nn::VarStore, name: &str) -> Result<std::path::PathBuf, Failure> {
        let path = self.dir.join(format!("{name}.safetensors"));
        let tmp = tmp_path(&path);
        let saved = vs.save(&tmp).and_then(|()| Ok(rename_durably(&tmp, &path)?));
        saved.map_err(|e| Failure::running(format!("cannot save {}: {e}", path.display())))?;
        for (k, seed) in self.seeds.iter().enumerate() {
            let path = self.dir.join(format!("{name}_seed{}.safetensors", seed.seed));
            let (tmp, vars) = (tmp_path(&path), vs.variables());
            let named: Vec<(&String, Tensor)> =
                vars.iter().map(|(n, t)| (n, t.get(k as i64).to_device(Device::Cpu))).collect();
            let saved = Tensor::write_safetensors(&named, &tmp).map_err(std::io::Error::other);
            let saved = saved.and_then(|()| rename_durably(&tmp, &path));
            saved.map_err(|e| Failure::running(format!("cannot save {}: {e}", path.display())))?;
        }
        println!("model saved to {}", path.display());
        Ok(path)
    }

    /// Writes eval.csv (one row per episode, CleanRL's tag) and the same to TensorBoard (CleanRL's
    /// `writer.add_scalar("eval/episodic_return", episodic_return, idx)`), and prints the mean.
    pub fn eval(&mut self, returns: &[f64]) -> Result<(), Failure> {
        self.eval_each(&[returns.to_vec()])
    }

    /// [`RunLog::eval`] of each seed (with seeds, [`RunLog::set_seeds`]): `returns[k]`, seed k's, in eval.csv with
    /// a column `seed` and in seed k's events.
    pub fn eval_each(&mut self, returns: &[Vec<f64>]) -> Result<(), Failure> {
        let seeds: Vec<Option<u64>> = match &self.seeds[..] {
            [] => vec![None],
            seeds => seeds.iter().map(|seed| Some(seed.seed)).collect(),
        };
        let write = || -> std::io::Result<()> {
            let (path, tmp) = (self.dir.join("eval.csv"), tmp_path(&self.dir.join("eval.csv")));
            let mut w = csv::Writer::from_path(&tmp)?;
            let seed_column = (!self.seeds.is_empty()).then_some("seed");
            w.write_record(["episode", "eval/episodic_return"].into_iter().chain(seed_column))?;
            for (seed, returns) in seeds.iter().zip(returns) {
                for (i, r) in returns.iter().enumerate() {
                    w.write_record([i.to_string(), r.to_string()].into_iter().chain(seed.map(|s| s.to_string())))?;
                }
            }
            w.flush()?;
            drop(w);
            rename_durably(&tmp, &path)
        };
        write().map_err(|e| Failure::running(format!("cannot write eval.csv: {e}")))?;
        for (k, returns) in returns.iter().enumerate() {
            let tb = self.seeds.get_mut(k).map_or(&mut self.tb, |seed| &mut seed.tb);
            for (i, r) in returns.iter().enumerate() {
                let written = tb.write_scalar(i as i64, "eval/episodic_return", *r as f32);
                written.map_err(|e| Failure::running(format!("cannot write TensorBoard's events: {e}")))?;
            }
        }
        let all: Vec<f64> = returns.concat();
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        match seeds.len() {
            1 if self.seeds.is_empty() => println!("eval: mean episodic return {mean:.1} over {} episodes", all.len()),
            n => println!("eval: mean episodic return {mean:.1} over {} episodes of {n} seeds", all.len()),
        }
        Ok(())
    }
}

/// After CleanRL's evaluation loop for `--save-model` (`cleanrl_utils/evals/ppo_eval.py`): 10 episodes of `env`,
/// seeded here from `seed` (CleanRL's resets unseeded), `act` choosing and taking every action; their returns, for
/// eval.csv.
pub fn play<O>(env: Box<dyn envs::Env<Obs = O>>, seed: u64, mut act: impl FnMut(&mut VecEnv<O>)) -> Vec<f64>
where
    O: Copy + Default + Send + Sync + 'static,
{
    let mut env = VecEnv::new(vec![env]);
    env.reset(Some(seed));
    let mut returns = Vec::new();
    while returns.len() < 10 {
        act(&mut env);
        returns.extend(env.finished.iter().map(|ep| ep.r));
    }
    returns
}

// Durable writes: a file written to a temporary name of this process's, then renamed into place, its data and the
// directory's entry on disk before the write counts as done (checkpoints, the CSVs cut back on `--resume`, args.json,
// the saved model).

/// The temporary file that `path` is written to before a rename puts it in place: unique to this
/// process (`checkpoint.tmp.<pid>.safetensors`), so that no two processes ever write one file.
pub(crate) fn tmp_path(path: &std::path::Path) -> std::path::PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("file");
    let ext = path.extension().and_then(|s| s.to_str()).map_or(String::new(), |e| format!(".{e}"));
    path.with_file_name(format!("{stem}.tmp.{}{ext}", std::process::id()))
}

/// Puts `tmp` (a [`tmp_path`], written and closed) in place as `path` so that a crash, a kill or a
/// power loss leaves either the old file or the new one whole, on disk: `tmp`'s data reach the disk
/// (fsync), the rename, then the directory's entry (fsync of the directory).
pub(crate) fn rename_durably(tmp: &std::path::Path, path: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(tmp)?.sync_all()?;
    std::fs::rename(tmp, path)?;
    sync_dir(path.parent().unwrap_or(std::path::Path::new(".")))
}

/// fsync of a directory: its entries (a file made or renamed in it) reach the disk.
pub(crate) fn sync_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::File::open(if dir.as_os_str().is_empty() { std::path::Path::new(".") } else { dir })?.sync_all()
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
        let start = Start::new(&args, 7, &mut make().2, &[]).expect("a new run");
        let lock = RunLock::take(dir.path(), "ppo", "ppo").expect("lock");
        let mut log = RunLog::open(dir.path().to_path_buf(), lock, &args, "cpu", &start).expect("run log");
        let row = [("iteration", Logged::OnHost(7.0)), ("global_step", Logged::OnHost(700.0))];
        let row = [&row[..], &[("charts/learning_rate", Logged::Rate(1e-3))]].concat();
        log.update(&row, &Tensor::from(0f32), 0.0, Instant::now()).expect("logged");
        log.checkpoint(&saved, &[envs::SharedRms::new(rms.clone())]).expect("written");

        let args = Args { run: RunArgs { resume: Some(dir.path().to_path_buf()), ..run_args() }, ..args };
        let (_vs, _layer, mut restored) = make();
        let restored_rms = envs::SharedRms::new(envs::RunningMeanStd::new(2));
        let start = Start::new(&args, 8, &mut restored, std::slice::from_ref(&restored_rms)).expect("resumed");
        assert_eq!((start.iteration, start.global_step, start.learning_rate), (7, 700, Some(1e-3)));
        let bits = |t: &Tensor| crate::device::to_host(t).iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (a, b) in [(&saved.flat, &restored.flat), (&saved.m, &restored.m), (&saved.v, &restored.v)] {
            assert_eq!(bits(a), bits(b));
        }
        assert_eq!(saved.t, restored.t);
        assert_eq!(*restored_rms.lock(), rms);
    }
}
