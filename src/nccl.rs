//! NCCL for a data-parallel run's gradient all-reduce between GPUs: in place on each GPU, on
//! libtorch's stream, as torch.distributed's NCCL backend does it (over NVLink or the network,
//! never through host memory). MPI carries only the communicator's id. cudarc loads libnccl (the
//! torch wheel's, build.rs) at run time, so a machine without it builds and runs the same.

use cudarc::nccl::{result, sys};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use tch::{Device, Kind, Tensor};

/// A communicator over the ranks of an MPI world, each rank on its own GPU.
pub struct Nccl {
    comm: sys::ncclComm_t,
}

/// How a data-parallel run sums its gradients over the ranks.
pub enum AllReduce {
    /// one rank: nothing to sum
    Skip,
    /// on the GPUs themselves
    Nccl(Nccl),
    /// MPI, through host memory
    Mpi,
}

/// How the ranks of `world`, each on its `device`, sum gradients, and that in words for the device
/// line; every rank calls this, and all get the same answer. NCCL when every rank is on a GPU of
/// its own, MPI otherwise; nothing for one rank ([`forced`] makes it all-reduce anyway).
pub fn all_reduce(world: &SimpleCommunicator, device: Device) -> Result<(AllReduce, String), String> {
    let why_not = why_not(world, device); // every rank takes part, whatever it then does
    let nccl = version().map_or("NCCL does not load".into(), |v| format!("NCCL {v}"));
    Ok(match why_not {
        _ if world.size() == 1 && !forced() => (AllReduce::Skip, format!("one rank, no all-reduce ({nccl})")),
        None => (AllReduce::Nccl(Nccl::new(world, device)?), format!("gradients all-reduced by {nccl} on the GPUs")),
        Some(why) => (AllReduce::Mpi, format!("gradients all-reduced by MPI through host memory ({why}; {nccl})")),
    })
}

impl AllReduce {
    /// `t` (a flat gradient) summed over the ranks and divided by their number, in place, as CleanRL's
    /// `dist.all_reduce(grad)` then `grad /= world_size`: with NCCL on the GPUs themselves; with MPI
    /// through host memory otherwise (the trip there and back). Every rank calls it. Fails with exit code 1.
    pub fn mean(&self, world: &SimpleCommunicator, t: &Tensor) {
        match self {
            AllReduce::Skip => {}
            AllReduce::Nccl(nccl) => {
                nccl.all_reduce_sum(t).unwrap_or_else(|e| crate::fail(1, e));
                let _ = tch::no_grad(|| t.shallow_clone().g_div_scalar_(world.size() as f64));
            }
            AllReduce::Mpi => {
                let local = crate::to_host(t);
                let mut sum = vec![0f32; local.len()];
                world.all_reduce_into(&local[..], &mut sum[..], mpi::collective::SystemOperation::sum());
                let mean = Tensor::from_slice(&sum) / world.size() as f64;
                tch::no_grad(|| t.shallow_clone().copy_(&mean.view(t.size().as_slice()).to_device(t.device())));
            }
        }
    }
}

/// NCCL's version, `2.28.3`, when the library loads here (it needs no GPU for that).
pub fn version() -> Option<String> {
    // SAFETY: only tries to load the library
    if !unsafe { sys::is_culib_present() } {
        return None;
    }
    let v = result::get_nccl_version().ok()?; // major * 10000 + minor * 100 + patch
    Some(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100))
}

/// `PPO_FORCE_ALLREDUCE=1`: a run of one rank all-reduces anyway (it skips it otherwise: the mean
/// of one gradient is itself), so that one GPU can test the path.
pub fn forced() -> bool {
    std::env::var("PPO_FORCE_ALLREDUCE").is_ok_and(|v| v == "1")
}

