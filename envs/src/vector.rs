use crate::{Action, Env, Space};

/// An episode that ended during the last `VecEnv::step`, in env `env`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FinishedEpisode {
    pub env: usize,
    pub r: f64,
    pub l: u64,
}

/// What one env reported for the last step.
#[derive(Debug, Clone, Copy, Default)]
struct Outcome {
    reward: f32,
    terminated: bool,
    truncated: bool,
    episode: Option<(f64, u64)>,
}

/// N copies of an environment stepped together, like gymnasium 0.29's `SyncVectorEnv`.
///
/// Auto-reset: when an env terminates or truncates, it is reset at once and the observation
/// returned for it is the first of its next episode; the last one of the episode that ended
/// is kept in `final_obs` (gymnasium's `info["final_observation"]`). Results live
/// in the public buffers below, overwritten by each `step`; nothing is allocated per step.
/// With `threads > 1` the envs are split into that many contiguous groups stepped in parallel:
/// the calling thread steps the first, a pool of `threads - 1` workers that lives as long as the
/// `VecEnv` the others (starting threads at every step cost more than small envs' steps). Every
/// env owns its state and RNG, so results do not depend on the number of threads.
pub struct VecEnv<T: Copy + Default + Send + Sync + 'static> {
    envs: Vec<Box<dyn Env<Obs = T>>>,
    threads: usize,
    /// the workers for groups 1.. (none with one thread)
    pool: Option<rayon::ThreadPool>,
    outcomes: Vec<Outcome>,
    /// wall-clock seconds spent in `step` since the last `take_step_seconds`
    step_seconds: f64,
    pub obs_dim: usize,
    /// `num_envs * obs_dim` observations, one row per env.
    pub obs: Vec<T>,
    pub rewards: Vec<f32>,
    pub terminated: Vec<bool>,
    pub truncated: Vec<bool>,
    /// Laid out like `obs`: for envs that finished an episode in the last step, its final
    /// observation; rows of the other envs are stale.
    pub final_obs: Vec<T>,
    /// Episodes that finished in the last step (needs a `RecordEpisodeStatistics` in the stack).
    pub finished: Vec<FinishedEpisode>,
    /// Entries per env in `masks` (`Space::mask_dim` of the action space).
    pub mask_dim: usize,
    /// `num_envs * mask_dim` flags, one row per env: which actions are valid for the observation
    /// in `obs` (after an auto-reset, the new episode's first), from `Env::action_mask`; all
    /// true for envs without masks.
    pub masks: Vec<bool>,
}

