//! The ranks of a run over MPI, as torch.distributed's collectives serve CleanRL's
//! `ppo_atari_multigpu.py` and torch.multiprocessing's queues miniDRL: a few numbers reduced over
//! the ranks, rank 0's weights copied to all, every rank's episodes or tensors gathered on rank 0,
//! libtorch's CPU random stream handed from one rank to another, and baselines' check that all
//! ranks hold the same weights. (The gradient's all-reduce is [`crate::nccl::AllReduce::mean`].)

use crate::{cli::fail, device::to_host};
use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::request::{Request, Scope};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use tch::Tensor;

/// MPI started for this process (one rank without mpirun). A panic then aborts the process, so that
/// mpirun ends the job, instead of unwinding into MPI's finalize, which would wait for the other ranks
/// forever while they wait for this one.
pub fn initialize() -> mpi::environment::Universe {
    let universe = mpi::initialize().unwrap_or_else(|| fail(1, "MPI was initialized twice"));
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        std::process::abort();
    }));
    universe
}

/// [`initialize`], then this process on every core of the machine, whatever core mpirun bound it to (it binds
/// each process to a core of its own when there are no more than cores): for ranks that take turns, a learner
/// and its workers, each idle while the others work, so that the learner's update may use the cores the
/// waiting workers leave, and a worker its envs' threads. Threads started afterwards inherit it.
pub fn initialize_unbound() -> mpi::environment::Universe {
    let universe = initialize();
    // SAFETY: a zeroed cpu_set_t is the empty set; CPU_SET stays within CPU_SETSIZE; the call reads the set
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..(libc::sysconf(libc::_SC_NPROCESSORS_CONF).max(1) as usize).min(libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        // refused: stays as it was
    }
    universe
}

/// A few numbers reduced over the ranks by `op` (sum, max), the result on every rank.
pub fn all_reduce(world: &SimpleCommunicator, values: &[f64], op: SystemOperation) -> Vec<f64> {
    let mut reduced = vec![0f64; values.len()];
    world.all_reduce_into(values, &mut reduced[..], op);
    reduced
}

/// A number's mean over the ranks (summed, then divided by their number, in f64), on every rank.
pub fn mean_of_ranks(world: &SimpleCommunicator, value: f64) -> f64 {
    all_reduce(world, &[value], SystemOperation::sum())[0] / world.size() as f64
}

/// Rank 0's `t` (the flat weights) copied to every rank (alone, a rank has nothing to do).
pub fn broadcast_from_rank_0(world: &SimpleCommunicator, t: &Tensor) {
    if world.size() == 1 {
        return;
    }
    let mut host = to_host(t);
    mpi::request::scope(|scope| wait_idle(world.process_at_rank(0).immediate_broadcast_into(scope, &mut host[..])));
    tch::no_grad(|| {
        t.shallow_clone().copy_(&Tensor::from_slice(&host).view(t.size().as_slice()).to_device(t.device()))
    });
}

/// Every rank's finished episodes (global step, return, length) on rank 0, in rank order, each with
/// its rank; the other ranks get none.
pub fn gather_episodes(world: &SimpleCommunicator, mine: &[(u64, f64, u64)]) -> Vec<(usize, u64, f64, u64)> {
    let flat: Vec<f64> = mine.iter().flat_map(|&(step, r, l)| [step as f64, r, l as f64]).collect();
    let mut counts = vec![0i32; world.size() as usize];
    world.all_gather_into(&(flat.len() as i32), &mut counts[..]);
    let root = world.process_at_rank(0);
    if world.rank() != 0 {
        root.gather_varcount_into(&flat[..]);
        return Vec::new();
    }
    let displs: Vec<i32> = counts.iter().scan(0, |next, &c| Some(std::mem::replace(next, *next + c))).collect();
    let mut all = vec![0f64; counts.iter().sum::<i32>() as usize];
    root.gather_varcount_into_root(&flat[..], &mut PartitionMut::new(&mut all[..], &counts[..], &displs[..]));
    let rank_of = |row: usize| displs.iter().rposition(|&d| d as usize <= 3 * row).unwrap_or(0);
    all.chunks(3).enumerate().map(|(row, e)| (rank_of(row), e[0] as u64, e[1], e[2] as u64)).collect()
}

/// After baselines' check_synced (which compares rank 0's weights every 100th step): a hash of each rank's
/// weights, bit for bit, after every update; they agree when the smallest hash over the ranks equals the largest.
pub fn weights_in_sync(world: &SimpleCommunicator, flat: &Tensor) -> bool {
    // FNV-1a over the weights' bits
    let hash = to_host(flat)
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, w| (h ^ w.to_bits() as u64).wrapping_mul(0x100_0000_01b3));
    let (mut min, mut max) = (0u64, 0u64);
    world.all_reduce_into(&hash, &mut min, SystemOperation::min());
    world.all_reduce_into(&hash, &mut max, SystemOperation::max());
    min == max
}

