//! How a process ends on bad input or a failure: one line on stderr and an exit code (2 for bad input, 1 for
//! failures while running), never a panic trace.

use std::sync::atomic::{AtomicBool, Ordering};

static SAYS_BAD_INPUT: AtomicBool = AtomicBool::new(true);

/// Whether this process prints the line of [`fail`] for bad input: processes that all find the same
/// bad input (the ranks of one `mpirun`) let one of them say it.
pub fn says_bad_input(says: bool) {
    SAYS_BAD_INPUT.store(says, Ordering::Relaxed);
}

/// Prints one line and exits: 2 for bad input, 1 for failures while running.
pub fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    if code != 2 || SAYS_BAD_INPUT.load(Ordering::Relaxed) {
        // one write of the whole line: the ranks of an MPI job share a stderr, and their lines stay whole
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("error: {msg}\n").as_bytes());
    }
    std::process::exit(code)
}
