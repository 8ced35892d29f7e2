//! Ctrl-C and SIGTERM: the run ends at once with one line saying where it stopped and how to resume it. The run's
//! log sets the line ([`stop_with`]) and keeps it current ([`stopped_at`]); nothing else here knows the log.

use std::io::IsTerminal;

/// Where a run stands, for the line a signal's end prints: set when the run directory opens, kept
/// current by every update and checkpoint.
static STOPPED_AT: std::sync::Mutex<Option<StopLine>> = std::sync::Mutex::new(None);

pub(crate) struct StopLine {
    pub(crate) binary: &'static str,
    pub(crate) dir: std::path::PathBuf,
    /// updates done (this process's and those before a resume)
    pub(crate) update: usize,
    /// the iteration of the run's last checkpoint, if any
    pub(crate) checkpoint: Option<usize>,
    pub(crate) every: usize,
    /// an MPI job: resumed under mpirun with the same -np
    pub(crate) mpi: bool,
}

/// From now on a signal ends the run with `line` (kept current by [`stopped_at`]).
pub(crate) fn stop_with(line: StopLine) {
    *STOPPED_AT.lock().unwrap_or_else(|e| e.into_inner()) = Some(line);
    stop_on_signals();
}

/// Brings the line a signal would print up to date.
pub(crate) fn stopped_at(change: impl FnOnce(&mut StopLine)) {
    if let Some(at) = STOPPED_AT.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        change(at);
    }
}

impl StopLine {
    /// `stopped at update 26: `cargo run --release --bin X -- --resume runs/Y` continues from iteration 20`
    fn say(&self, signal: &str) -> String {
        let (dir, update) = (self.dir.display(), self.update);
        let resume = match self.mpi {
            false => format!("`cargo run --release --bin {} -- --resume {dir}`", self.binary),
            true => format!("`mpirun -np <as before> target/release/{} --resume {dir}`", self.binary),
        };
        match self.checkpoint {
            Some(iteration) => {
                format!("{signal}: stopped after update {update}; {resume} continues from iteration {iteration}")
            }
            None if self.every == 0 => format!(
                "{signal}: stopped after update {update}, with no checkpoint (--checkpoint-interval 0): nothing to \
                 resume; the metrics so far are in {dir}"
            ),
            None => format!(
                "{signal}: stopped after update {update}, before the first checkpoint (update {}): nothing to resume; \
                 the metrics so far are in {dir}",
                self.every
            ),
        }
    }
}

/// On SIGINT (Ctrl-C) or SIGTERM the run ends at once with one line on stderr saying where it stopped
/// and the command that resumes it (exit code 128 + the signal's number, as a shell reports it). Rows
/// and checkpoints are whole when written (flushed per update, checkpoints renamed into place), and
/// `--resume` goes on from the last checkpoint.
fn stop_on_signals() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) else { return };
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let name = if signal == SIGINT { "SIGINT" } else { "SIGTERM" };
                let line = STOPPED_AT.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|at| at.say(name));
                let newline = if std::io::stderr().is_terminal() { "\n" } else { "" }; // after the progress bar
                eprintln!("{newline}{}", line.unwrap_or_else(|| format!("{name}: stopped")));
                extern "C" {
                    fn _exit(status: i32) -> !;
                }
                // SAFETY: ends the process at once, as the signal would have: no exit handlers or static
                // destructors run under the main thread's feet (libtorch's segfault there); the rows are
                // flushed per update and stdout per line, so nothing waits in a buffer
                unsafe { _exit(128 + signal) }
            }
        });
    });
}
