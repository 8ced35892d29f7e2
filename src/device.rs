//! The device line: which device `--cuda` gets, and why, in words; and libtorch's GPU settings.
//!
//! libtorch sees no GPU when the NVIDIA driver is older than its CUDA, and picks a GPU it has no
//! kernels for (then fails at the first kernel). So the driver is asked directly, through cudarc's
//! driver API (loaded at run time: a machine without the driver builds and runs the same), for its
//! CUDA version and each GPU's name and compute capability, and an unusable GPU is named with the
//! reason and the command that installs a libtorch for it.

use std::sync::atomic::{AtomicBool, Ordering};
use tch::{kind::Element, Device, Kind, Tensor};

/// This libtorch's CUDA version (`torch.version.cuda`; none: built without CUDA), from build.rs.
const TORCH_CUDA: Option<&str> = option_env!("PPO_TORCH_CUDA");
/// The GPU architectures this libtorch has kernels for (`torch._C._cuda_getArchFlags()`), from build.rs.
const TORCH_ARCHS: Option<&str> = option_env!("PPO_TORCH_ARCHS");
/// The libtorch for drivers of CUDA 12 and for GPUs older than CUDA 13 supports (compute capability below 7.5).
const CUDA_12_INDEX: &str = "https://download.pytorch.org/whl/cu126";

/// Whether `--cuda` was given on the command line (set by `parse_args`): then a GPU that cannot be
/// used is an error, not a quiet fall back to the CPU.
pub(crate) static CUDA_ASKED: AtomicBool = AtomicBool::new(false);

/// A GPU as the driver describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    pub name: String,
    /// (major, minor): 9.0 for an H100
    pub capability: (i32, i32),
}

/// What the NVIDIA driver says: the newest CUDA it supports, (13, 0) for 13.0, and its GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct Driver {
    pub cuda: (i32, i32),
    pub gpus: Vec<Gpu>,
}

/// Asks the NVIDIA driver (libcuda, loaded now if present); `Err` says why there is nothing to ask.
pub fn driver() -> Result<Driver, String> {
    use cudarc::driver::{result, sys};
    // SAFETY: only tries to load the library
    if !unsafe { sys::is_culib_present() } {
        return Err("no NVIDIA driver: libcuda.so.1 is not installed".into());
    }
    let said = |e: result::DriverError| e.error_string().map_or(format!("{e:?}"), |s| s.to_string_lossy().into_owned());
    match result::init() {
        Err(e) if e.0 == sys::cudaError_enum::CUDA_ERROR_NO_DEVICE => {
            return Err("the NVIDIA driver sees no GPU".into())
        }
        Err(e) => return Err(format!("the NVIDIA driver does not start: {}", said(e))),
        Ok(()) => {}
    }
    let mut version = 0;
    // SAFETY: cuInit succeeded; the call writes one int
    unsafe { sys::cuDriverGetVersion(&mut version) }.result().map_err(said)?;
    let mut gpus = Vec::new();
    for i in 0..result::device::get_count().map_err(said)? {
        let device = result::device::get(i).map_err(said)?;
        let attribute = |a| unsafe { result::device::get_attribute(device, a) }.map_err(said);
        let major = attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        gpus.push(Gpu { name: result::device::get_name(device).map_err(said)?, capability: (major, minor) });
    }
    Ok(Driver { cuda: (version / 1000, version % 1000 / 10), gpus })
}

