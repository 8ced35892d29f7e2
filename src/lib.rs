//! The library of the ppo-details binaries: what is not PPO and is the same for every variant, as
//! CleanRL takes `torch.optim`, `SummaryWriter`, `tyro` and `cleanrl_utils` from its libraries. Every
//! PPO detail lives in the binaries, at the line where it acts; nothing here names a binary.
//!
//! - [`optim`]: Adam over one flat vector of the parameters, and gradient-norm clipping.
//! - [`cli`]: the experiment's flags and their parsing (with `--resume`'s arguments).
//! - [`logs`]: the run directory: args.json, the CSVs, TensorBoard events, the progress bar, the saved model;
//!   when a checkpoint is written.
//! - [`checkpoint`]: the checkpoint's file (written, read back and checked), where the loop starts
//!   ([`Start`]: weights, Adam's state, the learning rate, statistics, seed).
//! - `resume_logs`: `--resume`'s logs cut back to the checkpoint, TensorBoard's events rebuilt from the CSVs.
//! - `lock`: one writer per run directory (an advisory lock the OS releases with the process).
//! - `durable`: writes that a crash or a power loss leaves whole (a temporary file, fsync, rename).
//! - `signals`: Ctrl-C and SIGTERM end a run with one line saying how to resume it.
//! - [`trace`]: the parity trace (`PPO_TRACE=FILE`) that tests/parity.rs compares with CleanRL.
//! - [`flags`]: value parsers, the range in which each numeric flag can work.
//! - [`checks`]: the combinations of flags no value parser sees (a batch against its minibatches, levels).
//! - [`device`]: the device `--cuda` gets, and why, in words (the NVIDIA driver asked through
//!   cudarc); `--torch-deterministic` in libtorch's global context.
//! - [`nccl`]: a data-parallel run's gradient all-reduce between GPUs (or through MPI).
//! - [`ranks`]: the ranks of a run over MPI, a data-parallel run's (reductions, broadcast, episodes, sync
//!   check) and a learner's with its workers' (rollouts gathered, the CPU random stream handed over).
//! - `openmp`: `GOMP_SPINCOUNT` set before libgomp reads it, however a binary starts (its ELF preinit array).
//! - Here: [`fail`], [`to_host`], [`upload`], [`play`] (the evaluation loop of `--save-model`), [`var`]
//!   (numpy's), [`categorical_sample`] (torch.distributions'), [`all_cores`], [`experiment!`].

pub mod checkpoint;
pub mod checks;
pub mod cli;
pub mod device;
mod durable;
pub mod flags;
mod lock;
pub mod logs;
pub mod nccl;
mod openmp;
pub mod optim;
pub mod ranks;
mod resume_logs;
mod signals;
pub mod trace;

pub use checkpoint::Start;
pub use cli::{parse_args, unix_time, Experiment, RunArgs};
pub use device::{pick_device, torch_deterministic, Network};
pub use logs::{read_host, Logged, RunLog};
pub use optim::FlatAdam;
pub use trace::Trace;

use envs::VecEnv;
use std::sync::atomic::{AtomicBool, Ordering};
use tch::{Device, Kind, Tensor};

// libtorch allocates and frees memory for every tensor it makes, several per operation: mimalloc,
// which replaces malloc for the whole process (libtorch included), does that faster than glibc's
// (same results; HalfCheetah-v4 learning time -13%)
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A float tensor's values on the host, in one copy (on a GPU, one wait for it).
pub fn to_host(t: &Tensor) -> Vec<f32> {
    let numel = t.numel();
    let mut host = vec![0f32; numel];
    t.to_device(Device::Cpu).copy_data(&mut host, numel);
    host
}

