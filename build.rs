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
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        let lib = std::fs::canonicalize(&lib).unwrap_or_else(|_| lib.into());
        // a libtorch installed in the same place with or without CUDA relinks
        println!("cargo:rerun-if-changed={}", lib.display());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
        if lib.join("libtorch_cuda.so").exists() {
            println!("cargo:rustc-link-arg=-Wl,--no-as-needed,-ltorch_cuda,--as-needed");
        }
    }
}
