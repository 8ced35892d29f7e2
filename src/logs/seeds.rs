//! Several seeds in one log: a row per seed in updates.csv, the column `seed` in both CSVs, each seed's
//! TensorBoard events in `seed_<seed>/`, and a seed stopped for good (non-finite) said once and at the end.

use super::RunLog;
use crate::exit::fail;
use crate::resume_logs;

impl RunLog {
    /// A log of several seeds trained in one process, `envs_per_seed` envs each (seed k's are envs
    /// `k * envs_per_seed ..`): updates.csv has a row per seed per update and episodes.csv a fourth
    /// column, both with the column `seed`; each seed's TensorBoard events are in `seed_<seed>/` (with
    /// `--resume`, written anew from the CSVs), so that TensorBoard shows each seed as a run.
    pub fn with_seeds(mut self, seeds: &[u64], envs_per_seed: usize) -> RunLog {
        self.process_column = Some("seed");
        self.envs_per_seed = envs_per_seed;
        let events = seeds.iter().map(|&seed| SeedEvents::open(&self.dir, seed)).collect::<std::io::Result<_>>();
        self.seeds = events.unwrap_or_else(|e| fail(1, format!("cannot write {}: {e}", self.dir.display())));
        self
    }

    /// A line on stderr for each seed that this update's rows (`debug/nonfinite_at_update`) say stopped for good,
    /// once.
    pub(super) fn seeds_stopped(&mut self, rows: &[Vec<(&str, f64)>]) {
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

    /// The end of a run of seeds: exit code 1 when a seed stopped for good (non-finite), once the others
    /// finished and were saved (the run directory's line first, as at any end).
    pub fn end(self) {
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
            fail(1, format!("seeds stopped non-finite: {seeds}; {others}; all are in {dir}"));
        }
    }
}

/// A seed's TensorBoard events, in `seed_<seed>/` of the run directory.
pub(super) struct SeedEvents {
    pub(super) seed: u64,
    pub(super) tb: tboard::EventWriter<std::fs::File>,
    /// the events file again, for its fsync
    pub(super) file: Option<std::fs::File>,
    /// the update at which the seed was stopped for good (non-finite), 0 while it steps
    pub(super) stopped_at: usize,
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
