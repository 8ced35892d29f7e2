//! The native ressim env against the Python reference's own output (test case 1, 61×61, levels 8² to 61²; the
//! tolerances: `golden/ressim/README.md`): partitions, coarse fields, the permeability generator, an episode per
//! level and field, `map_from` between every pair of levels and ψ.

use envs::ressim::{self, partition, ResSim, Shared};
use flate2::read::GzDecoder;
use serde_json::Value;
use std::sync::Arc;

fn golden(name: &str) -> Value {
    let path = format!("{}/tests/golden/ressim/{name}.json.gz", env!("CARGO_MANIFEST_DIR"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_reader(GzDecoder::new(file)).expect("gzipped JSON")
}

fn floats(v: &Value) -> Vec<f64> {
    let v = if v.get("data").is_some() { &v["data"] } else { v };
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array().expect("array").iter().map(|x| x.as_u64().expect("integer") as usize).collect()
}

/// Test case 1 with the reference's first two fields.
fn case1() -> Arc<Shared> {
    Arc::new(
        Shared::new(ressim::config("ResSim-case1", &ressim::Fields::Generated { n: 2, seed: 1 }).unwrap()).unwrap(),
    )
}

/// Asserts max |got - want| <= tol; returns that maximum divided by tol.
fn assert_close(got: &[f64], want: &[f64], tol: f64, what: &str) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let worst = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0.0, f64::max);
    assert!(worst <= tol, "{what}: max abs difference {worst:e} > {tol:e}");
    worst / tol
}

fn range(x: &[f64]) -> f64 {
    x.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b)) - x.iter().fold(f64::INFINITY, |a, &b| a.min(b))
}

/// Test case 1's partitions, wells, per-well rate and generated fields are the reference's, exactly. On every level,
/// porosity, initial saturation, c, OOIP, row boundaries and initial rates are exact. The permeability coarsened from
/// the reference's fine field is exact. Coarsened from ours, it is within 1e-15 relative.
#[test]
fn configuration_partitions_and_coarse_fields_are_exact() {
    let config = golden("config");
    for (key, want) in config["get_partition_examples"].as_object().unwrap() {
        let args: Vec<usize> = key
            .trim_start_matches("get_partition(")
            .trim_end_matches(')')
            .split(',')
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(partition(args[0], args[1]), usizes(want), "{key}");
    }
    let shared = case1();
    assert_eq!(shared.injectors, usizes(&config["wells"]["injector_flat_index"]));
    assert_eq!(shared.producers, usizes(&config["wells"]["producer_flat_index"]));
    let fine_q = &shared.config.q_fine;
    assert_eq!(fine_q[0], config["per_well_rate"].as_f64().unwrap());
    let fields = golden("fields");
    for (i, logk) in fields["fine_logk"].as_array().unwrap().iter().enumerate() {
        assert_eq!(shared.config.logk[i], floats(logk), "the generator reproduces the reference's field {i}");
    }
    for (l, level) in shared.levels.iter().enumerate() {
        let key = (l + 1).to_string();
        let (want, cfg) = (&fields["levels"][&key], &config["levels"][&key]);
        assert_eq!(level.phi, floats(&want["phi"]), "level {key}: phi");
        assert_eq!(level.s_init, floats(&want["s_initial"]), "level {key}: s");
        for f in 0..2 {
            // exact coarsening of the reference's fine k ...
            let fine_k = floats(&fields["levels"]["4"]["k"][f]);
            assert_eq!(
                level.to_fine.restrict(&fine_k, ressim::Reduce::HarmonicMean),
                floats(&want["k"][f]),
                "level {key}: k of field {f}"
            );
            // ... and our own k within a few ulp: numpy's vectorized exp(-2) (AVX-512) is 1 ulp
            // below libm's, which we use
            let worst =
                level.k[f].iter().zip(floats(&want["k"][f])).map(|(a, b)| ((a - b) / b).abs()).fold(0.0, f64::max);
            assert!(worst <= 1e-15, "level {key}: k of field {f} off by {worst:e} relative");
        }
        assert_eq!(level.c, cfg["c_total_rate"].as_f64().unwrap(), "level {key}: c");
        assert_eq!(level.ooip, cfg["ooip"].as_f64().unwrap(), "level {key}: ooip");
        assert_eq!(level.to_fine.rows, usizes(&cfg["psi_partition_to_finest"]["p0_row_boundaries"]), "level {key}");
        let q_init = level.to_fine.restrict(fine_q, ressim::Reduce::Sum);
        assert_eq!(q_init, floats(&want["q_initial"]), "level {key}: initial q");
    }
}

