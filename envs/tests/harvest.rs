//! GridHarvest-v0, the native masked env: its observation, mask, rules and best return, and the masks a `VecEnv`
//! hands on.

use envs::harvest::{GridHarvest, EPISODE_STEPS, ID};
use envs::{Action, Env, Space, VecEnv};

const CELLS: usize = 100;

/// The cell kinds from an observation: 0 empty, 1 worker, 2 resource (checking the one-hot).
fn kinds(obs: &[f32]) -> Vec<usize> {
    obs.chunks(3)
        .map(|planes| {
            assert_eq!(planes.iter().filter(|&&v| v == 1.0).count(), 1, "one plane per cell: {planes:?}");
            assert!(planes.iter().all(|&v| v == 0.0 || v == 1.0));
            planes.iter().position(|&v| v == 1.0).expect("a plane set")
        })
        .collect()
}

/// The cells above, below, left and right of `cell` that are on the 10 x 10 grid.
fn neighbours(cell: usize) -> Vec<usize> {
    let (r, c) = (cell / 10, cell % 10);
    let sides = [(r > 0, cell.wrapping_sub(10)), (r < 9, cell + 10), (c > 0, cell.wrapping_sub(1)), (c < 9, cell + 1)];
    sides.into_iter().filter_map(|(on_the_grid, n)| on_the_grid.then_some(n)).collect()
}

/// The mask the rules imply for a grid: workers as sources, every type, and as targets the
/// resource or empty cells next to a worker.
fn expected_mask(k: &[usize]) -> Vec<bool> {
    let mut mask: Vec<bool> = k.iter().map(|&x| x == 1).collect();
    mask.extend([true; 3]);
    mask.extend((0..CELLS).map(|cell| k[cell] != 1 && neighbours(cell).iter().any(|&n| k[n] == 1)));
    mask
}

fn mask_of(env: &dyn Env<Obs = f32>) -> Vec<bool> {
    env.action_mask().expect("GridHarvest has masks").to_vec()
}

/// GridHarvest's action space is MultiDiscrete [100, 3, 100], with a mask of 203 values. Its observation is a 10x10x3
/// box. Over 200 seeds, a reset puts one resource off the border, with 2 to 4 workers next to it. Each count of 2, 3
/// and 4 workers occurs over 30 times. The mask is the one the rules imply. The same seed gives the same grid.
#[test]
fn spaces_and_reset_layout() {
    let mut env = GridHarvest::new();
    assert_eq!(env.action_space(), Space::MultiDiscrete(vec![100, 3, 100]));
    assert_eq!(env.action_space().mask_dim(), 203);
    assert!(matches!(env.observation_space(), Space::Box { shape, .. } if shape == [10, 10, 3]));
    let mut obs = vec![0f32; 300];
    let mut worker_counts = [0; 5];
    for seed in 0..200 {
        env.reset(Some(seed), &mut obs);
        let k = kinds(&obs);
        let resources: Vec<usize> = (0..CELLS).filter(|&c| k[c] == 2).collect();
        assert_eq!(resources.len(), 1, "seed {seed}");
        let r = resources[0];
        assert!((1..9).contains(&(r / 10)) && (1..9).contains(&(r % 10)), "the resource is never on the border");
        let workers: Vec<usize> = (0..CELLS).filter(|&c| k[c] == 1).collect();
        assert!(workers.iter().all(|w| neighbours(r).contains(w)), "workers sit next to the resource");
        worker_counts[workers.len()] += 1;
        assert_eq!(mask_of(&env), expected_mask(&k), "seed {seed}");
    }
    assert_eq!(worker_counts[..2], [0, 0]);
    assert!(worker_counts[2..].iter().all(|&n| n > 30), "2, 3 and 4 workers all occur: {worker_counts:?}");
    // the same seed, the same grid
    let (mut a, mut b) = (vec![0f32; 300], vec![0f32; 300]);
    env.reset(Some(7), &mut a);
    GridHarvest::new().reset(Some(7), &mut b);
    assert_eq!(a, b);
}