/// Observations from the host to `device`, `dim` values a row. On a GPU, `pixels` (whole numbers 0 to
/// 255 held as f32) go up as bytes, 4 times fewer, and become f32 there: the same values.
pub fn upload(obs: &[f32], dim: i64, pixels: bool, device: Device) -> Tensor {
    if pixels && device != Device::Cpu {
        let bytes: Vec<u8> = obs.iter().map(|&x| x as u8).collect();
        Tensor::from_slice(&bytes).view([-1, dim]).to_device(device).to_kind(Kind::Float)
    } else {
        Tensor::from_slice(obs).view([-1, dim]).to_device(device)
    }
}

/// Every core of this machine: the thread default of the binaries with a CNN or many envs.
pub fn all_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One action per row of `probs`, as `torch.distributions.Categorical(probs).sample()` (tch has no
/// distributions): the CDF inverted at a uniform draw, [`invert_cdf`] (5 us here; multinomial takes 15).
/// An action of probability 0 (masked, or underflowed) is never drawn.
pub fn categorical_sample(probs: &Tensor) -> Tensor {
    invert_cdf(probs, &Tensor::rand([probs.size()[0], 1], (Kind::Float, probs.device())))
}

/// The action each row of `probs` takes for its draw `u` in [0, 1) (a column): the first whose
/// cumulative probability exceeds `u` times the row's total, that is, the number of entries of the
/// CDF at or below it. So an action of probability 0, whose CDF entry equals the one before it (0
/// for the first), is never the answer, for any `u`: not at `u = 0` (the first positive action),
/// nor past the last positive one (`u` times the total stays below the total: scaled by the sum
/// itself, a rounding shortfall of the sum cannot reach beyond it, and a product that rounds up to
/// the total is taken just below it).
pub fn invert_cdf(probs: &Tensor, u: &Tensor) -> Tensor {
    let cdf = probs.cumsum(-1, Kind::Float);
    let total = cdf.narrow(1, probs.size()[1] - 1, 1);
    let u = (u * &total).minimum(&total.nextafter(&total.zeros_like()));
    cdf.le_tensor(&u).sum_dim_intlist(-1, false, Kind::Int64)
}

/// After CleanRL's evaluation loop for `--save-model` (`cleanrl_utils/evals/ppo_eval.py`): 10 episodes of `env`,
/// seeded here from `seed` (CleanRL's resets unseeded), `act` choosing and taking every action; their returns, for
/// eval.csv.
pub fn play<O>(env: Box<dyn envs::Env<Obs = O>>, seed: u64, mut act: impl FnMut(&mut VecEnv<O>)) -> Vec<f64>
where
    O: Copy + Default + Send + Sync + 'static,
{
    let mut env = VecEnv::new(vec![env]);
    env.reset(Some(seed));
    let mut returns = Vec::new();
    while returns.len() < 10 {
        act(&mut env);
        returns.extend(env.finished.iter().map(|ep| ep.r));
    }
    returns
}

static SAYS_BAD_INPUT: AtomicBool = AtomicBool::new(true);

/// Whether this process prints the line of [`fail`] for bad input: processes that all find the same
/// bad input (the ranks of one `mpirun`) let one of them say it.
pub fn says_bad_input(says: bool) {
    SAYS_BAD_INPUT.store(says, Ordering::Relaxed);
}

/// Prints one line and exits: 2 for bad input, 1 for failures while running.
pub fn fail(code: i32, msg: impl std::fmt::Display) -> ! {
    if code != 2 || SAYS_BAD_INPUT.load(Ordering::Relaxed) {
        // one write of the whole line: the ranks of an MPI job share a stderr, and their lines stay whole
        let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("error: {msg}\n").as_bytes());
    }
    std::process::exit(code)
}

/// numpy's `np.var`: the population variance (divided by n), two passes in f64.
pub fn var(xs: impl Iterator<Item = f64> + Clone) -> f64 {
    let n = xs.clone().count() as f64;
    let mean = xs.clone().sum::<f64>() / n;
    xs.map(|x| (x - mean).powi(2)).sum::<f64>() / n
}

