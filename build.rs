//! Bakes libtorch's lib directory into the binaries' rpath, so they run without LD_LIBRARY_PATH.
//! torch-sys reports the directory it linked (`DEP_TCH_LIBTORCH_LIB`); we resolve the
//! `.libtorch` link so binaries keep working if the checkout moves.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Ok(lib) = std::env::var("DEP_TCH_LIBTORCH_LIB") {
        let lib = std::fs::canonicalize(&lib).unwrap_or_else(|_| lib.into());
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    }
}