/// A worker next to the resource harvests it for a reward of 1. Five actions earn 0 and leave the grid as it was. They
/// are a no-op, a source that is not a worker, a harvest of a cell that is not the resource, a move onto the resource
/// and a move of more than one cell. A move to an empty neighbour moves the worker, and the mask follows the grid. The
/// moved worker earns 1 by harvesting only if it is still next to the resource.
#[test]
fn rules_harvest_move_and_ignored_actions() {
    let mut env = GridHarvest::new();
    let mut obs = vec![0f32; 300];
    env.reset(Some(3), &mut obs);
    let k = kinds(&obs);
    let resource = (0..CELLS).find(|&c| k[c] == 2).expect("a resource");
    let worker = (0..CELLS).find(|&c| k[c] == 1).expect("a worker");
    let empty_next = neighbours(worker).into_iter().find(|&n| k[n] == 0).expect("an empty neighbour");
    let far = (0..CELLS).find(|&c| k[c] == 0 && !neighbours(worker).contains(&c)).expect("a far empty cell");
    let step = |env: &mut GridHarvest, a: [i64; 3], obs: &mut Vec<f32>| env.step(Action::Discrete(&a), obs).reward;
    let (w, r) = (worker as i64, resource as i64);
    assert_eq!(step(&mut env, [w, 1, r], &mut obs), 1.0, "harvest next to the resource");
    assert_eq!(step(&mut env, [w, 0, r], &mut obs), 0.0, "no-op");
    assert_eq!(step(&mut env, [r, 1, r], &mut obs), 0.0, "the source must be a worker");
    assert_eq!(step(&mut env, [w, 1, far as i64], &mut obs), 0.0, "the target must be the resource");
    assert_eq!(step(&mut env, [w, 2, r], &mut obs), 0.0, "cannot move onto the resource");
    assert_eq!(step(&mut env, [w, 2, far as i64], &mut obs), 0.0, "moves are one cell");
    assert_eq!(kinds(&obs), k, "nothing above changed the grid");
    assert_eq!(step(&mut env, [w, 2, empty_next as i64], &mut obs), 0.0);
    let moved = kinds(&obs);
    assert_eq!((moved[worker], moved[empty_next]), (0, 1), "the worker moved");
    assert_eq!(mask_of(&env), expected_mask(&moved), "the mask follows the grid");
    let harvested = step(&mut env, [empty_next as i64, 1, r], &mut obs);
    assert_eq!(harvested, if neighbours(empty_next).contains(&resource) { 1.0 } else { 0.0 });
}

/// Harvesting with the first worker on every step earns the best return, EPISODE_STEPS, and
/// `make` ends each episode there (a truncation).
#[test]
fn the_best_return_is_the_episode_length() {
    let mut envs = VecEnv::new(vec![envs::make(ID).expect("a native env"), envs::make(ID).expect("a native env")]);
    envs.reset(Some(1));
    let mut returns = [0.0f64; 2];
    for t in 1..=3 * EPISODE_STEPS {
        let mut actions = Vec::new();
        for e in 0..2 {
            let k = kinds(&envs.obs[e * 300..][..300]);
            let worker = (0..CELLS).find(|&c| k[c] == 1).expect("a worker") as i64;
            let resource = (0..CELLS).find(|&c| k[c] == 2).expect("a resource") as i64;
            actions.extend([worker, 1, resource]);
        }
        envs.step(Action::Discrete(&actions));
        for (e, ret) in returns.iter_mut().enumerate() {
            *ret += envs.rewards[e] as f64;
            assert_eq!(envs.truncated[e], t % EPISODE_STEPS == 0, "step {t}");
            assert!(!envs.terminated[e]);
            // the masks are those of the observations handed on (the new episode's after a reset)
            assert_eq!(envs.masks[e * 203..][..203], expected_mask(&kinds(&envs.obs[e * 300..][..300])));
        }
    }
    assert_eq!(returns, [3.0 * EPISODE_STEPS as f64; 2]);
}

/// Envs without invalid actions report every action valid, through wrappers and `VecEnv`.
#[test]
fn other_envs_mask_nothing() {
    let mut envs = VecEnv::new(vec![envs::make("CartPole-v1").expect("CartPole")]);
    envs.reset(Some(0));
    assert_eq!((envs.mask_dim, envs.masks.clone()), (2, vec![true, true]));
    let pendulum = VecEnv::new(vec![envs::make("Pendulum-v1").expect("Pendulum")]);
    assert_eq!(pendulum.mask_dim, 0);
}