/// One episode per level on each of the two fields: the same actions, the reference's states.
#[test]
fn episodes_match_the_reference_on_every_level() {
    let shared = case1();
    for level in 1..=4 {
        let ep = golden(&format!("episode_level_{level}"));
        let actions: Vec<Vec<f64>> = ep["actions"].as_array().unwrap().iter().map(floats).collect();
        let mut env = ResSim::new(shared.clone(), level - 1);
        env.reset_to_field(0);
        let records = ep["records"].as_array().unwrap();
        let mut used = [0f64; 4]; // worst share of the tolerance: s, p, obs, reward
        assert_eq!(env.obs, floats(&records[0]["obs"]), "level {level}: reset obs (the degenerate pressure scaling)");
        for (t, rec) in records.iter().enumerate().skip(1) {
            let what = format!("level {level} step {t}");
            let (reward, done) = env.step_f64(&actions[t - 1]);
            assert_eq!(env.q, floats(&rec["q_applied"]), "{what}: applied rates");
            let (want_s, want_p) = (floats(&rec["s"]), floats(&rec["p"]));
            used[0] = used[0].max(assert_close(&env.s, &want_s, 1e-7, &format!("{what}: s")));
            used[1] = used[1].max(assert_close(&env.p, &want_p, 1e-8 * range(&want_p), &format!("{what}: p")));
            used[2] = used[2].max(assert_close(&env.obs, &floats(&rec["obs"]), 1e-7, &format!("{what}: obs")));
            let want_reward = rec["reward"].as_f64().expect("a reward");
            used[3] = used[3].max(assert_close(&[reward], &[want_reward], 1e-9, &format!("{what}: reward")));
            assert_eq!(done, rec["done"].as_bool().unwrap(), "{what}: done");
            assert_eq!(env.episode_step, rec["episode_step"].as_u64().unwrap() as u32);
        }
        eprintln!(
            "level {level}: worst share of the tolerance: s {:.1e}, p {:.1e}, obs {:.1e}, reward {:.1e}",
            used[0], used[1], used[2], used[3]
        );
        // field 1: observations and rewards only
        env.reset_to_field(1);
        for (t, rec) in ep["field1_obs_reward_summary"]["records"].as_array().unwrap().iter().enumerate().skip(1) {
            let ((reward, done), what) = (env.step_f64(&actions[t - 1]), format!("level {level} field 1 step {t}"));
            assert_close(&env.obs, &floats(&rec["obs"]), 1e-7, &format!("{what}: obs"));
            assert_close(&[reward], &[rec["reward"].as_f64().expect("a reward")], 1e-9, &format!("{what}: reward"));
            assert_eq!(done, rec["done"].as_bool().unwrap());
        }
    }
}

/// `map_from` for all 12 ordered pairs of levels from the reference's mid-episode states, one
/// further step from each mapped state, and ψ.
#[test]
fn level_mappings_match_the_reference() {
    let shared = case1();
    let mapping = golden("mapping");
    let actions: Vec<Vec<f64>> = golden("episode_level_1")["actions"].as_array().unwrap().iter().map(floats).collect();
    let source = |level: usize| {
        let src = &mapping["source_states"][level.to_string()];
        let mut env = ResSim::new(shared.clone(), level - 1);
        env.reset_to_field(0);
        env.s = floats(&src["s"]);
        env.p = floats(&src["p"]);
        env.episode_step = src["episode_step"].as_u64().unwrap() as u32;
        env
    };
    let maps = mapping["mappings"].as_array().unwrap();
    assert_eq!(maps.len(), 12);
    for m in maps {
        let (from, to) = (m["from_level"].as_u64().unwrap() as usize, m["to_level"].as_u64().unwrap() as usize);
        let what = format!("map {from} -> {to}");
        let mut target = ResSim::new(shared.clone(), to - 1);
        target.reset_to_field(1);
        target.map_from(&source(from));
        assert_eq!(target.s, floats(&m["s"]), "{what}: s");
        assert_eq!(target.p, floats(&m["p"]), "{what}: p");
        assert_eq!(target.episode_step, m["episode_step_after"].as_u64().unwrap() as u32, "{what}");
        assert_eq!(target.k_index, m["k_index_after"].as_u64().unwrap() as usize, "{what}");
        assert_close(&target.obs, &floats(&m["obs_after_map"]), 1e-12, &format!("{what}: obs"));
        let after = &m["after_one_step_with_action_index_2"];
        let (reward, done) = target.step_f64(&actions[2]);
        assert_close(&target.obs, &floats(&after["obs"]), 1e-7, &format!("{what}, one step on: obs"));
        assert_close(&[reward], &[after["reward"].as_f64().unwrap()], 1e-9, &format!("{what}, one step on: reward"));
        assert_eq!(done, after["done"].as_bool().unwrap());
    }
    for level in 1..=3 {
        let psi = &mapping["psi"][level.to_string()];
        let (s, p) = source(level).psi();
        assert_eq!(s, floats(&psi["s_fine"]), "psi of level {level}: s");
        assert_eq!(p, floats(&psi["p_fine"]), "psi of level {level}: p");
    }
}

