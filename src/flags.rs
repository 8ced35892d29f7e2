//! Value parsers for clap: the range in which each numeric flag can work, so that a flag out of
//! range is one line naming the flag, the value and the range (exit code 2).

pub fn at_least_one(s: &str) -> Result<usize, String> {
    s.parse().map_err(|e| format!("{e}")).and_then(|n| if n >= 1 { Ok(n) } else { Err("must be at least 1".into()) })
}

pub fn float_where(s: &str, ok: fn(f64) -> bool, range: &str) -> Result<f64, String> {
    s.parse().map_err(|e| format!("{e}")).and_then(|x| if ok(x) { Ok(x) } else { Err(format!("must be {range}")) })
}

pub fn positive(s: &str) -> Result<f64, String> {
    float_where(s, |x| x > 0.0 && x.is_finite(), "finite and > 0")
}

pub fn kl_target(s: &str) -> Result<f64, String> {
    float_where(s, |x| x >= 0.0, ">= 0 (inf: never stop)")
}

pub fn finite(s: &str) -> Result<f64, String> {
    float_where(s, f64::is_finite, "finite")
}

pub fn unit_interval(s: &str) -> Result<f64, String> {
    float_where(s, |x| (0.0..=1.0).contains(&x), "in [0, 1]")
}

/// `--exp-name` names a directory inside runs/, so it is a plain name.
pub fn plain_name(s: &str) -> Result<String, String> {
    let plain = !s.is_empty() && !s.contains(['/', '\\']) && !s.contains("..");
    plain.then(|| s.to_string()).ok_or_else(|| "must be a plain name, without '/', '\\' or '..'".into())
}

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
