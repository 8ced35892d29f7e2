//! The ranks of a data-parallel run over MPI, as torch.distributed's collectives serve CleanRL's
//! `ppo_atari_multigpu.py`: a few numbers reduced over the ranks, rank 0's weights copied to all,
//! every rank's episodes gathered on rank 0, and baselines' check that all ranks hold the same
//! weights. (The gradient's all-reduce is [`crate::nccl::AllReduce::mean`].)

use crate::to_host;
use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use tch::Tensor;

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

/// Rank 0's `t` (the flat weights) copied to every rank.
pub fn broadcast_from_rank_0(world: &SimpleCommunicator, t: &Tensor) {
    let mut host = to_host(t);
    world.process_at_rank(0).broadcast_into(&mut host[..]);
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

/// Baselines' check_synced: a hash of each rank's weights, bit for bit; they agree when the
/// smallest hash over the ranks equals the largest.
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
