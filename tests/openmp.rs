//! libgomp reads `GOMP_SPINCOUNT` before `main`: the library sets it in every executable's ELF preinit array
//! (`src/openmp.rs`), however the binary starts. Checked in this test's own executable, which links the library as
//! the binaries do, and in the binaries' ELF headers.

use std::path::Path;
use std::process::Command;

/// This executable, started again without GOMP_SPINCOUNT (as a binary started outside cargo is),
/// finds it set before main, to the library's value; a value the user exported is kept.
#[test]
fn the_spin_count_is_set_before_main_however_the_process_starts() {
    let me = std::env::current_exe().expect("the test executable");
    for (given, expected) in [(None, "1000"), (Some("30000"), "30000")] {
        let mut child = Command::new(&me);
        child.args(["--exact", "child_reports_its_spin_count", "--ignored", "--nocapture"]).env("PPO_SPIN_CHILD", "1");
        match given {
            Some(value) => child.env("GOMP_SPINCOUNT", value),
            None => child.env_remove("GOMP_SPINCOUNT"),
        };
        let out = child.output().expect("the test executable starts");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&format!("GOMP_SPINCOUNT={expected};")), "given {given:?}: {stdout}");
    }
}

/// Not a test: the child's half of the one above, which starts it (`--ignored`) and checks what it prints.
#[test]
#[ignore = "a helper: the_spin_count_is_set_before_main_however_the_process_starts runs it"]
fn child_reports_its_spin_count() {
    let _ = ppo_details::all_cores; // links the library into this executable, as into every binary
    if std::env::var_os("PPO_SPIN_CHILD").is_some() {
        println!("GOMP_SPINCOUNT={};", std::env::var("GOMP_SPINCOUNT").unwrap_or_default());
    }
}

/// Every binary carries the preinit array that sets it.
#[test]
fn every_binary_has_the_preinit_array() {
    let bins = ["ppo", "ppo_atari", "ppo_atari_multigpu", "ppo_continuous", "ppo_lstm", "ppo_lstm_workers"];
    let more = ["ppo_multidiscrete_mask", "ppo_multilevel", "ppo_noisy", "ppo_ressim", "ppo_seeds"];
    for bin in bins.into_iter().chain(more).map(|b| Path::new(env!("CARGO_BIN_EXE_ppo")).with_file_name(b)) {
        let out = Command::new("readelf").args(["--section-headers", "--wide"]).arg(&bin).output();
        let out = out.expect("readelf runs");
        let headers = String::from_utf8_lossy(&out.stdout);
        assert!(headers.contains(".preinit_array"), "{}: no .preinit_array", bin.display());
    }
}