/// Why the ranks cannot all-reduce with NCCL on `device`, if they cannot: every rank must be on a
/// GPU of its own (NCCL refuses two ranks on one GPU) and load NCCL. Every rank calls this, and all
/// get the same answer.
fn why_not(world: &SimpleCommunicator, device: Device) -> Option<String> {
    let (local, why) = match device {
        Device::Cuda(i) if version().is_some() => (gpu_uuid(i), "not every rank is on a GPU with NCCL"),
        Device::Cuda(_) => (None, "NCCL does not load"),
        _ => (None, "the ranks are on the CPU"),
    };
    let mut all = vec![0u8; 16 * world.size() as usize];
    world.all_gather_into(&local.unwrap_or([0; 16])[..], &mut all[..]);
    let uuids: Vec<&[u8]> = all.chunks(16).collect();
    if uuids.iter().any(|u| u.iter().all(|&b| b == 0)) {
        Some(why.into())
    } else if (1..uuids.len()).any(|i| uuids[..i].contains(&uuids[i])) {
        Some("two ranks share a GPU, which NCCL refuses".into())
    } else {
        None
    }
}

/// GPU `index`'s UUID, as the driver gives it (none: it does not).
fn gpu_uuid(index: usize) -> Option<[u8; 16]> {
    let uuid = cudarc::driver::result::device::get(index as i32).and_then(cudarc::driver::result::device::get_uuid);
    uuid.ok().map(|u| u.bytes.map(|b| b as u8)).filter(|u| u.iter().any(|&b| b != 0))
}

impl Nccl {
    /// The communicator of the ranks of `world`, this rank on GPU `device` (every rank calls this,
    /// once `why_not` said none; it waits for all of them).
    pub fn new(world: &SimpleCommunicator, device: Device) -> Result<Nccl, String> {
        use cudarc::driver::result::{ctx, device, primary_ctx};
        let Device::Cuda(index) = device else { return Err("NCCL needs a GPU".into()) };
        let said = |e: &dyn std::fmt::Debug| format!("NCCL: {e:?}");
        // NCCL works on the current GPU: this rank's, in the primary context libtorch uses too
        let dev = device::get(index as i32).map_err(|e| said(&e))?;
        // SAFETY: dev comes from device::get; the context stays retained for the process
        unsafe { primary_ctx::retain(dev).and_then(|c| ctx::set_current(c)) }.map_err(|e| said(&e))?;
        let mut id = if world.rank() == 0 {
            result::get_uniqueid().map_err(|e| said(&e))?
        } else {
            sys::ncclUniqueId { internal: [0; 128] }
        };
        let mut bytes = id.internal.map(|c| c as u8);
        world.process_at_rank(0).broadcast_into(&mut bytes[..]);
        id.internal = bytes.map(|b| b as std::ffi::c_char);
        let mut comm = std::ptr::null_mut();
        // SAFETY: comm receives the communicator; id is rank 0's, the same on every rank
        unsafe { result::comm_init_rank(&mut comm, world.size(), id, world.rank()) }.map_err(|e| said(&e))?;
        Ok(Nccl { comm })
    }

    /// Sums `t` over the ranks, in place on this rank's GPU, on libtorch's (default) stream: after the
    /// backward pass that wrote it, before anything that reads it.
    pub fn all_reduce_sum(&self, t: &Tensor) -> Result<(), String> {
        let on_gpu = matches!(t.device(), Device::Cuda(_)) && t.kind() == Kind::Float && t.is_contiguous();
        if !on_gpu {
            return Err("NCCL all-reduces a contiguous f32 tensor on a GPU".into());
        }
        let (ptr, count) = (t.data_ptr(), t.numel());
        let (float, sum) = (sys::ncclDataType_t::ncclFloat32, sys::ncclRedOp_t::ncclSum);
        // SAFETY: ptr holds count f32 on this communicator's GPU, alive for the call (stream-ordered)
        unsafe { result::all_reduce(ptr, ptr, count, float, sum, self.comm, std::ptr::null_mut()) }
            .map(|_| ())
            .map_err(|e| format!("NCCL all-reduce: {e:?}"))
    }
}

impl Drop for Nccl {
    fn drop(&mut self) {
        // SAFETY: the communicator is this value's, used by no one after it
        let _ = unsafe { result::comm_destroy(self.comm) };
    }
}

#[cfg(test)]
mod tests {
    /// The torch wheel's NCCL loads in a process built as the binaries are (build.rs's link), with
    /// no GPU needed; a libtorch without CUDA ships none.
    #[test]
    fn the_wheels_nccl_loads() {
        if !tch::utils::has_cudart() {
            return;
        }
        let version = super::version().expect("libnccl.so.2 from the torch wheel loads");
        assert!(version.starts_with("2."), "{version}");
    }
}
