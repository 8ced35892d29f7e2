//! The default locations of files that come from pip packages, as scripts/setup links them, so binaries need no
//! exported variable (each has a run-time override): `../.ale-roms` (ale-py's ROMs; ALE_ROM_DIR), `../.mujoco` (the
//! mujoco package, holding libmujoco; MUJOCO_DIR) and `../.mujoco-assets` (gymnasium's MuJoCo model files;
//! MUJOCO_ASSETS_DIR), `../.microrts` (gym-microrts 0.2.0's microrts.jar and maps; MICRORTS_DIR), `../.venv` (the
//! virtual environment whose Python runs Gymnasium's envs, envs::gymnasium; PPO_DETAILS_PYTHON names a Python).
//! ALE itself compiles in the crate envs-ale (ale/build.rs).
use std::path::Path;

fn main() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
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
