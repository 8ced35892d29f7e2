//! The `plot` helper draws a PNG from real run directories.

mod common;

#[test]
fn plot_draws_png_from_runs() {
    let a = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "4096", "--seed", "1"]);
    let b = common::run(env!("CARGO_BIN_EXE_ppo"), &["--total-timesteps", "4096", "--seed", "2"]);
    a.assert_ok();
    b.assert_ok();
    let out = a.workdir.path().join("curves.png");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_plot"))
        .arg(a.dir())
        .arg(b.dir())
        .arg("--out")
        .arg(&out)
        .status()
        .expect("plot starts");
    assert!(status.success());
    let png = std::fs::read(&out).expect("PNG written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000, "{} bytes", png.len());

    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_plot")).arg(a.workdir.path().join("nope")).output().expect("plot starts");
    assert_eq!(missing.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&missing.stderr).trim_end().lines().count(), 1);
}