/// A field from a CSV file (`Fields::File`) written out and read back is the same field bit for bit; every
/// malformed file is one line naming the file and what is wrong.
#[test]
fn permeability_fields_from_a_csv_file() {
    let dir = std::env::temp_dir().join(format!("ressim-perm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let field = ressim::perm::batch_generate(61, 61, 5.5, -2.0, (0.1, 0.3), 3, 7).pop().unwrap();
    let rows: Vec<String> =
        field.chunks(61).map(|r| r.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(", ")).collect();
    let good = write("good.csv", &format!("# ln(permeability / mD), 61 x 61\n\n{}\n", rows.join("\n")));
    let config = ressim::config("ResSim-case1", &ressim::Fields::File(good.clone())).unwrap();
    assert_eq!(config.logk, vec![field.clone()]);
    // the env runs on it, on every level (one field: every reset picks it)
    let mut env = ressim::make_with("ResSim-case1", &ressim::Fields::File(good.clone()), Some(15)).unwrap();
    let mut obs = vec![0f32; 3 * 31];
    envs::Env::reset(&mut env, Some(3), &mut obs);
    assert_eq!(env.k_index, 0);
    // another generator seed gives other fields
    let other = ressim::config("ResSim-case1", &ressim::Fields::Generated { n: 16, seed: 2 }).unwrap();
    assert_ne!(other.logk[0], ressim::config("ResSim-case1", &ressim::BUILT_IN).unwrap().logk[0]);

    let short_row =
        rows.iter()
            .enumerate()
            .map(|(i, r)| if i == 4 { r.rsplit_once(',').unwrap().0.to_string() } else { r.clone() });
    let not_a_number =
        rows.iter().enumerate().map(|(i, r)| if i == 2 { r.replacen("-2.0", "x", 1) } else { r.clone() });
    let nan = rows.iter().enumerate().map(|(i, r)| if i == 0 { r.replacen("-2.0", "NaN", 1) } else { r.clone() });
    for (name, text, want) in [
        (
            "short.csv",
            short_row.collect::<Vec<_>>().join("\n"),
            "line 5 has 60 values; the grid is 61x61 (one line per row, 61 values each)",
        ),
        ("few.csv", rows[..60].join("\n"), "60 rows; the grid is 61x61 (one line per row)"),
        ("many.csv", format!("{}\n{}", rows.join("\n"), rows[0]), "more than 61 rows; the grid is 61x61"),
        ("nan.csv", nan.collect::<Vec<_>>().join("\n"), "line 1, value 1: 'NaN' is not a finite number"),
        ("text.csv", not_a_number.collect::<Vec<_>>().join("\n"), "line 3, value 1: 'x' is not a finite number"),
    ] {
        let path = write(name, &text);
        let err = ressim::config("ResSim-case1", &ressim::Fields::File(path.clone())).unwrap_err().to_string();
        assert_eq!(err, format!("permeability file {}: {want}", path.display()), "{name}");
    }
    let missing = dir.join("missing.csv");
    let err = ressim::config("ResSim-v1", &ressim::Fields::File(missing.clone())).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("permeability file {}: cannot read it (", missing.display())) && !err.contains('\n'),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
