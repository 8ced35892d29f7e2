//! The run's progress: a bar on a terminal; otherwise a plain line every 2% of the run, with the time left.

use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;

pub(super) struct Progress {
    bar: Option<ProgressBar>,
    num_iterations: usize,
    /// when this process started, and at which iteration: the time left is estimated from the pace since
    resumed: (Instant, usize),
}

impl Progress {
    /// Progress from `iteration` (0, or where `--resume` starts) of `num_iterations`.
    pub(super) fn new(iteration: usize, num_iterations: usize) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let template = "{elapsed_precise} [{wide_bar}] {pos}/{len} updates, {eta_precise} left, {msg}";
            let style = ProgressStyle::with_template(template).expect("valid template");
            ProgressBar::new(num_iterations as u64).with_style(style).with_position(iteration as u64)
        });
        Progress { bar, num_iterations, resumed: (Instant::now(), iteration) }
    }

    /// The update logged: `updates` of this run so far, at `iteration` and `global_step`, with `msg`.
    pub(super) fn show(&self, updates: usize, iteration: f64, global_step: f64, msg: String) {
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
    pub(super) fn eprintln(&self, line: &str) {
        self.bar.as_ref().map_or_else(|| eprintln!("{line}"), |bar| bar.suspend(|| eprintln!("{line}")));
    }

    /// The bar ends where it stands (the run fails).
    pub(super) fn abandon(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
    }
}
