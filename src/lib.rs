//! The library of the ppo-details binaries: what is not PPO and is the same for every variant, as
//! CleanRL takes `torch.optim`, `SummaryWriter`, `tyro` and `cleanrl_utils` from its libraries. Every
//! PPO detail lives in the binaries, at the line where it acts; nothing here names a binary.
//!
//! - [`optim`]: Adam over one flat vector of the parameters, and gradient-norm clipping.
//! - [`cli`]: the experiment's flags and their parsing (with `--resume`'s arguments), [`experiment!`] and the
//!   thread defaults it names ([`all_cores`]).
//! - [`logs`]: the run directory: args.json, the CSVs, TensorBoard events, the progress bar, the saved model and
//!   the evaluation ([`play`]); when a checkpoint is written; several seeds' or processes' logs in one.
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
//! - `exit`: [`fail`], one line and an exit code.
//! - `host`: tensors between host and device, [`to_host`], [`read_host`], [`upload`].
//! - `stats`: [`categorical_sample`] (torch.distributions') and [`var`] (numpy's).
//! - `allocator`: mimalloc, the process's allocator.
//!
//! This file only declares the modules and re-exports what the binaries call (`tests/library.rs` keeps it so).

mod allocator;
pub mod checkpoint;
pub mod checks;
pub mod cli;
pub mod device;
mod durable;
mod exit;
pub mod flags;
mod host;
mod lock;
pub mod logs;
pub mod nccl;
mod openmp;
pub mod optim;
pub mod ranks;
mod resume_logs;
mod signals;
mod stats;
pub mod trace;

pub use checkpoint::Start;
pub use cli::{all_cores, parse_args, unix_time, Experiment, RunArgs};
pub use device::{memory_available, pick_device, torch_deterministic, Network};
pub use exit::{fail, says_bad_input};
pub use host::{read_host, to_host, upload};
pub use logs::{eval::play, Logged, RunLog};
pub use optim::FlatAdam;
pub use stats::{categorical_sample, invert_cdf, var};
pub use trace::Trace;
