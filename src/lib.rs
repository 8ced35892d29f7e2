//! The library of the ppo-details binaries: what is not PPO and is the same for every variant, as
//! CleanRL takes `torch.optim`, `SummaryWriter`, `tyro` and `cleanrl_utils` from its libraries. Every
//! PPO detail lives in the binaries, at the line where it acts; nothing here names a binary.
//!
//! - [`optim`]: torch.optim.Adam's steps on the parameters held in one flat vector, and gradient-norm clipping.
//! - [`cli`]: the experiment's flags and their parsing (with `--resume`'s arguments), the combinations of flags
//!   that cannot work, [`experiment!`] and the thread defaults it names ([`all_cores`]); how a process ends
//!   ([`fail`]: one line and an exit code).
//! - [`flags`]: value parsers, the range in which each numeric flag can work.
//! - [`logs`]: the run directory: args.json, the CSVs, TensorBoard events, the progress bar, the saved model and
//!   the evaluation ([`play`]); when a checkpoint is written; several seeds' or processes' logs in one; writes
//!   that a crash leaves whole.
//! - [`checkpoint`]: the checkpoint's file (written, read back and checked), where the loop starts
//!   ([`Start`]: weights, Adam's state, the learning rate, statistics, seed).
//! - `resume_logs`: `--resume`'s logs cut back to the checkpoint, TensorBoard's events rebuilt from the CSVs.
//! - `lock`: one writer per run directory (an advisory lock the OS releases with the process).
//! - `signals`: Ctrl-C and SIGTERM end a run with one line saying how to resume it.
//! - [`trace`]: `PPO_TRACE=FILE`, a run's first updates in a file, to compare with CleanRL's (docs/runs.md).
//! - [`device`]: the device `--cuda` gets, and why, in words (the NVIDIA driver asked through
//!   cudarc); `--torch-deterministic` in libtorch's global context; tensors between host and device.
//! - [`nccl`]: a data-parallel run's gradient all-reduce between GPUs (or through MPI).
//! - [`ranks`]: the ranks of a run over MPI, a data-parallel run's (reductions, broadcast, episodes, sync
//!   check) and a learner's with its workers' (rollouts gathered, the CPU random stream handed over).
//! - `openmp`: `GOMP_SPINCOUNT` set before libgomp reads it, however a binary starts (its ELF preinit array).
//! - [`distributions`]: torch.distributions' Categorical and Normal, operation for operation.
//! - `stats`: [`var`], numpy's.

pub mod checkpoint;
pub mod cli;
pub mod device;
pub mod distributions;
pub mod flags;
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
pub use cli::{all_cores, fail, parse_args, says_bad_input, unix_time, Experiment, Failure, OrExit, RunArgs};
pub use device::{memory_available, pick_device, read_host, to_host, torch_deterministic, upload, Network};
pub use logs::{play, Logged, RunLog};
pub use optim::FlatAdam;
pub use stats::var;
pub use trace::Trace;

/// The process's memory allocator. libtorch allocates and frees memory for every tensor it makes, several per
/// operation: mimalloc, which replaces malloc for the whole process (libtorch included), does that faster than
/// glibc's (same results; HalfCheetah-v4 learning time -13%).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