/// A rank's tensors by name, as [`gather_tensors`] delivers them.
pub type Named = std::collections::BTreeMap<String, Tensor>;

/// Every rank's named `parts` on rank 0, in rank order, each rank's by the names it sent them under
/// (kinds and shapes travel with the values, in libtorch's own serialization), but for the ranks that
/// sent none; the other ranks get none. One gather of the bytes, after one of their lengths; alone, a
/// rank keeps its own.
pub fn gather_tensors(world: &SimpleCommunicator, parts: &[(&str, Tensor)]) -> Vec<Named> {
    if world.size() == 1 {
        return vec![parts.iter().map(|(name, t)| (name.to_string(), t.shallow_clone())).collect()];
    }
    let mut bytes = Vec::new();
    let named: Vec<(&str, &Tensor)> = parts.iter().map(|(name, t)| (*name, t)).collect();
    if !named.is_empty() {
        let saved = Tensor::save_multi_to_stream(&named, &mut bytes);
        saved.unwrap_or_else(|e| fail(1, format!("cannot serialize this rank's tensors: {e}")));
    }
    let mut counts = vec![0i32; world.size() as usize];
    let count = i32::try_from(bytes.len()).unwrap_or_else(|_| fail(1, "a rank's tensors exceed 2 GiB: fewer steps"));
    mpi::request::scope(|scope| wait_idle(world.immediate_all_gather_into(scope, &count, &mut counts[..])));
    let root = world.process_at_rank(0);
    if world.rank() != 0 {
        mpi::request::scope(|scope| wait_idle(root.immediate_gather_varcount_into(scope, &bytes[..])));
        return Vec::new();
    }
    let displs: Vec<i32> = counts.iter().scan(0, |next, &c| Some(std::mem::replace(next, *next + c))).collect();
    let mut all = vec![0u8; counts.iter().map(|&c| c as usize).sum()];
    let mut into = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
    mpi::request::scope(|scope| wait_idle(root.immediate_gather_varcount_into_root(scope, &bytes[..], &mut into)));
    let load = |(d, c): (&i32, &i32)| -> Named {
        if *c == 0 {
            return Named::new();
        }
        let stream = std::io::Cursor::new(&all[*d as usize..(*d + *c) as usize]);
        let loaded =
            Tensor::load_multi_from_stream(stream).unwrap_or_else(|e| fail(1, format!("a rank's tensors: {e}")));
        loaded.into_iter().collect()
    };
    displs.iter().zip(&counts).map(load).filter(|parts| !parts.is_empty()).collect()
}

extern "C" {
    fn ppo_cpu_rng_state(out: *mut u8, cap: usize) -> usize;
    fn ppo_set_cpu_rng_state(state: *const u8, n: usize);
}

/// libtorch's CPU random stream (its default generator's state, torch.get_rng_state) handed from
/// rank `from` to rank `to`, which then draws what `from` would have drawn next; alone, or from a
/// rank to itself, nothing.
pub fn hand_cpu_rng(world: &SimpleCommunicator, from: usize, to: usize) {
    if from == to || world.size() == 1 {
        return;
    }
    let rank = world.rank() as usize;
    if rank == from {
        // SAFETY: a null buffer of capacity 0 is only sized; then the state is copied into `state`
        let mut state = vec![0u8; unsafe { ppo_cpu_rng_state(std::ptr::null_mut(), 0) }];
        unsafe { ppo_cpu_rng_state(state.as_mut_ptr(), state.len()) };
        world.process_at_rank(to as i32).send(&state[..]);
    } else if rank == to {
        let (state, _) = world.process_at_rank(from as i32).receive_vec::<u8>();
        // SAFETY: `state` holds the bytes another rank's ppo_cpu_rng_state wrote
        unsafe { ppo_set_cpu_rng_state(state.as_ptr(), state.len()) };
    }
}

/// Waits for `request` without holding a core: MPI's blocking calls poll without pause, and where a machine
/// runs as many processes as cores, a rank waiting so (a worker through the learner's update, the learner
/// through the rollouts) takes the core the working rank's threads need. Tests it every 200 us instead.
fn wait_idle<'a, D: ?Sized, S: Scope<'a>>(mut request: Request<'a, D, S>) {
    loop {
        match request.test() {
            Ok(_) => return,
            Err(pending) => request = pending,
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}
