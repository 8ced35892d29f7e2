//! The vector env's contract: seeding, auto-reset as in gymnasium 0.29, episode statistics,
//! truncation, and the registry's error for unknown ids.

use envs::{make, Action, Env, RecordEpisodeStatistics, VecEnv};

fn cartpoles(n: usize) -> VecEnv<f32> {
    VecEnv::new(
        (0..n)
            .map(|_| {
                Box::new(RecordEpisodeStatistics::new(make("CartPole-v1").expect("CartPole")))
                    as Box<dyn Env<Obs = f32>>
            })
            .collect(),
    )
}

/// A `VecEnv` reset with seed 7 seeds env i with 7 + i. Each env's observation is a single CartPole's reset with that
/// seed. Env 0 and env 1 start apart.
#[test]
fn env_i_is_seeded_with_seed_plus_i() {
    let mut v = cartpoles(3);
    v.reset(Some(7));
    for i in 0..3 {
        let mut single = make("CartPole-v1").unwrap();
        let mut obs = [0f32; 4];
        single.reset(Some(7 + i as u64), &mut obs);
        assert_eq!(&v.obs[i * 4..(i + 1) * 4], &obs, "env {i}");
    }
    assert_ne!(v.obs[0..4], v.obs[4..8], "different envs get different seeds");
}

/// When an env of a `VecEnv` ends, its observation is already the next episode's reset, within 0.05 of 0. The finished
/// episode is recorded for that env alone, with its return and length. Pushed right, 2 CartPoles end at least 4
/// episodes in 200 steps, with a reward of 1 per step.
#[test]
fn auto_reset_returns_next_episodes_first_obs_and_records_the_episode() {
    let mut v = cartpoles(2);
    v.reset(Some(3));
    let mut lengths = [0u64; 2];
    let mut finished = 0;
    for _ in 0..200 {
        // always push right: env 0 falls over within a few dozen steps
        v.step(Action::Discrete(&[1, 1]));
        for (i, length) in lengths.iter_mut().enumerate() {
            *length += 1;
            assert_eq!(v.rewards[i], 1.0);
            if v.terminated[i] || v.truncated[i] {
                // the returned obs is the reset of the next episode: uniform in ±0.05
                assert!(
                    v.obs[i * 4..(i + 1) * 4].iter().all(|x| x.abs() <= 0.05),
                    "env {i} obs {:?}",
                    &v.obs[i * 4..i * 4 + 4]
                );
                let ep = v.finished.iter().find(|e| e.env == i).expect("finished episode recorded");
                assert_eq!((ep.r, ep.l), (*length as f64, *length));
                *length = 0;
                finished += 1;
            } else {
                assert!(v.finished.iter().all(|e| e.env != i));
            }
        }
    }
    assert!(finished >= 4, "pushing one way ends episodes quickly ({finished})");
}

/// MountainCar-v0 from `make` is truncated at step 200 and not before. Doing nothing, it is never terminated.
/// `RecordEpisodeStatistics` records the episode with return -200 and length 200.
#[test]
fn time_limit_truncates_mountain_car_at_200() {
    let mut env = RecordEpisodeStatistics::new(make("MountainCar-v0").unwrap());
    let mut obs = [0f32; 2];
    env.reset(Some(0), &mut obs);
    for t in 1..=200 {
        let step = env.step(Action::Discrete(&[1]), &mut obs);
        assert!(!step.terminated, "doing nothing never reaches the goal");
        assert_eq!(step.truncated, t == 200, "step {t}");
        if t == 200 {
            assert_eq!(step.episode.map(|e| (e.r, e.l)), Some((-200.0, 200)));
        }
    }
}

/// `make` of an id that neither envs nor Gymnasium knows, CartPole-v9, is an error. The error names the id and lists
/// known ids such as CartPole-v1 and Acrobot-v1. It also gives Gymnasium's failure.
#[test]
fn unknown_id_lists_the_known_ones() {
    // an id neither envs nor Gymnasium knows (CartPole-v0 is Gymnasium's: it runs there)
    let err = make("CartPole-v9").err().expect("unknown id is an error").to_string();
    assert!(err.contains("CartPole-v9") && err.contains("CartPole-v1") && err.contains("Acrobot-v1"), "{err}");
    assert!(err.contains("as Gymnasium's: gymnasium.make('CartPole-v9') failed"), "{err}");
}

/// Separate runs of one seed give the same trajectory, on any number of threads.
#[test]
fn results_do_not_depend_on_the_number_of_threads() {
    let run = |threads: usize| {
        let mut v = cartpoles(5).with_threads(threads);
        v.reset(Some(11));
        let mut trace = Vec::new();
        for t in 0..300i64 {
            v.step(Action::Discrete(&[t % 2, 1, 0, (t / 2) % 2, (t / 5) % 2]));
            trace.extend(v.obs.iter().map(|x| x.to_bits() as f64));
            trace.extend(v.rewards.iter().map(|&r| r as f64));
            trace.extend(v.finished.iter().map(|e| e.env as f64 * 1e6 + e.l as f64));
        }
        trace
    };
    let one = run(1);
    assert_eq!(one, run(2));
    assert_eq!(one, run(3));
    assert_eq!(one, run(8));
}
