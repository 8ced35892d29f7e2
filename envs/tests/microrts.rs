//! MicroRTS through the real engine (gym-microrts 0.2.0's jar, scripts/setup): the encoder and the mask on a start
//! worked by hand, full episodes of each id, determinism against PassiveAI, the engine's calls serialized.

use envs::microrts::{Microrts, IDS};
use envs::{Action, Env, Space, VecEnv};

const NVEC: [usize; 8] = [100, 6, 4, 4, 4, 4, 7, 100];

/// The one-hot groups of a cell: (hp, resources, owner + 1, type + 1, action).
fn decode(cell: &[f32]) -> [usize; 5] {
    let mut out = [0; 5];
    let mut offset = 0;
    for (i, n) in [5, 5, 3, 8, 6].iter().enumerate() {
        let group = &cell[offset..offset + n];
        assert_eq!(group.iter().filter(|&&v| v == 1.0).count(), 1, "one-hot group {i}: {group:?}");
        assert!(group.iter().all(|&v| v == 0.0 || v == 1.0));
        out[i] = group.iter().position(|&v| v == 1.0).expect("one set");
        offset += n;
    }
    out
}

fn mask_of(env: &dyn Env<Obs = f32>) -> Vec<bool> {
    env.action_mask().expect("MicroRTS has masks").to_vec()
}

/// A random valid action for `mask`, from the linear congruential generator `rng`.
fn random_valid_action(mask: &[bool], rng: &mut u64) -> Vec<i64> {
    let mut offset = 0;
    NVEC.iter()
        .map(|&n| {
            let valid: Vec<usize> = (0..n).filter(|&k| mask[offset + k]).collect();
            *rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            offset += n;
            if valid.is_empty() {
                0
            } else {
                valid[(*rng >> 33) as usize % valid.len()] as i64
            }
        })
        .collect()
}

/// basesWorkers10x10 at the start: each player a base (type 2 = Base + 1) and a worker
/// (type 4 = Worker + 1), resources (type 1) with resource counts; owners 1 (us) and 2.
#[test]
fn the_start_of_bases_workers_encoded_and_masked() {
    let mut env = Microrts::new("MicrortsMining-v1").expect("MicroRTS (run scripts/setup)");
    assert_eq!(env.action_space(), Space::MultiDiscrete(NVEC.to_vec()));
    assert!(matches!(env.observation_space(), Space::Box { shape, .. } if shape == [10, 10, 27]));
    let mut obs = vec![0f32; 2700];
    env.reset(None, &mut obs);
    let cells: Vec<[usize; 5]> = obs.chunks(27).map(decode).collect();
    let of = |kind: usize, owner: usize| {
        (0..100).filter(|&c| cells[c][3] == kind && cells[c][2] == owner).collect::<Vec<_>>()
    };
    let (our_base, our_worker, their_base, their_worker) = (of(2, 1), of(4, 1), of(2, 2), of(4, 2));
    assert_eq!((our_base.len(), our_worker.len(), their_base.len(), their_worker.len()), (1, 1, 1, 1), "{cells:?}");
    let resources = of(1, 0);
    assert!(!resources.is_empty() && resources.iter().all(|&c| cells[c][1] > 0), "resources carry a count");
    assert!(cells.iter().all(|c| c[4] == 0), "nobody acts at the start");
    assert!(our_base.iter().chain(&their_base).all(|&c| cells[c][0] == 4), "bases' hit points clip to 4: {cells:?}");
    // sources: our idle units; targets: their idle units; every middle entry valid
    let mask = mask_of(&env);
    let sources: Vec<usize> = (0..100).filter(|&c| mask[c]).collect();
    let targets: Vec<usize> = (0..100).filter(|&c| mask[129 + c]).collect();
    let mut ours = [our_base.clone(), our_worker.clone()].concat();
    let mut theirs = [their_base.clone(), their_worker.clone()].concat();
    ours.sort();
    theirs.sort();
    assert_eq!((sources, targets), (ours, theirs));
    assert!(mask[100..129].iter().all(|&m| m));
}

