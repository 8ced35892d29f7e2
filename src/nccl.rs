//! NCCL for a data-parallel run's gradient all-reduce between GPUs: in place on each GPU, on
//! libtorch's stream, as torch.distributed's NCCL backend does it (over NVLink or the network,
//! never through host memory). MPI carries only the communicator's id.
//!
//! Exactly one NCCL per process: the `libnccl.so.2` that libtorch_cuda.so itself depends on, which
//! the loader brought in with libtorch (the torch wheel's, found through libtorch's own rpath). It
//! is looked up among the libraries already loaded (`RTLD_NOLOAD`), never loaded by name: a second
//! copy (another `libnccl.so` first on the loader's path, a system NCCL) beside libtorch's mixes
//! their state ("corrupted comm object detected"). A libtorch without CUDA brings no NCCL, and
//! then there is none. The entry points are resolved with libloading; the types are cudarc's.
use cudarc::nccl::sys::{ncclComm_t, ncclDataType_t, ncclRedOp_t, ncclUniqueId};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;
use tch::{Device, Kind, Tensor};

/// The soname libtorch_cuda.so names for NCCL (`readelf -d libtorch_cuda.so`).
const SONAME: &str = "libnccl.so.2";

/// NCCL's entry points in the copy libtorch loaded (results are `ncclResult_t`: 0 is success).
struct Api {
    get_version: unsafe extern "C" fn(*mut c_int) -> c_int,
    get_unique_id: unsafe extern "C" fn(*mut ncclUniqueId) -> c_int,
    comm_init_rank: unsafe extern "C" fn(*mut ncclComm_t, c_int, ncclUniqueId, c_int) -> c_int,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        ncclDataType_t,
        ncclRedOp_t,
        ncclComm_t,
        *mut c_void,
    ) -> c_int,
    comm_destroy: unsafe extern "C" fn(ncclComm_t) -> c_int,
    get_error_string: unsafe extern "C" fn(c_int) -> *const c_char,
    get_last_error: unsafe extern "C" fn(ncclComm_t) -> *const c_char,
}

/// libtorch's NCCL, if this process has loaded one (with libtorch_cuda.so, at start); looked up once.
fn api() -> Option<&'static Api> {
    static API: OnceLock<Option<Api>> = OnceLock::new();
    API.get_or_init(|| {
        use libloading::os::unix::{Library, RTLD_NOW};
        // SAFETY: RTLD_NOLOAD only finds a library already loaded: nothing new is loaded or initialized
        let lib = unsafe { Library::open(Some(SONAME), RTLD_NOW | libc::RTLD_NOLOAD) }.ok()?;
        // SAFETY: each name is NCCL's exported function of that signature (nccl.h, 2.13 or newer)
        let api = unsafe {
            Api {
                get_version: *lib.get(b"ncclGetVersion\0").ok()?,
                get_unique_id: *lib.get(b"ncclGetUniqueId\0").ok()?,
                comm_init_rank: *lib.get(b"ncclCommInitRank\0").ok()?,
                all_reduce: *lib.get(b"ncclAllReduce\0").ok()?,
                comm_destroy: *lib.get(b"ncclCommDestroy\0").ok()?,
                get_error_string: *lib.get(b"ncclGetErrorString\0").ok()?,
                get_last_error: *lib.get(b"ncclGetLastError\0").ok()?,
            }
        };
        std::mem::forget(lib); // libtorch keeps it loaded for the whole process; so do the pointers above
        Some(api)
    })
    .as_ref()
}

/// A failed NCCL call in NCCL's own words (`ncclGetErrorString`, `ncclGetLastError`), and what to try.
fn said(api: &Api, call: &str, result: c_int, comm: ncclComm_t) -> String {
    let text = |p: *const c_char| {
        // SAFETY: NCCL returns a NUL-terminated static string, or null
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().trim().to_string())
    };
    // SAFETY: both take any value; comm is this call's communicator or null
    let (what, last) = unsafe { (text((api.get_error_string)(result)), text((api.get_last_error)(comm))) };
    let mut line = format!("NCCL {call}: {}", what.unwrap_or_else(|| format!("error {result}")));
    if let Some(last) = last.filter(|l| !l.is_empty()) {
        line += &format!(" ({last})");
    }
    // ncclUnhandledCudaError; ncclSystemError, ncclRemoteError; the others: invalid arguments or usage, internal
    let try_this = match result {
        1 => "the GPUs or their driver failed: see nvidia-smi",
        2 | 6 => "a rank or the network between ranks failed: NCCL_SOCKET_IFNAME names the interface to use",
        _ => "NCCL was used wrongly: please report it",
    };
    format!("{line}; {try_this}, and rerun with NCCL_DEBUG=INFO for NCCL's log")
}