/// `impl Experiment for $args` for an `Args` with the fields `run` (the flattened [`RunArgs`]),
/// `env_id` and those of [`checks::Rollout`], in the binary that calls it (its name is
/// `env!("CARGO_BIN_NAME")` there). The defaults of `--torch-threads` and `--env-threads`: one each
/// with `one_core`, every core for both with `all_cores`, every core for libtorch and one env thread
/// with `torch_on_all_cores`, or the pair given. `Experiment::check` runs the binary's
/// own `check = f` (`fn(&Args) -> Result<(), String>`), if given, then `Rollout::check`.
///
/// `levels`: a multilevel rollout, its shapes checked by [`checks::Levels`] (fields `levels`, `level_steps`,
/// `level_minibatch_size`, `num_envs`, `norm_adv`, `normalize`) and `--num-iterations` its length, which
/// `--resume` may raise. `batch_checked_in_main`: no batch check here, for a binary whose batch depends on
/// what only `main` knows (its ranks or workers), which checks it there; with `resume_may_change = &["..."]`,
/// the flags that `--resume` may change besides the run's own (where the ranks run).
/// `added_later = &[("flag", "value")]`: flags added since runs were made, with the value a run of
/// an earlier build had in effect ([`Experiment::ADDED_LATER`]).
#[macro_export]
macro_rules! experiment {
    (@impl $args:ty, $threads:expr, $may_change:expr, $added_later:expr, $check:expr) => {
        impl $crate::Experiment for $args {
            const NAME: &'static str = env!("CARGO_BIN_NAME");
            const RESUME_MAY_CHANGE: &'static [&'static str] = $may_change;
            const ADDED_LATER: &'static [(&'static str, &'static str)] = $added_later;
            fn run(&self) -> &$crate::RunArgs {
                &self.run
            }
            fn env_id(&self) -> &str {
                &self.env_id
            }
            fn threads() -> (usize, usize) {
                $threads
            }
            fn check(&self) -> Result<(), String> {
                ($check)(self)
            }
        }
    };
    (@rollout $args:ty, $threads:expr, $added_later:expr, $check:expr) => {
        $crate::experiment!(@impl $args, $threads, &[], $added_later, |a: &$args| {
            ($check)(a)?;
            let (num_envs, num_steps, num_minibatches) = (a.num_envs, a.num_steps, a.num_minibatches);
            let (total_timesteps, norm_adv, ranks) = (a.total_timesteps, a.norm_adv, None);
            $crate::checks::Rollout { num_envs, num_steps, num_minibatches, total_timesteps, norm_adv, ranks }.check()
        });
    };
    ($args:ty, $threads:expr, levels, added_later = $added_later:expr) => {
        $crate::experiment!(@impl $args, $threads, &["num_iterations"], $added_later, |a: &$args| {
            let (levels, level_steps, level_minibatch_size) = (&a.levels, &a.level_steps, &a.level_minibatch_size);
            let (num_envs, norm_adv, normalize) = (a.num_envs, a.norm_adv, a.normalize);
            $crate::checks::Levels { levels, level_steps, level_minibatch_size, num_envs, norm_adv, normalize }.check()
        });
    };
    ($args:ty, one_core) => {
        $crate::experiment!($args, (1, 1), |_: &$args| Ok::<(), String>(()));
    };
    ($args:ty, all_cores) => {
        $crate::experiment!($args, ($crate::all_cores(), $crate::all_cores()), |_: &$args| Ok::<(), String>(()));
    };
    ($args:ty, torch_on_all_cores) => {
        $crate::experiment!($args, ($crate::all_cores(), 1), |_: &$args| Ok::<(), String>(()));
    };
    ($args:ty, torch_on_all_cores, check = $check:expr) => {
        $crate::experiment!($args, ($crate::all_cores(), 1), $check);
    };
    ($args:ty, one_core, check = $check:expr) => {
        $crate::experiment!($args, (1, 1), $check);
    };
    ($args:ty, all_cores, check = $check:expr) => {
        $crate::experiment!($args, ($crate::all_cores(), $crate::all_cores()), $check);
    };
    ($args:ty, one_core, added_later = $added_later:expr) => {
        $crate::experiment!(@rollout $args, (1, 1), $added_later, |_: &$args| Ok::<(), String>(()));
    };
    ($args:ty, all_cores, batch_checked_in_main) => {
        $crate::experiment!(@impl $args, ($crate::all_cores(), $crate::all_cores()), &[], &[], |_: &$args| {
            Ok::<(), String>(())
        });
    };
    ($args:ty, all_cores, resume_may_change = $may_change:expr, batch_checked_in_main) => {
        $crate::experiment!(@impl $args, ($crate::all_cores(), $crate::all_cores()), $may_change, &[], |_: &$args| {
            Ok::<(), String>(())
        });
    };
    ($args:ty, $threads:expr, $check:expr) => {
        $crate::experiment!(@rollout $args, $threads, &[], $check);
    };
}

