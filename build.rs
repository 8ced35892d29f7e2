//! Links libtorch so that the binaries run, on the CPU or a GPU, with no environment variables.
//!
//! 1. An rpath to libtorch's lib directory, so binaries run without LD_LIBRARY_PATH. torch-sys
//!    reports the directory it linked (`DEP_TCH_LIBTORCH_LIB`); we resolve the `.libtorch` link so
//!    binaries keep working if the checkout moves.
//! 2. libtorch's CUDA library kept in the binaries, when this libtorch has one. torch-sys asks for
//!    `-ltorch_cuda`, but rustc links with `--as-needed` and no symbol of ours comes from that
//!    library, so the linker drops it; its CUDA hooks then never register and every `--cuda` run is
//!    silently a CPU run (`readelf -d` lists no libtorch_cuda.so). `--no-as-needed` keeps it (the
//!    cure tch-rs's own build documents). A CPU-only libtorch has no such library and links as before.
//! 3. `src/cpp/context.cpp`: libtorch's global context where tch has no call (cuDNN's deterministic
//!    algorithms for `--torch-deterministic`, the TF32 settings read back).
//! 4. What the device line needs to know of this libtorch, as `torch.version.cuda` and
//!    `torch._C._cuda_getArchFlags()` say it: its CUDA version (the torch package's version.py) and
//!    the GPU architectures it has kernels for (the list compiled into libtorch_python.so).
//! 5. No NCCL of its own: libtorch_cuda.so brings the torch wheel's `libnccl.so.2` (its rpath), and
//!    src/nccl.rs uses that copy, the one already loaded, wherever the binary lives.
use std::path::Path;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    println!("cargo:rerun-if-changed=src/cpp/context.cpp");
    let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") else { return };
    let lib = std::fs::canonicalize(&lib).unwrap_or_else(|_| lib.into());
    // a libtorch installed in the same place with or without CUDA relinks
    println!("cargo:rerun-if-changed={}", lib.display());
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    if lib.join("libtorch_cuda.so").exists() {
        println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
    }
    let torch = lib.parent().unwrap_or(&lib);
    cc::Build::new()
        .cpp(true)
        .file("src/cpp/context.cpp")
        .include(torch.join("include"))
        .flag("-std=c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "1")
        .warnings(false)
        .compile("ppo_context");

    let version = std::fs::read_to_string(torch.join("version.py")).unwrap_or_default();
    let cuda =
        version.lines().find_map(|l| l.strip_prefix("cuda: Optional[str] = '")?.strip_suffix('\'').map(String::from));
    if let Some(cuda) = cuda {
        println!("cargo:rustc-env=PPO_TORCH_CUDA={cuda}");
    }
    if let Some(archs) = arch_list(&lib.join("libtorch_python.so")) {
        println!("cargo:rustc-env=PPO_TORCH_ARCHS={archs}");
    }
}

/// The architectures list compiled into libtorch_python.so (`sm_75 sm_80 ... sm_120`): the longest
/// run of space-separated `sm_NN` / `compute_NN` words in the file.
fn arch_list(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let is_arch = |w: &[u8]| {
        let digits = w.strip_prefix(b"sm_").or_else(|| w.strip_prefix(b"compute_"));
        digits.is_some_and(|d| !d.is_empty() && d.iter().all(|c| c.is_ascii_alphanumeric()))
    };
    let best = bytes
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty() && s.split(|&b| b == b' ').all(is_arch))
        .max_by_key(|s| s.split(|&b| b == b' ').count())?;
    String::from_utf8(best.to_vec()).ok()
}
