//! Which env ids each binary runs, so that a binary's error for an id lists the ids it can run
//! and, for an id another binary runs, names that binary.

use crate::{atari, harvest, microrts, mujoco, ressim, EnvError};

/// Env ids of one kind: the binaries that run one of them run them all.
struct Family {
    /// what the ids are, for "ppo cannot run X (an Atari game)"
    what: &'static str,
    ids: Ids,
}

enum Ids {
    Listed(&'static [&'static str]),
    /// `<Game>NoFrameskip-v4` for each game in `atari::V4_GAMES`
    AtariV4,
}

const CLASSIC_DISCRETE: Family = Family {
    what: "a classic-control env with discrete actions",
    ids: Ids::Listed(&["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "CartPoleNoVel-v1", "MountainCarNoVel-v0"]),
};
const CLASSIC_CONTINUOUS: Family = Family {
    what: "a classic-control env with continuous actions",
    ids: Ids::Listed(&["Pendulum-v1", "MountainCarContinuous-v0", "PendulumNoVel-v1", "MountainCarContinuousNoVel-v0"]),
};
const MUJOCO: Family = Family { what: "a MuJoCo env", ids: Ids::Listed(&mujoco::IDS) };
const RESSIM: Family = Family { what: "a reservoir simulation", ids: Ids::Listed(&ressim::IDS) };
const ATARI: Family = Family { what: "an Atari game", ids: Ids::AtariV4 };
const MASKED: Family = Family { what: "a MultiDiscrete env with action masks", ids: Ids::Listed(&[harvest::ID]) };
const MICRORTS: Family = Family { what: "a MicroRTS game", ids: Ids::Listed(&microrts::IDS) };

/// The binaries that run Gymnasium's envs too, an id envs does not implement or any as `gymnasium:<id>` (through
/// `make`, flat float observations; the Atari binaries through `atari::Game`, RGB images).
const GYMNASIUM: [&str; 8] = [
    "ppo",
    "ppo_noisy",
    "ppo_seeds",
    "ppo_continuous",
    "ppo_lstm",
    "ppo_lstm_workers",
    "ppo_atari",
    "ppo_atari_multigpu",
];

/// Every family, in the order `EnvError::unknown` lists them.
const FAMILIES: [Family; 7] = [CLASSIC_DISCRETE, CLASSIC_CONTINUOUS, MUJOCO, RESSIM, ATARI, MICRORTS, MASKED];

/// The families each binary runs, keyed by its name (`env!("CARGO_BIN_NAME")`). A new binary
/// is a row here; a new kind of ids (MicroRTS) a new `Family` above.
const BINARIES: &[(&str, &[Family])] = &[
    ("ppo", &[CLASSIC_DISCRETE]),
    ("ppo_noisy", &[CLASSIC_DISCRETE]),
    ("ppo_seeds", &[CLASSIC_DISCRETE]),
    ("ppo_atari", &[ATARI]),
    ("ppo_atari_multigpu", &[ATARI]),
    ("ppo_continuous", &[CLASSIC_CONTINUOUS, MUJOCO, RESSIM]),
    ("ppo_ressim", &[RESSIM]),
    ("ppo_multilevel", &[RESSIM]),
    ("ppo_lstm", &[ATARI, CLASSIC_DISCRETE]),
    ("ppo_lstm_workers", &[ATARI, CLASSIC_DISCRETE]),
    ("ppo_multidiscrete_mask", &[MICRORTS, MASKED]),
];

impl Family {
    fn contains(&self, id: &str) -> bool {
        match self.ids {
            Ids::Listed(ids) => ids.contains(&id),
            Ids::AtariV4 => atari::rom_name(id).is_some(),
        }
    }

    fn describe(&self) -> String {
        match self.ids {
            Ids::Listed(ids) => ids.join(", "),
            Ids::AtariV4 => format!(
                "<Game>NoFrameskip-v4 for the {} Atari games ale-py registers (e.g. BreakoutNoFrameskip-v4, \
                    PongNoFrameskip-v4)",
                atari::V4_GAMES.len()
            ),
        }
    }
}

/// The ids of these families, in one line.
fn describe(families: &[Family]) -> String {
    families.iter().map(Family::describe).collect::<Vec<_>>().join(", ")
}

/// Every id envs makes, in one line (for `EnvError::unknown`).
pub(crate) fn all() -> String {
    describe(&FAMILIES)
}

/// Whether binary `bin` (`env!("CARGO_BIN_NAME")`) runs Gymnasium's envs (its `--help` says how).
pub fn runs_gymnasium(bin: &str) -> bool {
    GYMNASIUM.contains(&bin)
}

/// Whether binary `bin` (`env!("CARGO_BIN_NAME")`) runs env `id`; if not, a one-line error
/// that lists the ids `bin` runs and, for an id another binary runs, names that binary. A binary with no row
/// in the table of binaries (your own copy of one, docs/your-env.md) is not checked here: its `make_env`
/// decides.
pub fn check_id(bin: &str, id: &str) -> Result<(), EnvError> {
    // a binary not listed (your copy of one, docs/your-env.md) runs what its make_env makes, and refuses the rest
    let Some((_, own)) = BINARIES.iter().find(|(name, _)| *name == bin) else { return Ok(()) };
    let runs = |families: &[Family]| families.iter().any(|f| f.contains(id));
    let gymnasium = GYMNASIUM.contains(&bin);
    if runs(own) || (gymnasium && id.starts_with(crate::gymnasium::PREFIX)) {
        return Ok(());
    }
    if gymnasium && !FAMILIES.iter().any(|f| f.contains(id)) {
        return Ok(()); // Gymnasium's, if it knows the id: `make` says otherwise
    }
    if let Some(id) = id.strip_prefix(crate::gymnasium::PREFIX) {
        let runs = GYMNASIUM.join(", ");
        return Err(EnvError(format!("{bin} runs no Gymnasium env ({id}); {runs} do, in Gymnasium's own process")));
    }
    let others: Vec<&str> = BINARIES.iter().filter(|(_, families)| runs(families)).map(|(name, _)| *name).collect();
    Err(EnvError(match FAMILIES.iter().find(|f| f.contains(id)) {
        Some(family) if !others.is_empty() => {
            format!(
                "{bin} cannot run {id} ({}): run it with {}; {bin} runs {}",
                family.what,
                others.join(" or "),
                describe(own)
            )
        }
        _ => format!("unknown env id '{id}'; {bin} runs {}", describe(own)),
    }))
}

/// With `--env-kwargs`: whether binary `bin`'s env `id` (one [`check_id`] passed) is Gymnasium's, which takes
/// them; if not, a one-line error that says how to run it in Gymnasium, or that `bin` runs no Gymnasium env.
pub fn check_kwargs(bin: &str, id: &str) -> Result<(), EnvError> {
    if id.starts_with(crate::gymnasium::PREFIX) || !FAMILIES.iter().any(|f| f.contains(id)) {
        return Ok(()); // Gymnasium's (check_id refused it where bin runs none)
    }
    match BINARIES.iter().any(|(name, _)| *name == bin) && !GYMNASIUM.contains(&bin) {
        true => {
            Err(EnvError(format!("--env-kwargs applies to Gymnasium's envs; {bin} runs none ({id} runs natively)")))
        }
        false => Err(crate::gymnasium::native_takes_no_kwargs(id)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(bin: &str, id: &str) -> String {
        check_id(bin, id).expect_err("an error").to_string()
    }

    #[test]
    fn each_binary_runs_its_own_ids() {
        for (bin, id) in [
            ("ppo", "CartPole-v1"),
            ("ppo", "MountainCar-v0"),
            ("ppo_atari", "BreakoutNoFrameskip-v4"),
            ("ppo_atari", "SpaceInvadersNoFrameskip-v4"),
            ("ppo_continuous", "Pendulum-v1"),
            ("ppo_continuous", "HalfCheetah-v4"),
            ("ppo_continuous", "ResSim-case1"),
            ("ppo_multilevel", "ResSim-v1"),
        ] {
            assert_eq!(check_id(bin, id), Ok(()), "{bin} {id}");
        }
    }

    /// A binary that runs no Gymnasium env lists its own ids for an unknown one; one that does passes it on to
    /// Gymnasium (`make` refuses it there if Gymnasium does not know it either), and so `gymnasium:<id>`.
    #[test]
    fn unknown_ids_list_the_binarys_own() {
        assert_eq!(
            message("ppo_multilevel", "ResSim-v9"),
            "unknown env id 'ResSim-v9'; ppo_multilevel runs ResSim-case1, ResSim-v1"
        );
        assert_eq!(
            message("ppo_ressim", "NoSuchEnv-v9"),
            "unknown env id 'NoSuchEnv-v9'; ppo_ressim runs ResSim-case1, ResSim-v1"
        );
        for bin in GYMNASIUM {
            assert_eq!(check_id(bin, "Foo-v0"), Ok(()), "{bin}");
            assert_eq!(check_id(bin, "gymnasium:CartPole-v1"), Ok(()), "{bin}");
        }
        assert!(message("ppo_multilevel", "gymnasium:CartPole-v1").starts_with("ppo_multilevel runs no Gymnasium env"));
    }

    /// A misspelt Atari game is Gymnasium's to refuse: every binary that runs Atari games runs Gymnasium's envs
    /// (`atari::Game` says the id is not one of envs', then Gymnasium's word: tests/ppo_atari.rs).
    #[test]
    fn a_misspelt_atari_game_is_gymnasiums_to_refuse() {
        for id in ["NoSuchGameNoFrameskip-v4", "BreakOutNoFrameskip-v4", "Breakout-v5"] {
            for bin in ["ppo", "ppo_atari", "ppo_atari_multigpu", "ppo_lstm"] {
                assert_eq!(check_id(bin, id), Ok(()), "{bin} {id}");
            }
        }
    }

    /// `--env-kwargs` goes to Gymnasium's envs: a native id is refused, naming its `gymnasium:` twin where the
    /// binary runs Gymnasium's envs.
    #[test]
    fn kwargs_are_for_gymnasiums_envs() {
        for (bin, id) in [("ppo", "LunarLander-v3"), ("ppo", "gymnasium:CartPole-v1"), ("ppo_atari", "ALE/Pong-v5")] {
            assert_eq!(check_kwargs(bin, id), Ok(()), "{bin} {id}");
        }
        let refused = |bin: &str, id: &str| check_kwargs(bin, id).expect_err("an error").to_string();
        assert_eq!(
            refused("ppo", "CartPole-v1"),
            "--env-kwargs applies to Gymnasium's envs; CartPole-v1 runs natively: give gymnasium:CartPole-v1"
        );
        assert_eq!(
            refused("ppo_atari", "PongNoFrameskip-v4"),
            "--env-kwargs applies to Gymnasium's envs; PongNoFrameskip-v4 runs natively: give \
                gymnasium:PongNoFrameskip-v4"
        );
        assert_eq!(
            refused("ppo_ressim", "ResSim-v1"),
            "--env-kwargs applies to Gymnasium's envs; ppo_ressim runs none (ResSim-v1 runs natively)"
        );
    }

    #[test]
    fn another_binarys_id_names_that_binary() {
        assert_eq!(
            message("ppo", "BreakoutNoFrameskip-v4"),
            "ppo cannot run BreakoutNoFrameskip-v4 (an Atari game): run it with ppo_atari or ppo_atari_multigpu or \
                ppo_lstm or ppo_lstm_workers; ppo runs CartPole-v1, Acrobot-v1, MountainCar-v0, CartPoleNoVel-v1, \
                MountainCarNoVel-v0"
        );
        assert!(message("ppo_atari", "CartPole-v1").starts_with(
            "ppo_atari cannot run CartPole-v1 (a classic-control env with discrete actions): run it with ppo or \
                ppo_noisy or ppo_seeds or ppo_lstm or ppo_lstm_workers; ppo_atari runs <Game>"
        ));
        assert!(message("ppo_continuous", "Acrobot-v1").contains(
            "run it with ppo or ppo_noisy or ppo_seeds or ppo_lstm or ppo_lstm_workers; ppo_continuous runs Pendulum",
        ));
        // both binaries that run the ressim ids are named
        assert!(message("ppo", "ResSim-v1").starts_with(
            "ppo cannot run ResSim-v1 (a reservoir simulation): run it with ppo_continuous or ppo_ressim or \
             ppo_multilevel;"
        ));
        assert_eq!(
            message("ppo_multilevel", "HalfCheetah-v4"),
            "ppo_multilevel cannot run HalfCheetah-v4 (a MuJoCo env): run it with ppo_continuous; ppo_multilevel \
                runs ResSim-case1, ResSim-v1"
        );
    }

    #[test]
    fn a_binary_checks_its_id_with_its_other_flags() {
        // each binary's `check_args` returns `Result<(), String>`
        let check_args = |id: &str| -> Result<(), String> {
            check_id("ppo_multilevel", id)?;
            Ok(())
        };
        assert_eq!(check_args("ResSim-v1"), Ok(()));
        assert_eq!(check_args("Foo-v0"), Err(message("ppo_multilevel", "Foo-v0")));
    }

    /// Your own copy of a binary (docs/your-env.md) runs its own ids: its make_env refuses what it cannot make.
    /// That each binary of the package has its row: tests/diffs.rs.
    #[test]
    fn a_binary_without_a_row_is_not_checked() {
        assert_eq!(check_id("my_ppo", "GridWalk-v0"), Ok(()));
    }

    #[test]
    fn the_table_names_the_ids_envs_makes_and_nothing_else() {
        let known: Vec<&str> =
            crate::KNOWN_ENVS.iter().map(|(id, _)| *id).chain(ressim::IDS).chain(microrts::IDS).collect();
        for family in &FAMILIES {
            if let Ids::Listed(ids) = family.ids {
                assert!(ids.iter().all(|id| known.contains(id)), "{ids:?}");
            }
            assert!(
                BINARIES.iter().any(|(_, families)| families.iter().any(|f| f.what == family.what)),
                "no binary runs {}",
                family.what
            );
        }
        for id in known {
            assert!(FAMILIES.iter().any(|f| f.contains(id)), "{id} is in no family");
        }
        // the examples in the Atari line are games
        assert!(ATARI.contains("BreakoutNoFrameskip-v4") && ATARI.contains("PongNoFrameskip-v4"));
    }

    /// Every row is a binary of the workspace, and every binary that calls `check_id` has a row.
    #[test]
    fn the_rows_are_the_binaries() {
        let bin_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../src/bin");
        for (bin, _) in BINARIES {
            assert!(bin_dir.join(format!("{bin}.rs")).exists(), "{bin} is not in {}", bin_dir.display());
        }
        for entry in std::fs::read_dir(&bin_dir).expect("the workspace's src/bin") {
            let path = entry.expect("a directory entry").path();
            let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let calls =
                std::fs::read_to_string(&path).is_ok_and(|src| src.contains("check_id(env!(\"CARGO_BIN_NAME\")"));
            assert!(!calls || BINARIES.iter().any(|(bin, _)| *bin == name), "{name} calls check_id but has no row");
        }
    }
}
