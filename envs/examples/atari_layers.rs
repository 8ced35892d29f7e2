//! Where one Atari agent step's time goes in CleanRL's stack, layer by layer: one env on one
//! thread, each layer timed with those below it, microseconds per agent step (4 emulator frames):
//! the emulator alone, + MaxAndSkip (the last two screens fetched and maxed) with NoopReset and
//! the episode statistics, + EpisodicLife, FireReset and ClipReward (a lost life costs a reset's
//! steps), + ResizeObservation (INTER_AREA on RGB), + GrayScale, + FrameStack (the whole stack).
//! `scripts/peers/atari_layers.py` times the same layers in ale-py and gymnasium with
//! Stable-Baselines3's wrappers, as CleanRL runs them.
//!
//!     cargo run --release -p envs --example atari_layers [-- env-id agent-steps]

use envs::atari::{
    AtariEnv, ClipReward, EpisodicLife, FireReset, FrameStack, GrayScale, MaxAndSkip, NoopReset, ResizeObservation,
};
use envs::{Action, Env, RecordEpisodeStatistics};
use std::time::Instant;

/// The emulator alone: 4 frames an agent step, no screen fetched.
struct Frames4(AtariEnv);

impl Env for Frames4 {
    type Obs = u8;
    fn observation_space(&self) -> envs::Space {
        self.0.observation_space()
    }
    fn action_space(&self) -> envs::Space {
        self.0.action_space()
    }
    fn reset(&mut self, seed: Option<u64>, _obs: &mut [u8]) {
        self.0.reset(seed, &mut [])
    }
    fn step(&mut self, action: Action, _obs: &mut [u8]) -> envs::Step {
        let mut step = self.0.step(action, &mut []);
        for _ in 1..4 {
            if step.terminated || step.truncated {
                break;
            }
            step = self.0.step(action, &mut []);
        }
        step
    }
}

/// Microseconds per agent step of `env`, over `steps` steps with actions cycling through 0..4,
/// resetting where an episode ends (the median of 3 rounds).
fn time(mut env: Box<dyn Env<Obs = u8>>, steps: usize) -> f64 {
    let mut obs = vec![0u8; env.observation_space().flat_dim()];
    env.reset(Some(1), &mut obs);
    let n = env.action_space().mask_dim() as i64;
    let mut rounds: Vec<f64> = (0..3)
        .map(|_| {
            let start = Instant::now();
            for i in 0..steps {
                let step = env.step(Action::Discrete(&[i as i64 % n]), &mut obs);
                if step.terminated || step.truncated {
                    env.reset(None, &mut obs);
                }
            }
            start.elapsed().as_secs_f64() / steps as f64 * 1e6
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[1]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let env_id = args.get(1).map_or("BreakoutNoFrameskip-v4", String::as_str);
    let steps: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5000);
    let ale = || {
        AtariEnv::new(env_id).unwrap_or_else(|e| {
            eprintln!("error: {e}");
            std::process::exit(2)
        })
    };
    let skip = || MaxAndSkip::new(NoopReset::new(RecordEpisodeStatistics::new(ale()), 30), 4);
    let lives = || {
        let env = EpisodicLife::new(skip());
        let env = FireReset::new(env, ale().has_fire());
        ClipReward::new(env)
    };
    let resized = || ResizeObservation::new(lives(), 84, 84);
    type Make<'a> = Box<dyn Fn() -> Box<dyn Env<Obs = u8>> + 'a>;
    let layers: [(&str, Make); 6] = [
        ("emulator (4 frames)", Box::new(|| Box::new(Frames4(ale())))),
        ("+ MaxAndSkip, 2 screens", Box::new(|| Box::new(skip()))),
        ("+ EpisodicLife, FireReset", Box::new(|| Box::new(lives()))),
        ("+ ResizeObservation", Box::new(|| Box::new(resized()))),
        ("+ GrayScale", Box::new(|| Box::new(GrayScale::new(resized())))),
        ("+ FrameStack (all)", Box::new(|| Box::new(FrameStack::new(GrayScale::new(resized()), 4)))),
    ];
    println!("{env_id}, one env, one thread, us per agent step (median of 3 rounds of {steps}):");
    let mut below = 0.0;
    for (name, make) in &layers {
        let us = time(make(), steps);
        println!("{name:<26} {us:>8.1}  (+{:.1})", us - below);
        below = us;
    }
}