#[cfg(test)]
mod tests {
    use tch::Tensor;

    /// The sampler at chosen draws: at u = 0 and just below 1, with actions of probability 0 at the
    /// start, in the middle and at the end, it returns the first action whose cumulative probability
    /// exceeds u, never one of probability 0; and the same for a sum short of 1 by rounding.
    #[test]
    fn a_zero_probability_action_is_never_drawn() {
        let below_one = 1.0 - f32::EPSILON / 2.0; // the largest f32 below 1: Tensor::rand's largest draw
        let cases: &[(&[f32], f32, i64)] = &[
            (&[0.0, 0.5, 0.5], 0.0, 1),       // masked first: u = 0 takes the first valid one
            (&[0.0, 0.0, 1.0], 0.0, 2),       // two masked first
            (&[0.5, 0.5, 0.0], below_one, 1), // masked last: the largest draw stops at the last valid one
            (&[0.5, 0.0, 0.5], 0.5, 2),       // masked in the middle: a draw at its (equal) CDF skips it
            (&[0.5, 0.0, 0.5], 0.4999, 0),
            (&[0.3, 0.0, 0.0, 0.7], 0.3, 3),
            (&[0.25, 0.25, 0.25, 0.25], 0.0, 0),
            (&[0.25, 0.25, 0.25, 0.25], 0.25, 1),
            (&[0.25, 0.25, 0.25, 0.25], below_one, 3),
            (&[0.3, 0.3, 0.3, 0.0], below_one, 2), // a sum short of 1 (0.9): scaled, never past index 2
            (&[1e-30, 0.0, 1.0], below_one, 2),
        ];
        for &(probs, u, want) in cases {
            let got =
                super::invert_cdf(&Tensor::from_slice(probs).view([1, -1]), &Tensor::from_slice(&[u]).view([1, 1]));
            assert_eq!(got.int64_value(&[0]), want, "probs {probs:?}, u {u}");
        }
        // every draw of a fine grid over [0, 1), one row per masking pattern: no masked action drawn
        let u = Tensor::linspace(0.0, below_one as f64, 100_001, (tch::Kind::Float, tch::Device::Cpu)).view([-1, 1]);
        for probs in [[0.0, 0.2, 0.8, 0.0], [0.1, 0.0, 0.0, 0.9], [0.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]] {
            let rows = Tensor::from_slice(&probs).view([1, 4]).expand([100_001, 4], false);
            let actions = Vec::<i64>::try_from(super::invert_cdf(&rows, &u)).expect("i64 actions");
            assert!(actions.iter().all(|&a| probs[a as usize] > 0.0), "{probs:?}");
        }
    }

    /// numpy: np.var([1, 2, 3, 4]) == 1.25, np.var([3, 3]) == 0.
    #[test]
    fn var_is_numpys_population_variance() {
        assert_eq!(super::var([1.0, 2.0, 3.0, 4.0].into_iter()), 1.25);
        assert_eq!(super::var([3.0, 3.0].into_iter()), 0.0);
    }
}
