//! 1. ALE, the Arcade Learning Environment: its C++ sources as ale-py 0.10.1's sdist holds them (scripts/setup links
//!    them at `../.ale-src`; ALE_SRC_DIR overrides the link), and `src/cpp/ale.cpp`, the C functions envs::atari
//!    calls. Compiled here, linked statically with libstdc++ and zlib (ALE reads zipped ROMs).
//! 2. The default locations of files that come from pip packages, as scripts/setup links them, so binaries need no
//!    exported variable (each has a run-time override): `../.ale-roms` (ale-py's ROMs; ALE_ROM_DIR), `../.mujoco`
//!    (the mujoco package, holding libmujoco; MUJOCO_DIR) and `../.mujoco-assets` (gymnasium's MuJoCo model files;
//!    MUJOCO_ASSETS_DIR), `../.microrts` (gym-microrts 0.2.0's microrts.jar and maps; MICRORTS_DIR), `../.venv` (the
//!    virtual environment whose Python runs Gymnasium's envs, envs::gymnasium; PPO_DETAILS_PYTHON names a Python).
use std::path::{Path, PathBuf};

fn main() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    build_ale(manifest);
    for (link, var) in [
        ("../.ale-roms", "PPO_DETAILS_DEFAULT_ROM_DIR"),
        ("../.mujoco", "PPO_DETAILS_DEFAULT_MUJOCO_DIR"),
        ("../.mujoco-assets", "PPO_DETAILS_DEFAULT_MUJOCO_ASSETS"),
        ("../.microrts", "PPO_DETAILS_DEFAULT_MICRORTS_DIR"),
        ("../.venv", "PPO_DETAILS_DEFAULT_VENV"),
    ] {
        let link = manifest.join(link);
        println!("cargo:rerun-if-changed={}", link.display());
        let dir = std::fs::canonicalize(&link).unwrap_or(link);
        println!("cargo:rustc-env={var}={}", dir.display());
    }
}

/// The ALE version of the sources scripts/setup installs.
const ALE_VERSION: [&str; 3] = ["0", "10", "1"];

fn build_ale(manifest: &Path) {
    println!("cargo:rerun-if-env-changed=ALE_SRC_DIR");
    println!("cargo:rerun-if-changed=src/cpp/ale.cpp");
    let link = manifest.join("../.ale-src");
    println!("cargo:rerun-if-changed={}", link.display());
    let src = std::env::var_os("ALE_SRC_DIR").map(PathBuf::from).unwrap_or(link);
    let src = std::fs::canonicalize(&src).unwrap_or(src);
    if !src.join("ale_interface.cpp").is_file() {
        eprintln!("ALE's sources are not at {}: run scripts/setup (or set ALE_SRC_DIR)", src.display());
        std::process::exit(1);
    }
    // version.hpp, as ALE's CMake configures it from version.hpp.in
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let template = std::fs::read_to_string(src.join("version.hpp.in")).expect("ALE's version.hpp.in");
    let version = template
        .replace("@ALE_VERSION@", &ALE_VERSION.join("."))
        .replace("@ALE_VERSION_MAJOR@", ALE_VERSION[0])
        .replace("@ALE_VERSION_MINOR@", ALE_VERSION[1])
        .replace("@ALE_VERSION_PATCH@", ALE_VERSION[2])
        .replace("@ALE_VERSION_GIT_SHA@", "");
    std::fs::write(out.join("version.hpp"), version).expect("OUT_DIR is writable");
    // the files ALE's CMakeLists name for the library without SDL (the SDL ones compile to nothing)
    let mut files = vec![src.join("ale_interface.cpp"), manifest.join("src/cpp/ale.cpp")];
    for dir in ["common", "emucore", "environment", "games", "games/supported"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(src.join(dir))
            .expect("an ALE source folder")
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "cpp" || e == "cxx"))
            .collect();
        found.sort();
        files.extend(found);
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .define("NDEBUG", None) // ALE's release build, as ale-py's: a negative random_seed is ale-py's too
        .files(&files)
        .include(src.parent().unwrap_or(&src)) // ALE's files include "ale/..."
        .include(&src) // and its headers "version.hpp"
        .include(&out)
        .warnings(false)
        .compile("ale");
    println!("cargo:rustc-link-lib=dylib=z");
}