/// Why this libtorch cannot use `gpu` under `driver`, with the fix; none when it can.
pub fn unusable(driver: &Driver, gpu: &Gpu) -> Option<String> {
    let torch: (i32, i32) = TORCH_CUDA.and_then(parse_version)?;
    let (major, minor) = driver.cuda;
    if major < torch.0 {
        let fix = if major == 12 {
            format!("`scripts/setup --torch-index {CUDA_12_INDEX}` installs a libtorch for it, or")
        } else {
            "no torch 2.11.0 build runs on it:".into()
        };
        let (t, tm) = torch;
        return Some(format!(
            "{} is unusable: the NVIDIA driver supports CUDA {major}.{minor}, this libtorch needs CUDA {t}.{tm}; {fix} \
             update the driver (CUDA {t} needs 580 or newer)",
            gpu.name
        ));
    }
    let archs = TORCH_ARCHS?;
    let (cc_major, cc_minor) = gpu.capability;
    // a kernel built for sm_XY runs on every GPU of major X and minor Y or above; PTX (compute_XY) on any newer
    let arch = |a: &str| -> Option<(bool, i32, i32)> {
        let (ptx, digits) = match a.strip_prefix("compute_") {
            Some(digits) => (true, digits),
            None => (false, a.strip_prefix("sm_")?),
        };
        let n: i32 = digits.trim_end_matches(|c: char| !c.is_ascii_digit()).parse().ok()?; // sm_90a: 90
        Some((ptx, n / 10, n % 10))
    };
    let runs = archs.split(' ').filter_map(arch).any(|(ptx, x, y)| {
        if ptx {
            (x, y) <= (cc_major, cc_minor)
        } else {
            x == cc_major && y <= cc_minor
        }
    });
    (!runs).then(|| {
        let fix = if (cc_major, cc_minor) < (7, 5) {
            format!("`scripts/setup --torch-index {CUDA_12_INDEX}` installs a libtorch with kernels for older GPUs")
        } else {
            "a newer torch has kernels for it".into()
        };
        let name = &gpu.name;
        let why = format!("this libtorch has kernels for {archs} only, so its first kernel would fail");
        format!("{name} (compute capability {cc_major}.{cc_minor}) is unusable: {why}; {fix}")
    })
}

fn parse_version(v: &str) -> Option<(i32, i32)> {
    let (major, minor) = v.split_once('.')?;
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The kind of network a binary trains, for the device line's advice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Network {
    /// small fully connected layers: a GPU's launch and copy costs outweigh its arithmetic
    Mlp,
    /// convolutions over images: what a GPU is for
    Cnn,
}

/// The device `--cuda` asks for, and why, in words for the line printed at start and args.json: the
/// first GPU when libtorch has CUDA and can use it, the CPU otherwise. A GPU this libtorch cannot use
/// (the driver too old for its CUDA, a compute capability it has no kernels for) is named with the
/// reason; the run goes on on the CPU, or with `--cuda` given on the command line exits with code 2.
/// An [`Network::Mlp`] put on a GPU by the default (`--cuda` not given) is told the CPU is usually faster.
pub fn pick_device(cuda: bool, network: Network) -> (Device, String) {
    if !cuda {
        return (Device::Cpu, "cpu (--cuda false)".into());
    }
    if !tch::utils::has_cudart() {
        return (Device::Cpu, "cpu (this libtorch is built without CUDA)".into());
    }
    let driver = match driver() {
        Ok(driver) => driver,
        Err(why) => return (Device::Cpu, format!("cpu ({why})")),
    };
    if let Some(why) = driver.gpus.first().and_then(|gpu| unusable(&driver, gpu)) {
        if CUDA_ASKED.load(Ordering::Relaxed) {
            crate::cli::fail(2, format!("--cuda: GPU 0, {why}"));
        }
        return (Device::Cpu, format!("cpu (GPU 0, {why})"));
    }
    if tch::Cuda::device_count() == 0 {
        return (Device::Cpu, "cpu (the CUDA runtime is loaded, but no GPU is visible)".into());
    }
    let advice = advice(network, CUDA_ASKED.load(Ordering::Relaxed));
    (Device::Cuda(0), format!("cuda:0 ({}){advice}", describe(&driver, 0)))
}

/// What the device line adds for `network` on a GPU: for an MLP the default put there, that the CPU
/// usually trains it faster (CleanRL's benchmarks run its MLP scripts with `--no-cuda`; on an H200
/// machine CartPole ran 3.8x and HalfCheetah 4.5x faster on the CPU, docs/gpu.md); nothing when the
/// user asked for the GPU.
fn advice(network: Network, cuda_asked: bool) -> &'static str {
    match (network, cuda_asked) {
        (Network::Mlp, false) => {
            "; an MLP this small usually trains faster on the CPU: --cuda false (scripts/bench_devices compares both)"
        }
        _ => "",
    }
}