/// A communicator over the ranks of an MPI world, each rank on its own GPU.
pub struct Nccl {
    api: &'static Api,
    comm: ncclComm_t,
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
    if fail_id() {
        share_id(world, || Ok([0; 128]))?; // the testing aid: rank 0's id fails, on any device
    }
    let nccl = version().map_or("no NCCL: this libtorch has none".into(), |v| format!("NCCL {v}"));
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
                nccl.all_reduce_sum(t).unwrap_or_else(|e| crate::cli::fail(1, e));
                let _ = tch::no_grad(|| t.shallow_clone().g_div_scalar_(world.size() as f64));
            }
            AllReduce::Mpi => {
                let local = crate::device::to_host(t);
                let mut sum = vec![0f32; local.len()];
                world.all_reduce_into(&local[..], &mut sum[..], mpi::collective::SystemOperation::sum());
                let mean = Tensor::from_slice(&sum) / world.size() as f64;
                tch::no_grad(|| t.shallow_clone().copy_(&mean.view(t.size().as_slice()).to_device(t.device())));
            }
        }
    }
}

/// Rank 0's NCCL id, `make`'s, sent to every rank with its status: when rank 0 could not make one,
/// every rank gets rank 0's error, the same line, instead of waiting for an id that never comes.
/// Every rank calls this.
fn share_id(world: &SimpleCommunicator, make: impl FnOnce() -> Result<[u8; 128], String>) -> Result<[u8; 128], String> {
    const MESSAGE: usize = 512;
    // status (0: an id follows), the id, the message's length and the message
    let mut buf = [0u8; 1 + 128 + 2 + MESSAGE];
    if world.rank() == 0 {
        let made = if fail_id() { Err("ncclGetUniqueId failed (forced by the test suite)".into()) } else { make() };
        match made {
            Ok(id) => buf[1..129].copy_from_slice(&id),
            Err(e) => {
                let n = e.len().min(MESSAGE);
                buf[0] = 1;
                buf[129..131].copy_from_slice(&(n as u16).to_le_bytes());
                buf[131..131 + n].copy_from_slice(&e.as_bytes()[..n]);
            }
        }
    }
    world.process_at_rank(0).broadcast_into(&mut buf[..]);
    if buf[0] != 0 {
        let n = u16::from_le_bytes([buf[129], buf[130]]) as usize;
        return Err(format!("rank 0: {}", String::from_utf8_lossy(&buf[131..131 + n.min(MESSAGE)])));
    }
    Ok(buf[1..129].try_into().expect("128 bytes"))
}

/// `PPO_NCCL_FAIL_ID=1`, in the test suite's build only (the cargo feature `test-hooks`): rank 0 fails to make
/// NCCL's id, on any device, ranks on the CPU included, so that tests see every rank end with rank 0's line.
#[cfg(feature = "test-hooks")]
fn fail_id() -> bool {
    std::env::var("PPO_NCCL_FAIL_ID").is_ok_and(|v| v == "1")
}

#[cfg(not(feature = "test-hooks"))]
fn fail_id() -> bool {
    false
}

/// The version of libtorch's NCCL, `2.28.9` (`torch.cuda.nccl.version()`); none without one. No GPU
/// is needed to ask.
pub fn version() -> Option<String> {
    let api = api()?;
    let mut v = 0;
    // SAFETY: writes one int
    (unsafe { (api.get_version)(&mut v) } == 0).then_some(())?;
    Some(format!("{}.{}.{}", v / 10000, v / 100 % 100, v % 100)) // major * 10000 + minor * 100 + patch
}

/// `PPO_FORCE_ALLREDUCE=1`, in the test suite's build only (the cargo feature `test-hooks`): a run of one rank
/// all-reduces anyway (it skips it otherwise: the mean of one gradient is itself), so that one GPU can test the path.
#[cfg(feature = "test-hooks")]
pub fn forced() -> bool {
    std::env::var("PPO_FORCE_ALLREDUCE").is_ok_and(|v| v == "1")
}

/// A run of one rank skips the all-reduce: the mean of one gradient is itself.
#[cfg(not(feature = "test-hooks"))]
pub fn forced() -> bool {
    false
}