/// Every id runs a full episode of random valid actions to its time limit or the game's end;
/// rewards are the weighted sums the id asks for (Mining: resources gathered only).
#[test]
fn every_id_runs_a_full_episode() {
    for id in IDS {
        let mut envs = VecEnv::new(vec![envs::make(id).expect("MicroRTS (run scripts/setup)")]);
        envs.reset(Some(1));
        let mut steps = 0;
        let mut rng = 12345u64;
        loop {
            let action = random_valid_action(&envs.masks, &mut rng);
            envs.step(Action::Discrete(&action));
            steps += 1;
            if id == "MicrortsMining-v1" {
                assert!(envs.rewards[0] >= 0.0, "mining rewards are resources gathered");
            }
            if envs.terminated[0] || envs.truncated[0] {
                break;
            }
            assert!(steps < 1000, "{id} never ended");
        }
        let limit = envs::microrts::max_steps(id).expect("a MicroRTS id");
        assert!(steps == limit as usize || envs.terminated[0], "{id}: {steps} steps");
    }
}

/// Against PassiveAI the engine is deterministic: the same actions give the same observations,
/// rewards and masks, also on 2 env threads.
#[test]
fn the_same_actions_give_the_same_game() {
    let play = |threads: usize| {
        let mut envs = VecEnv::new(vec![
            envs::make("MicrortsMining-v1").expect("MicroRTS"),
            envs::make("MicrortsMining-v1").expect("MicroRTS"),
        ])
        .with_threads(threads);
        envs.reset(Some(0));
        let mut trace = Vec::new();
        for t in 0..60 {
            // each env's first source and a harvest or move in a fixed direction
            let mut actions = Vec::new();
            for e in 0..2 {
                let source = (0..100).find(|&c| envs.masks[e * 229 + c]).unwrap_or(0) as i64;
                actions.extend([source, 1 + (t % 2) as i64, (t / 2 % 4) as i64, (t / 3 % 4) as i64, 0, 0, 0, 0]);
            }
            envs.step(Action::Discrete(&actions));
            trace.push((envs.obs.clone(), envs.rewards.clone(), envs.masks.clone()));
        }
        trace
    };
    let (a, b) = (play(1), play(2));
    assert!(a == b, "the games differ");
    assert!(a.iter().any(|(_, r, _)| r.iter().any(|&r| r > 0.0)), "some resource was gathered");
}

/// The engine is not thread-safe (`Unit.next_ID` is incremented without a lock), so its calls are serialized: 8
/// games stepped on 4 threads with random valid actions never have two threads inside the engine at once, and
/// every game's unit IDs stay distinct.
#[test]
fn games_on_several_threads_never_overlap_inside_the_engine() {
    let (threads, games_per_thread, steps) = (4, 2, 250);
    std::thread::scope(|scope| {
        for t in 0..threads {
            scope.spawn(move || {
                let mut games: Vec<Microrts> =
                    (0..games_per_thread).map(|_| Microrts::new("MicrortsMining-v1").expect("MicroRTS")).collect();
                let mut obs = vec![0f32; 2700];
                let mut rng = 0x9E3779B97F4A7C15u64 ^ t as u64;
                for game in &mut games {
                    game.reset(None, &mut obs);
                }
                for step in 0..steps {
                    for (g, game) in games.iter_mut().enumerate() {
                        let action = random_valid_action(&mask_of(game), &mut rng);
                        if game.step(Action::Discrete(&action), &mut obs).terminated || step % 200 == 199 {
                            game.reset(None, &mut obs);
                        }
                        let mut ids = game.unit_ids();
                        let n = ids.len();
                        ids.sort();
                        ids.dedup();
                        assert_eq!(ids.len(), n, "thread {t}, game {g}, step {step}: a unit ID is held twice");
                    }
                }
            });
        }
    });
    assert_eq!(envs::microrts::most_threads_inside_engine(), 1, "two threads were inside the engine at once");
}