/// The device line of GPU `index` (a rank's of a data-parallel run): `cuda:N (name, ...)`. A GPU
/// this libtorch cannot use is one line, exit code 2 (the rank was given it).
pub fn gpu_line(index: usize) -> String {
    let driver = driver().unwrap_or_else(|why| crate::cli::fail(1, format!("GPU {index}: {why}")));
    if let Some(why) = driver.gpus.get(index).and_then(|gpu| unusable(&driver, gpu)) {
        crate::cli::fail(2, format!("GPU {index}, {why}"));
    }
    format!("cuda:{index} ({})", describe(&driver, index))
}

/// The GPU of rank `local_rank` of this machine in a data-parallel run: `device_ids[local_rank]`
/// (`--device-ids`), or by default local_rank modulo the GPUs' number; with its device line. A GPU
/// the list cannot give is one line, exit code 2.
pub fn rank_gpu(local_rank: usize, device_ids: &[usize]) -> (Device, String) {
    let count = tch::Cuda::device_count() as usize;
    let index = match device_ids {
        [] => local_rank % count,
        ids => match ids.get(local_rank) {
            Some(&i) if i < count => i,
            Some(&i) => crate::cli::fail(2, format!("--device-ids names GPU {i}, but this machine has {count}")),
            None => crate::cli::fail(
                2,
                format!("--device-ids names no GPU for local rank {local_rank} ({} given)", ids.len()),
            ),
        },
    };
    (Device::Cuda(index), gpu_line(index))
}

/// GPU `index` for the device line: its name, compute capability and the driver's CUDA.
pub fn describe(driver: &Driver, index: usize) -> String {
    let (major, minor) = driver.cuda;
    match driver.gpus.get(index) {
        Some(Gpu { name, capability: (x, y) }) => {
            format!("{name}, compute capability {x}.{y}, driver CUDA {major}.{minor}")
        }
        None => format!("GPU {index}, which the driver does not list"),
    }
}

extern "C" {
    fn ppo_set_cudnn_deterministic(on: bool);
    fn ppo_cudnn_deterministic() -> bool;
    fn ppo_cudnn_benchmark() -> bool;
    fn ppo_cudnn_allow_tf32() -> bool;
    fn ppo_cublas_allow_tf32() -> bool;
}

/// `--torch-deterministic`, as CleanRL's `torch.backends.cudnn.deterministic = args.torch_deterministic`:
/// cuDNN's deterministic algorithms, so that two GPU runs of one seed give the same metrics; the autotuner off
/// with it (PyTorch's default) and, unlike CleanRL (which leaves it off), on without it. (CPU runs are
/// deterministic either way.)
pub fn torch_deterministic(on: bool) {
    tch::Cuda::cudnn_set_benchmark(!on);
    // SAFETY: sets a flag of libtorch's global context (src/cpp/context.cpp)
    unsafe { ppo_set_cudnn_deterministic(on) }
}