/// Why the ranks cannot all-reduce with NCCL on `device`, if they cannot: every rank must be on a
/// GPU of its own (NCCL refuses two ranks on one GPU) and load NCCL. Every rank calls this, and all
/// get the same answer.
fn why_not(world: &SimpleCommunicator, device: Device) -> Option<String> {
    let (local, why) = match device {
        Device::Cuda(i) if version().is_some() => (gpu_uuid(i), "not every rank is on a GPU with NCCL"),
        Device::Cuda(_) => (None, "this libtorch has no NCCL"),
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
        // what can fail on one rank is tried before the id is shared, and every rank reaches the
        // broadcast and the all-reduce below whatever failed: no rank waits for one that has left
        let ready = (|| -> Result<&'static Api, String> {
            let api = api().ok_or_else(|| "this libtorch has no NCCL".to_string())?;
            let cuda_said = |e: cudarc::driver::DriverError| format!("NCCL's GPU {index}: {e:?}");
            // NCCL works on the current GPU: this rank's, in the primary context libtorch uses too
            let dev = device::get(index as i32).map_err(cuda_said)?;
            // SAFETY: dev comes from device::get; the context stays retained for the process
            unsafe { primary_ctx::retain(dev).and_then(|c| ctx::set_current(c)) }.map_err(cuda_said)?;
            Ok(api)
        })();
        let shared = share_id(world, || {
            let api = ready.as_ref().map_err(Clone::clone)?;
            let mut id = ncclUniqueId { internal: [0; 128] };
            // SAFETY: writes one ncclUniqueId
            let result = unsafe { (api.get_unique_id)(&mut id) };
            match result {
                0 => Ok(id.internal.map(|c| c as u8)),
                _ => Err(said(api, "ncclGetUniqueId", result, std::ptr::null_mut())),
            }
        })?;
        let mut failed = [0u8];
        world.all_reduce_into(&[ready.is_err() as u8][..], &mut failed[..], mpi::collective::SystemOperation::max());
        let api = match ready {
            Err(e) => return Err(format!("rank {}: {e}", world.rank())),
            Ok(_) if failed[0] != 0 => return Err("another rank could not start NCCL (its line says why)".into()),
            Ok(api) => api,
        };
        let id = ncclUniqueId { internal: shared.map(|b| b as c_char) };
        let mut comm = std::ptr::null_mut();
        // SAFETY: comm receives the communicator; id is rank 0's, the same on every rank
        let result = unsafe { (api.comm_init_rank)(&mut comm, world.size(), id, world.rank()) };
        if result != 0 {
            return Err(said(api, "ncclCommInitRank", result, comm));
        }
        Ok(Nccl { api, comm })
    }

    /// Sums `t` over the ranks, in place on this rank's GPU, on libtorch's (default) stream: after the
    /// backward pass that wrote it, before anything that reads it.
    pub fn all_reduce_sum(&self, t: &Tensor) -> Result<(), String> {
        let on_gpu = matches!(t.device(), Device::Cuda(_)) && t.kind() == Kind::Float && t.is_contiguous();
        if !on_gpu {
            return Err("NCCL all-reduces a contiguous f32 tensor on a GPU".into());
        }
        let (ptr, count) = (t.data_ptr(), t.numel());
        let (float, sum) = (ncclDataType_t::ncclFloat32, ncclRedOp_t::ncclSum);
        // SAFETY: ptr holds count f32 on this communicator's GPU, alive for the call (stream-ordered)
        let result = unsafe { (self.api.all_reduce)(ptr, ptr, count, float, sum, self.comm, std::ptr::null_mut()) };
        match result {
            0 => Ok(()),
            _ => Err(said(self.api, "all-reduce", result, self.comm)),
        }
    }
}

impl Drop for Nccl {
    fn drop(&mut self) {
        // SAFETY: the communicator is this value's, used by no one after it
        let _ = unsafe { (self.api.comm_destroy)(self.comm) };
    }
}

#[cfg(test)]
mod tests {
    /// libtorch's NCCL is found among the loaded libraries in a process built as the binaries are
    /// (build.rs keeps libtorch_cuda.so, which brings it), with no GPU needed; a libtorch without
    /// CUDA has none.
    #[test]
    fn libtorchs_nccl_is_found() {
        if !tch::utils::has_cudart() {
            return;
        }
        let version = super::version().expect("libnccl.so.2, loaded with libtorch_cuda.so");
        assert!(version.starts_with("2."), "{version}");
        // one NCCL in the process: the file libtorch_cuda.so's rpath names, nothing beside it
        let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
        let mut files: Vec<&str> = maps.lines().filter_map(|l| l.split_whitespace().nth(5)).collect();
        files.retain(|f| f.contains("libnccl"));
        files.dedup();
        assert_eq!(files.len(), 1, "{files:?}");
        assert!(files[0].contains("nvidia/nccl/lib/libnccl.so.2"), "{files:?}");
    }
}
