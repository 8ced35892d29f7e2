//! ALE (from crate ale-sys, built with CMake) is C++ and reads zipped ROMs: link libstdc++ and
//! zlib. Also compiles in the default ROM directory, `../.ale-roms` as scripts/setup links it
//! (the ROM files of the pip package ale-py), so binaries need no exported variable; ALE_ROM_DIR
//! overrides it at run time.
fn main() {
    println!("cargo:rustc-link-lib=dylib=stdc++");
    println!("cargo:rustc-link-lib=dylib=z");
    let link = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ale-roms");
    println!("cargo:rerun-if-changed={}", link.display());
    let dir = std::fs::canonicalize(&link).unwrap_or(link);
    println!("cargo:rustc-env=PPO_DETAILS_DEFAULT_ROM_DIR={}", dir.display());
}