/// libtorch's GPU settings: (cuDNN deterministic, cuDNN benchmark, TF32 in cuDNN, TF32 in cuBLAS).
pub fn gpu_settings() -> (bool, bool, bool, bool) {
    // SAFETY: reads flags of libtorch's global context
    unsafe { (ppo_cudnn_deterministic(), ppo_cudnn_benchmark(), ppo_cudnn_allow_tf32(), ppo_cublas_allow_tf32()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--torch-deterministic` sets what CleanRL's flag sets (and the autotuner), read back from libtorch's context;
    /// TF32 stays as PyTorch (and so CleanRL) has it: on for cuDNN's convolutions and RNNs, off for matmuls.
    #[test]
    fn torch_deterministic_sets_cudnn_and_tf32_stays_pytorchs() {
        torch_deterministic(true);
        assert_eq!(gpu_settings(), (true, false, true, false));
        torch_deterministic(false);
        assert_eq!(gpu_settings(), (false, true, true, false));
    }

    fn h100() -> Gpu {
        Gpu { name: "NVIDIA H100".into(), capability: (9, 0) }
    }

    /// The reasons a GPU is unusable, for this libtorch (CUDA 13.0, sm_75 to sm_120 from PyPI).
    #[test]
    fn an_old_driver_or_an_old_gpu_is_named_with_the_fix() {
        if TORCH_CUDA.is_none() {
            return; // a CPU-only libtorch: nothing is usable, pick_device says so before
        }
        let torch = TORCH_CUDA.and_then(parse_version).expect("a version");
        let new = Driver { cuda: torch, gpus: vec![h100()] };
        assert_eq!(unusable(&new, &h100()), None);
        let old = Driver { cuda: (torch.0 - 1, 4), gpus: vec![h100()] };
        let why = unusable(&old, &h100()).expect("too old");
        assert!(why.contains(&format!("supports CUDA {}.4", torch.0 - 1)), "{why}");
        if torch.0 == 13 {
            assert!(why.contains(&format!("scripts/setup --torch-index {CUDA_12_INDEX}")), "{why}");
        }
        let Some(archs) = TORCH_ARCHS else { return };
        let lowest = archs.split(' ').filter_map(|a| a.strip_prefix("sm_")?.parse::<i32>().ok()).min().expect("sm_");
        let older = Gpu { name: "an older GPU".into(), capability: (lowest / 10 - 1, 0) };
        let why = unusable(&new, &older).expect("no kernels");
        assert!(why.contains("has kernels for") && why.contains(archs), "{why}");
        // a minor version above a listed one runs that one's kernels (sm_86 on sm_80's, sm_89 on sm_86's)
        let minor_above = Gpu { name: "x".into(), capability: (lowest / 10, lowest % 10 + 1) };
        assert_eq!(unusable(&new, &minor_above), None);
    }

    /// Only an MLP that the default put on a GPU is told of the CPU; a CNN, or `--cuda` given, is not.
    #[test]
    fn an_mlp_on_a_gpu_by_default_is_told_of_the_cpu() {
        assert!(advice(Network::Mlp, false).contains("--cuda false"));
        assert_eq!(advice(Network::Mlp, true), "");
        assert_eq!(advice(Network::Cnn, false), "");
        assert_eq!(advice(Network::Cnn, true), "");
    }

    /// With no NVIDIA driver (this machine), the driver query says so instead of failing.
    #[test]
    fn without_a_driver_the_query_says_why() {
        match driver() {
            Ok(driver) => assert!(driver.cuda.0 >= 11, "{driver:?}"),
            Err(why) => assert!(why.contains("NVIDIA driver"), "{why}"),
        }
    }
}

/// The host's memory available to a new allocation (`MemAvailable` of /proc/meminfo), in bytes; `None` where the
/// kernel does not say.
pub fn memory_available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.trim_start_matches("MemAvailable:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

// Tensors between the host and the device: read down in one copy (on a GPU, one wait), observations up.

/// A float tensor's values on the host, in one copy (on a GPU, one wait for it).
pub fn to_host(t: &Tensor) -> Vec<f32> {
    copy_down(t)
}

/// Scalar tensors of one device, read to the host in one copy (one wait for a GPU), as f64.
pub fn read_host(ts: &[&Tensor]) -> Vec<f64> {
    if ts.is_empty() {
        return Vec::new();
    }
    copy_down(&Tensor::cat(&ts.iter().map(|t| t.to_kind(Kind::Double).reshape([-1])).collect::<Vec<_>>(), 0))
}

/// A tensor of `T`'s kind, every value of it, in one copy to the host.
fn copy_down<T: Element + Default + Clone>(t: &Tensor) -> Vec<T> {
    let numel = t.numel();
    let mut host = vec![T::default(); numel];
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
