use crate::{Action, Env, Space};

/// An episode that ended during the last `VecEnv::step`, in env `env`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FinishedEpisode {
    pub env: usize,
    pub r: f64,
    pub l: u64,
}

/// N copies of an environment stepped together, like gymnasium 0.29's `SyncVectorEnv`.
///
/// Auto-reset: when an env terminates or truncates, it is reset at once and the observation
/// returned for it is the first of its next episode (the final one is not kept). Results live
/// in the public buffers below, overwritten by each `step`; nothing is allocated per step.
pub struct VecEnv {
    envs: Vec<Box<dyn Env>>,
    pub obs_dim: usize,
    /// `num_envs * obs_dim` observations, one row per env.
    pub obs: Vec<f32>,
    pub rewards: Vec<f32>,
    pub terminated: Vec<bool>,
    pub truncated: Vec<bool>,
    /// Episodes that finished in the last step (needs a `RecordEpisodeStatistics` in the stack).
    pub finished: Vec<FinishedEpisode>,
}

impl VecEnv {
    /// Panics if `envs` is empty or the envs disagree on their spaces (a caller bug).
    pub fn new(envs: Vec<Box<dyn Env>>) -> Self {
        assert!(!envs.is_empty(), "a VecEnv needs at least one env");
        let space = envs[0].observation_space();
        assert!(envs.iter().all(|e| e.observation_space() == space), "all envs must share one observation space");
        let (n, obs_dim) = (envs.len(), space.flat_dim());
        VecEnv {
            envs,
            obs_dim,
            obs: vec![0.0; n * obs_dim],
            rewards: vec![0.0; n],
            terminated: vec![false; n],
            truncated: vec![false; n],
            finished: Vec::with_capacity(n),
        }
    }

    pub fn num_envs(&self) -> usize {
        self.envs.len()
    }

    pub fn single_observation_space(&self) -> Space {
        self.envs[0].observation_space()
    }

    pub fn single_action_space(&self) -> Space {
        self.envs[0].action_space()
    }

    /// Resets every env; with a seed, env `i` is seeded with `seed + i` (as gymnasium does).
    pub fn reset(&mut self, seed: Option<u64>) {
        let d = self.obs_dim;
        for (i, (env, obs)) in self.envs.iter_mut().zip(self.obs.chunks_mut(d)).enumerate() {
            env.reset(seed.map(|s| s + i as u64), obs);
        }
    }

    /// Steps every env with its row of `actions` (`Discrete`: one value per env; `MultiDiscrete`
    /// and `Box`: `flat_dim` values per env).
    pub fn step(&mut self, actions: Action) {
        let d = self.obs_dim;
        let n = self.envs.len();
        self.finished.clear();
        for (i, (env, obs)) in self.envs.iter_mut().zip(self.obs.chunks_mut(d)).enumerate() {
            let action = match actions {
                Action::Discrete(a) => Action::Discrete(&a[i * a.len() / n..(i + 1) * a.len() / n]),
                Action::Continuous(a) => Action::Continuous(&a[i * a.len() / n..(i + 1) * a.len() / n]),
            };
            let step = env.step(action, obs);
            self.rewards[i] = step.reward as f32;
            self.terminated[i] = step.terminated;
            self.truncated[i] = step.truncated;
            if let Some(ep) = step.episode {
                self.finished.push(FinishedEpisode { env: i, r: ep.r, l: ep.l });
            }
            if step.terminated || step.truncated {
                env.reset(None, obs);
            }
        }
    }
}
