//! The combinations of flags that no value parser sees, checked once all are parsed (`experiment!` calls
//! these): a rollout's batch against its minibatches and the run's length, a multilevel rollout's levels.

/// The flags that shape a rollout, for the combinations no value parser sees (`experiment!` fills it
/// from the fields of the same names).
pub struct Rollout {
    pub num_envs: usize,
    pub num_steps: usize,
    pub num_minibatches: usize,
    pub total_timesteps: u64,
    pub norm_adv: bool,
    /// a data-parallel run's ranks, each collecting such a rollout (its envs are `--local-num-envs`);
    /// none for one process (`--num-envs`)
    pub ranks: Option<usize>,
}

impl Rollout {
    /// CleanRL's batch (`num_envs * num_steps`, a rank's) must split into whole minibatches, the run
    /// must hold one batch (of all ranks), and per-minibatch advantage normalization needs minibatches
    /// of 2 or more samples.
    pub fn check(&self) -> Result<(), String> {
        let (batch_size, n, total) = (self.num_envs * self.num_steps, self.num_minibatches, self.total_timesteps);
        let envs = if self.ranks.is_some() { "--local-num-envs" } else { "--num-envs" };
        let (all, x_ranks) = self.ranks.map_or((batch_size, ""), |ranks| (batch_size * ranks, " x ranks"));
        if !batch_size.is_multiple_of(n) {
            Err(format!("{envs} x --num-steps ({batch_size}) must be divisible by --num-minibatches ({n})"))
        } else if total < all as u64 {
            Err(format!("--total-timesteps ({total}) is below one batch ({envs} x --num-steps{x_ranks} = {all})"))
        } else if self.norm_adv && batch_size / n < 2 {
            Err("--norm-adv needs minibatches of 2 or more samples (the std of one is NaN); lower --num-minibatches"
                .into())
        } else {
            Ok(())
        }
    }
}

/// The flags that shape a multilevel rollout, for the combinations no value parser sees (`experiment!`'s
/// `levels` arm fills it from the fields of the same names).
pub struct Levels<'a> {
    /// each level's grid, coarse to fine
    pub levels: &'a [usize],
    /// each level's steps per env and iteration (T^l)
    pub level_steps: &'a [usize],
    /// each level's minibatch size (M^l)
    pub level_minibatch_size: &'a [usize],
    pub num_envs: usize,
    pub norm_adv: bool,
    /// the observation and reward normalization, whose statistics each env keeps
    pub normalize: bool,
}

impl Levels<'_> {
    /// One value per level for each of the three lists, grids from coarse to fine (two equal grids are allowed:
    /// their L^l is exactly 0, a test that sync rows pair with main rows), the same whole number of minibatches
    /// N T^l / M^l on every level (one minibatch index drives them all), minibatches of 2 or more samples for
    /// advantage normalization, and normalization with one level only (envs of different levels would keep
    /// different statistics).
    pub fn check(&self) -> Result<(), String> {
        let n_levels = self.levels.len();
        let counts: Vec<_> =
            self.level_steps.iter().zip(self.level_minibatch_size).map(|(t, &m)| (self.num_envs * t, m)).collect();
        if self.level_steps.len() != n_levels || self.level_minibatch_size.len() != n_levels {
            Err(format!(
                "--levels, --level-steps and --level-minibatch-size need one value per level ({n_levels} levels)"
            ))
        } else if self.levels.windows(2).any(|w| w[0] > w[1]) {
            Err(format!("--levels must go from coarse to fine (growing grid sizes), got {:?}", self.levels))
        } else if counts.iter().any(|&(n, m)| !n.is_multiple_of(m) || n / m != counts[0].0 / counts[0].1) {
            let got: Vec<_> = counts.iter().map(|(n, m)| format!("{n}/{m}")).collect();
            Err(format!("every level needs the same whole number of minibatches N T^l / M^l, got {}", got.join(", ")))
        } else if self.norm_adv && self.level_minibatch_size.contains(&1) {
            Err("--norm-adv needs minibatches of 2 or more (the std of one is NaN); raise --level-minibatch-size"
                .into())
        } else if self.normalize && n_levels > 1 {
            Err("--normalize works with one level only (each env would keep its own statistics)".into())
        } else {
            Ok(())
        }
    }
}
