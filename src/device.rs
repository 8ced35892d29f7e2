//! The device line: which device `--cuda` gets, and why, in words.

use tch::Device;

/// The device `--cuda` asks for, and why, in words for the line printed at start and args.json: the first GPU
/// when libtorch has CUDA and a GPU is visible, the CPU otherwise.
pub fn pick_device(cuda: bool) -> (Device, String) {
    if !cuda {
        (Device::Cpu, "cpu (--cuda false)".into())
    } else if !tch::utils::has_cudart() {
        (Device::Cpu, "cpu (this libtorch is built without CUDA)".into())
    } else if tch::Cuda::device_count() == 0 {
        (Device::Cpu, "cpu (the CUDA runtime is loaded, but no GPU is visible)".into())
    } else {
        (
            Device::Cuda(0),
            format!("cuda:0 ({})", gpu_name(0).unwrap_or_else(|| "a GPU whose name CUDA did not give".into())),
        )
    }
}

/// `cudaGetDeviceProperties` of the CUDA runtime libtorch loaded (its name in CUDA 12 and 13), found at run time:
/// libtorch does not expose the GPU's name, and nothing of ours links against CUDA.
type GetDeviceProperties = unsafe extern "C" fn(*mut std::ffi::c_void, std::ffi::c_int) -> std::ffi::c_int;
fn cuda_get_device_properties() -> Option<GetDeviceProperties> {
    extern "C" {
        fn dlsym(handle: *mut std::ffi::c_void, symbol: *const std::ffi::c_char) -> *mut std::ffi::c_void;
    }
    [c"cudaGetDeviceProperties_v2", c"cudaGetDeviceProperties"].iter().find_map(|name| {
        // SAFETY: a null handle (RTLD_DEFAULT) searches the libraries already loaded; both names have this signature
        let f = unsafe { dlsym(std::ptr::null_mut(), name.as_ptr()) };
        (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut std::ffi::c_void, GetDeviceProperties>(f) })
    })
}

/// The name of GPU `index`, as `nvidia-smi` shows it.
pub fn gpu_name(index: i32) -> Option<String> {
    let get = cuda_get_device_properties()?;
    // cudaDeviceProp starts with `char name[256]` in every CUDA version; the buffer exceeds any version's struct
    let mut prop = vec![0u8; 64 << 10];
    // SAFETY: the buffer is larger than cudaDeviceProp, which the call fills
    let status = unsafe { get(prop.as_mut_ptr().cast(), index) };
    let name = std::ffi::CStr::from_bytes_until_nul(&prop[..256]).ok()?.to_string_lossy();
    (status == 0 && !name.is_empty()).then(|| name.into_owned())
}

#[cfg(test)]
mod tests {
    /// Built as the binaries are, a process with libtorch's CUDA library finds the CUDA runtime's
    /// `cudaGetDeviceProperties` (the GPU's name for the device line) and, with no GPU, gets no name.
    #[test]
    fn the_cuda_runtime_names_gpus() {
        if !tch::utils::has_cudart() {
            return; // a CPU-only libtorch: tests/cuda.rs checks the binaries say so
        }
        assert!(super::cuda_get_device_properties().is_some(), "cudaGetDeviceProperties not found");
        if tch::Cuda::device_count() == 0 {
            assert_eq!(super::gpu_name(0), None);
        } else {
            assert!(super::gpu_name(0).is_some_and(|n| !n.is_empty()));
        }
    }
}
