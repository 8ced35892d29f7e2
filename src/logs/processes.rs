//! The episodes of several processes in one log (a data-parallel run's ranks, a learner's workers): episodes.csv
//! gets a fourth column naming each episode's process, and a stop's line says the job runs under `mpirun`.

use super::RunLog;
use crate::signals;

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