impl<T: Copy + Default + Send + Sync + 'static> VecEnv<T> {
    /// Panics if `envs` is empty or the envs disagree on their spaces (a caller bug).
    pub fn new(envs: Vec<Box<dyn Env<Obs = T>>>) -> Self {
        assert!(!envs.is_empty(), "a VecEnv needs at least one env");
        let space = envs[0].observation_space();
        assert!(envs.iter().all(|e| e.observation_space() == space), "all envs must share one observation space");
        let (n, obs_dim, mask_dim) = (envs.len(), space.flat_dim(), envs[0].action_space().mask_dim());
        VecEnv {
            envs,
            threads: 1,
            pool: None,
            outcomes: vec![Outcome::default(); n],
            step_seconds: 0.0,
            obs_dim,
            obs: vec![T::default(); n * obs_dim],
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            final_obs: vec![T::default(); n * obs_dim],
            finished: Vec::with_capacity(n),
            mask_dim,
            masks: vec![true; n * mask_dim],
        }
    }

    /// Steps the envs on `threads` threads (at least 1, at most one per env): this one and a pool of
    /// `threads - 1` workers, started now. Panics if the OS starts no thread.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.clamp(1, self.envs.len());
        self.pool = (self.threads > 1).then(|| {
            let pool =
                rayon::ThreadPoolBuilder::new().num_threads(self.threads - 1).thread_name(|i| format!("env-{i}"));
            pool.build().expect("the OS starts the env threads")
        });
        self
    }

    /// Env `i` itself (its state may be changed from outside; then update its row of `obs`).
    pub fn env_mut(&mut self, i: usize) -> &mut Box<dyn Env<Obs = T>> {
        &mut self.envs[i]
    }

    pub fn single_observation_space(&self) -> Space {
        self.envs[0].observation_space()
    }

    pub fn single_action_space(&self) -> Space {
        self.envs[0].action_space()
    }

    /// Resets every env; with a seed, env `i` is seeded with `seed + i` (as gymnasium does).
    pub fn reset(&mut self, seed: Option<u64>) {
        self.reset_each(|i| seed.map(|s| s.wrapping_add(i as u64))); // the binaries keep --seed 2^32 below 2^64
    }

    /// Resets every env, env `i` with the seed `seed(i)` (none: it goes on from its own generator).
    pub fn reset_each(&mut self, seed: impl Fn(usize) -> Option<u64> + Sync) {
        self.run(|i, env, obs, _, _| env.reset(seed(i), obs));
        self.read_masks();
    }

    /// Steps every env with its row of `actions` (`Discrete`: one value per env; `MultiDiscrete`
    /// and `Box`: `flat_dim` values per env).
    pub fn step(&mut self, actions: Action) {
        let start = std::time::Instant::now();
        let n = self.envs.len();
        // env i's share of the flat actions
        let row = |i: usize| {
            let row = |len: usize| i * len / n..(i + 1) * len / n;
            match actions {
                Action::Discrete(a) => Action::Discrete(&a[row(a.len())]),
                Action::Continuous(a) => Action::Continuous(&a[row(a.len())]),
            }
        };
        // every env's step started first where an env runs elsewhere (Gymnasium's processes step at once)
        self.envs.iter_mut().enumerate().for_each(|(i, env)| env.send_step(row(i)));
        self.run(|i, env, obs, final_obs, out| {
            let step = env.step(row(i), obs);
            *out = Outcome {
                reward: step.reward as f32,
                terminated: step.terminated,
                truncated: step.truncated,
                episode: step.episode.map(|e| (e.r, e.l)),
            };
            if step.terminated || step.truncated {
                final_obs.copy_from_slice(obs);
                env.reset(None, obs);
            }
        });
        self.finished.clear();
        for (i, o) in self.outcomes.iter().enumerate() {
            (self.rewards[i], self.terminated[i], self.truncated[i]) = (o.reward, o.terminated, o.truncated);
            if let Some((r, l)) = o.episode {
                self.finished.push(FinishedEpisode { env: i, r, l });
            }
        }
        self.read_masks();
        self.step_seconds += start.elapsed().as_secs_f64();
    }

    /// The wall-clock seconds spent in `step` since the previous call (the binaries' timing
    /// column `timing/env_seconds`), and starts counting again.
    pub fn take_step_seconds(&mut self) -> f64 {
        std::mem::take(&mut self.step_seconds)
    }

    fn read_masks(&mut self) {
        if self.mask_dim == 0 {
            return; // a Box action space: nothing to mask
        }
        for (env, row) in self.envs.iter().zip(self.masks.chunks_mut(self.mask_dim)) {
            if let Some(mask) = env.action_mask() {
                row.copy_from_slice(mask);
            }
        }
    }

    /// Calls `f(index, env, its obs row, its final_obs row, its outcome)` for every env, on
    /// `self.threads` threads: group 0 here, the others on the pool's workers.
    fn run<F>(&mut self, f: F)
    where
        F: Fn(usize, &mut Box<dyn Env<Obs = T>>, &mut [T], &mut [T], &mut Outcome) + Sync,
    {
        let (d, per_thread) = (self.obs_dim, self.envs.len().div_ceil(self.threads));
        let rows = self.obs.chunks_mut(per_thread * d).zip(self.final_obs.chunks_mut(per_thread * d));
        let groups = self.envs.chunks_mut(per_thread).zip(rows).zip(self.outcomes.chunks_mut(per_thread));
        type Group<'a, T> = ((&'a mut [Box<dyn Env<Obs = T>>], (&'a mut [T], &'a mut [T])), &'a mut [Outcome]);
        let step_group = |g: usize, ((envs, (obs, final_obs)), outs): Group<T>| {
            let rows = obs.chunks_mut(d).zip(final_obs.chunks_mut(d));
            for (k, ((env, (obs, final_obs)), out)) in envs.iter_mut().zip(rows).zip(outs.iter_mut()).enumerate() {
                f(g * per_thread + k, env, obs, final_obs, out);
            }
        };
        let mut groups = groups.enumerate();
        match &self.pool {
            None => groups.for_each(|(g, group)| step_group(g, group)),
            Some(pool) => pool.in_place_scope(|s| {
                let first = groups.next();
                for (g, group) in groups {
                    let step_group = &step_group;
                    s.spawn(move |_| step_group(g, group));
                }
                if let Some((g, group)) = first {
                    step_group(g, group);
                }
            }),
        }
    }
}
