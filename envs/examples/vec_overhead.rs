//! The per-step cost of stepping envs on threads, apart from the envs' own work: a `VecEnv` of 8
//! trivial envs (a few arithmetic operations a step) on 1, 2, 8 and 16 threads, the median over
//! rounds of the mean time of one `VecEnv::step`. Each line is one thread count; run it on an
//! otherwise idle machine (a benchmark, not a test).
//!
//!     cargo run --release -p envs --example vec_overhead [-- steps-per-round]

use envs::{Action, Env, Space, Step, VecEnv};
use std::time::Instant;

/// An env that does almost nothing, so that a step's time is the hand-off between threads.
struct Trivial(f32);

impl Env for Trivial {
    type Obs = f32;
    fn observation_space(&self) -> Space {
        Space::bounded_box(vec![-1.0; 4], vec![1.0; 4])
    }
    fn action_space(&self) -> Space {
        Space::Discrete(2)
    }
    fn reset(&mut self, _seed: Option<u64>, obs: &mut [f32]) {
        obs.fill(self.0);
    }
    fn step(&mut self, action: Action, obs: &mut [f32]) -> Step {
        self.0 = (self.0 * 0.5 + action.discrete() as f32).fract();
        obs.fill(self.0);
        Step { reward: 1.0, terminated: false, truncated: false, episode: None }
    }
}

fn main() {
    let steps: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let actions = vec![1i64; 8];
    println!("threads  us/step (median of 5 rounds of {steps} steps; 8 trivial envs)");
    for threads in [1, 2, 8, 16] {
        let envs: Vec<Box<dyn Env<Obs = f32>>> = (0..8).map(|i| Box::new(Trivial(i as f32)) as _).collect();
        let mut vec_env = VecEnv::new(envs).with_threads(threads);
        vec_env.reset(Some(1));
        let mut rounds: Vec<f64> = (0..5)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..steps {
                    vec_env.step(Action::Discrete(&actions));
                }
                t.elapsed().as_secs_f64() / steps as f64 * 1e6
            })
            .collect();
        rounds.sort_by(f64::total_cmp);
        // with_threads clamps to one thread per env: 16 asks for 16, gets 8
        println!("{threads:>7}  {:.1}", rounds[2]);
    }
}
