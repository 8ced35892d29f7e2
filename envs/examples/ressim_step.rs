//! Time of one ressim control step (pressure + 5 implicit saturation substeps, plus decoding
//! the action and the observation) on the finest grid of each configuration, median over
//! repeated episodes; the Python reference takes 43.2 ms (61x61) and 215.5 ms (128x128) on this
//! kind of machine (golden README). The one-off factorization per (level, field) is timed apart.
//!
//!     cargo run --release -p envs --example ressim_step [-- repetitions]

use envs::ressim;
use std::time::Instant;

fn main() {
    let reps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20);
    for id in ressim::IDS {
        let shared = ressim::shared(id).unwrap_or_else(|e| panic!("{e}"));
        for level in 0..shared.levels.len() {
            let mut env = ressim::ResSim::new(shared.clone(), level);
            let n_act = shared.injectors.len() + shared.producers.len();
            let mut rng = ressim::perm::Mt19937::new(20240611);
            let actions: Vec<Vec<f64>> =
                (0..5).map(|_| (0..n_act).map(|_| rng.uniform(0.001, 1.0)).collect()).collect();
            env.reset_to_field(0);
            let t = Instant::now();
            env.step_f64(&actions[0]); // includes the factorization of field 0
            let first = t.elapsed().as_secs_f64();
            let mut times = Vec::new();
            for _ in 0..reps {
                env.reset_to_field(0);
                for a in &actions {
                    let t = Instant::now();
                    env.step_f64(a);
                    times.push(t.elapsed().as_secs_f64());
                }
            }
            times.sort_by(f64::total_cmp);
            let g = env.grid();
            println!(
                "{id} {}x{}: control step median {:.3} ms (min {:.3}); first step with factorization {:.1} ms",
                g.nx,
                g.ny,
                times[times.len() / 2] * 1e3,
                times[0] * 1e3,
                first * 1e3
            );
        }
    }
}
