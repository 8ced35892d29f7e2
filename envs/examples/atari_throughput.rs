//! Env-only throughput of CleanRL's Atari stack: `cargo run --release -p envs --example
//! atari_throughput -- [env-id] [num-envs] [steps] [threads,...]`; prints agent steps per second
//! on each number of threads, 1 and 2 by default (each agent step is 4 emulator frames plus
//! preprocessing).

use envs::atari::{
    AtariEnv, ClipReward, EpisodicLife, FireReset, FrameStack, GrayScale, MaxAndSkip, NoopReset, ResizeObservation,
};
use envs::{Action, Env, RecordEpisodeStatistics, VecEnv};
use std::time::Instant;

fn make(env_id: &str) -> Box<dyn Env<Obs = u8>> {
    let env = AtariEnv::new(env_id).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let has_fire = env.has_fire();
    let env = MaxAndSkip::new(NoopReset::new(RecordEpisodeStatistics::new(env), 30), 4);
    let env = EpisodicLife::new(env);
    let env = FireReset::new(env, has_fire);
    Box::new(FrameStack::new(GrayScale::new(ResizeObservation::new(ClipReward::new(env), 84, 84)), 4))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let env_id = args.get(1).map_or("BreakoutNoFrameskip-v4", String::as_str);
    let num_envs: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(8);
    let steps: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let threads_list = args.get(4).map_or("1,2", String::as_str).split(',').filter_map(|t| t.parse().ok());
    for threads in threads_list {
        let mut envs = VecEnv::new((0..num_envs).map(|_| make(env_id)).collect()).with_threads(threads);
        envs.reset(Some(1));
        let actions: Vec<i64> = (0..num_envs as i64).map(|i| i % 4).collect();
        let start = Instant::now();
        for _ in 0..steps / num_envs {
            envs.step(Action::Discrete(&actions));
        }
        let sps = (steps / num_envs * num_envs) as f64 / start.elapsed().as_secs_f64();
        println!("{env_id}: {num_envs} envs, {threads} thread(s): {sps:.0} agent steps/s ({:.0} frames/s)", sps * 4.0);
    }
}
