//! The implementation-detail tags in `src/bin/*.rs` (`// Core 7: ...`, also `///` and at a line's end; not `//!`)
//! against the numbered details: every tag names a detail, every variant carries its own details' tags and its
//! ancestors' (`OWN`, `diffs/family.txt`), every detail is tagged in some binary and none in the library, and
//! `docs/details.md` is current (`scripts/update-details` rewrites it: `UPDATE_DOCS=1`). A tag is a category name
//! and a number of one or two digits (`Atari 2600` is no tag).

mod common;

use std::collections::{BTreeMap, BTreeSet};

/// The numbered details of "The 37 Implementation Details of PPO" (number = position), named as
/// in the project's index of the article; its four situational details are Aux 1-4. The variants' own
/// details beyond the article follow (Extra, Workers, Noisy, Seeds, Ressim, Multilevel).
const ARTICLE: &[(&str, &[&str])] = &[
    (
        "Core",
        &[
            "vectorized architecture (N envs, fixed-length M-step segments, next_obs/next_done carry-over)",
            "orthogonal weight init (gain sqrt 2 hidden, 0.01 policy head, 1.0 value head), zero biases",
            "Adam epsilon 1e-5",
            "learning-rate annealing (linear to 0)",
            "GAE (value bootstrap on non-terminal, returns = advantages + values)",
            "shuffled mini-batch updates covering the whole batch each epoch",
            "per-minibatch advantage normalization",
            "clipped surrogate objective",
            "value-function loss clipping",
            "overall loss with entropy bonus (one optimizer)",
            "global gradient-norm clipping (0.5)",
            "debug variables (policy_loss, value_loss, entropy, clipfrac, old_approx_kl, approx_kl, \
                explained_variance)",
            "shared vs separate policy/value networks",
        ],
    ),
    (
        "Atari",
        &[
            "NoopResetEnv (up to 30 no-ops)",
            "MaxAndSkipEnv (skip 4, max over last two frames, summed reward)",
            "EpisodicLifeEnv (life loss ends the training episode)",
            "FireResetEnv (press FIRE on reset where the game needs it)",
            "WarpFrame (grayscale, resize 84x84)",
            "ClipRewardEnv (sign of reward)",
            "FrameStack (4)",
            "shared Nature-CNN trunk for policy and value",
            "scale pixels to [0, 1]",
        ],
    ),
    (
        "Continuous",
        &[
            "Normal action distribution",
            "state-independent log std, initialized to 0",
            "independent action components (log-probs and entropies summed)",
            "separate policy and value MLPs",
            "clip actions to the valid range for the env, store the unclipped sample",
            "observation normalization (running mean/var)",
            "observation clipping (±10)",
            "reward scaling (divide by std of discounted return)",
            "reward clipping (±10)",
        ],
    ),
    (
        "LSTM",
        &[
            "LSTM layer init (orthogonal gain 1.0, zero biases)",
            "zero initial hidden and cell state",
            "reset the state where an episode ended (done mask applied before each step)",
            "minibatches made of whole env sequences, in time order",
            "reconstruct states during training from the state saved before the rollout",
        ],
    ),
    ("MultiDiscrete", &["independent categorical per component (log-probs and entropies summed)"]),
    (
        "Aux",
        &[
            "clip-range annealing",
            "parallelized gradient update",
            "early stopping on target KL",
            "invalid action masking (logits of invalid actions replaced before the softmax)",
        ],
    ),
];

/// Details beyond the article, numbered here.
const EXTRA: &[&str] = &[
    "KL-adaptive learning rate (TUM end-to-end RL report 3.6: the report's rule, or rsl_rl's for a Gaussian policy)",
    "reward scale (the TUM report's reward factor, 0.005 in its CartPole study), the logged returns unscaled",
];

/// Noisy Nets as the TUM report (3.4) and Fortunato et al. 2017 describe them, numbered here.
const NOISY: &[&str] = &[
    "noisy linear layers: μ + σ ⊙ ε, factorised (f(x) = sgn(x)√|x|) or independent Gaussian noise, Fortunato et \
        al.'s init, σ learned with the rest",
    "the report's four settings: the layers of no network, the policy's, the value's or both are noisy",
    "each env's noise drawn when its episode starts and kept until it ends, stored with the rollout: every sample \
        evaluated under the noise that chose its action",
    "evaluation plays the mean weights (no noise)",
];

/// Many seeds in one process, as purejaxrl's `jax.vmap(train)` over seeds (issue 58), numbered here.
const SEEDS: &[&str] = &[
    "each seed's networks initialised as `ppo --seed k` initialises its own, stacked ([seeds, out, in]), one \
        batched matrix product per layer for all seeds",
    "the envs of all seeds in one vector, seed k's env e seeded as `ppo --seed k`'s env e; global_step counts each \
        seed's own steps",
    "each seed's own update: its minibatch permutation, advantage normalization, loss mean (the loss a sum over \
        seeds), gradient norm, Adam state and step count, target-KL stop (a stopped seed's weights and state stay)",
    "each seed logged as `ppo --seed k` logs itself: a row per seed in updates.csv, a seed column in \
        episodes.csv, TensorBoard events per seed, each seed's model alone and its evaluation",
    "a seed whose loss or gradient is not finite stops alone and for good (its weights and Adam state those of its \
        last finite step, also after --resume), the others go on; the run's exit code is then 1",
];

/// The multilevel paper's single-level PPO (`ppo_ressim`), its departures from `ppo_continuous`.
const RESSIM: &[&str] = &[
    "the reservoir env: waterflooding on channelized permeability fields, observations and rewards scaled by the \
        env, actions clipped to [0.001, 1], no normalization by default",
    "the paper's network: SB3 1.x's MlpPolicy, one tanh trunk (150-100-80) shared by two linear heads, log std \
        initialized to -2.9",
    "SB3's early stop (PPO.train): a minibatch's approx_kl above 1.5 x target_kl ends the update before its step",
];

/// miniDRL's design (its document's "Distributed Architecture" and "Implementation details"), numbered here.
const WORKERS: &[&str] = &[
    "one learner and N rollout workers, synchronous: the learner waits for every worker's batch, each worker for \
        the new weights (no stale data, no off-policy correction)",
    "the learner's weights to every worker, one broadcast per update, equal bit for bit",
    "workers on the CPU, one libtorch thread each; the learner on the device",
    "the learner alone logs: every worker's episodes, each with its worker",
    "each worker's envs (seeded as ppo_lstm's env of the same global index) and LSTM state carried across updates",
    "rollouts through shared memory (MPI's; TCP between machines): one gather per update, each worker's rollout \
        with its LSTM state before it and what the bootstrap needs, in the learner's buffer",
    "worker 1 continues the learner's random stream, the others their own: one worker draws what ppo_lstm draws",
    "miniDRL's benchmark's measures (experience SPS, learning SPS) per update, and the learner's and workers' waits",
];

/// Multilevel PPO (`ppo_multilevel`), its departures from `ppo_ressim`.
const MULTILEVEL: &[&str] = &[
    "levels: a grid, T^l steps per env and minibatch size M^l each, coarse to fine, with the same number of \
        minibatches on every level",
    "per level its own envs, rollout buffer and last observation",
    "the synchronized buffer: level l-1 put in level l's state (map_from), same action",
    "GAE on both buffers with the fine episode boundaries",
    "the MLMC loss: main and sync minibatches with identical indices, one optimizer step",
    "the early stop (Ressim 3) on every level's main minibatch",
];
/// Every category, in the index's order.
fn categories() -> impl Iterator<Item = &'static str> {
    "Core Atari Continuous LSTM MultiDiscrete Aux Extra Workers Noisy Seeds Ressim Multilevel".split(' ')
}

/// Ranges of details: (category, first, last).
type Ranges = &'static [(&'static str, u32, u32)];

/// The details each variant adds to its parent's.
const OWN: &[(&str, Ranges)] = &[
    ("ppo", &[("Core", 1, 13), ("Aux", 1, 1), ("Aux", 3, 3)]),
    ("ppo_atari", &[("Atari", 1, 9)]),
    ("ppo_continuous", &[("Continuous", 1, 9), ("Extra", 1, 1)]),
    ("ppo_ressim", &[("Ressim", 1, 3)]),
    ("ppo_multilevel", &[("Multilevel", 1, 6)]),
    ("ppo_lstm", &[("LSTM", 1, 5)]),
    ("ppo_multidiscrete_mask", &[("MultiDiscrete", 1, 1), ("Aux", 4, 4)]),
    ("ppo_atari_multigpu", &[("Aux", 2, 2)]),
    ("ppo_lstm_workers", &[("Workers", 1, 8)]),
    ("ppo_noisy", &[("Noisy", 1, 4), ("Extra", 1, 2)]),
    ("ppo_seeds", &[("Seeds", 1, 5)]),
];

/// Categories a variant does not inherit from its ancestors, and why.
const DROPPED: &[(&str, &str, &str)] =
    &[("ppo_multidiscrete_mask", "Atari", "its envs are one-hot grids, not Atari games: no Atari wrappers, no pixels")];

type Detail = (&'static str, u32);

/// The family's binaries, root first, then the children in `diffs/family.txt`'s order.
fn family_order() -> Vec<String> {
    let fam = common::family();
    let mut order: Vec<String> = Vec::new();
    for (p, _) in &fam {
        if !fam.iter().any(|(_, c)| c == p) && !order.contains(p) {
            order.push(p.clone());
        }
    }
    order.extend(fam.into_iter().map(|(_, c)| c));
    order
}

/// Number → name of every detail: the article's and the variants' own.
fn catalogue() -> BTreeMap<Detail, String> {
    let mut all = BTreeMap::new();
    for (cat, names) in ARTICLE.iter().chain([
        &("Extra", EXTRA),
        &("Workers", WORKERS),
        &("Noisy", NOISY),
        &("Seeds", SEEDS),
        &("Ressim", RESSIM),
        &("Multilevel", MULTILEVEL),
    ]) {
        for (i, name) in names.iter().enumerate() {
            all.insert((*cat, i as u32 + 1), name.to_string());
        }
    }
    all
}

/// The `//` and `///` comments of a Rust source (not `//!`), with their 1-based line numbers: on each line, the
/// text after the first `//` that an even number of quotes precedes (so not one in a string on that line).
fn line_comments(src: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    for (n, line) in src.lines().enumerate() {
        let code_quotes = |at: usize| line[..at].replace("\\\"", "").replace("'\"'", "").matches('"').count();
        let Some((at, _)) = line.match_indices("//").find(|(at, _)| code_quotes(*at) % 2 == 0) else { continue };
        let text = &line[at + 2..];
        if !text.starts_with('!') {
            out.push((n + 1, text.trim_start_matches('/')));
        }
    }
    out
}

/// The tags in a comment: a category name (not inside a word) followed by a one- or two-digit number.
fn mentions(comment: &str) -> Vec<Detail> {
    let mut found = Vec::new();
    for cat in categories() {
        for (at, _) in comment.match_indices(cat) {
            let before_ok = comment[..at].chars().next_back().is_none_or(|c| !c.is_alphanumeric());
            let Some(rest) = comment[at + cat.len()..].strip_prefix(' ') else { continue };
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if before_ok && (1..=2).contains(&digits) {
                found.push((cat, rest[..digits].parse().expect("digits")));
            }
        }
    }
    found
}

struct Tag {
    file: String,
    line: usize,
    detail: Detail,
}

/// Every tag in every `src/bin/*.rs`, by binary name.
fn tags() -> BTreeMap<String, Vec<Tag>> {
    let mut all = BTreeMap::new();
    for entry in std::fs::read_dir("src/bin").expect("src/bin") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let bin = path.file_stem().expect("file name").to_string_lossy().into_owned();
        let file = format!("{bin}.rs");
        let src = std::fs::read_to_string(&path).expect("source file");
        let found: Vec<Tag> = line_comments(&src)
            .into_iter()
            .flat_map(|(line, text)| mentions(text).into_iter().map(move |detail| (line, detail)))
            .map(|(line, detail)| Tag { file: file.clone(), line, detail })
            .collect();
        all.insert(bin, found);
    }
    all
}

/// Binaries in index order: the family's (root first, as in `diffs/family.txt`) that exist, then
/// any other binary with at least one tag.
fn columns(tags: &BTreeMap<String, Vec<Tag>>) -> Vec<String> {
    let fam = family_order();
    let others = tags.iter().filter(|(b, t)| !t.is_empty() && !fam.contains(b)).map(|(b, _)| b.clone());
    fam.iter().filter(|b| tags.contains_key(*b)).cloned().chain(others).collect()
}

fn render() -> String {
    let (details, tags) = (catalogue(), tags());
    let cols = columns(&tags);
    let mut md = String::from(
        "# Where each implementation detail is implemented\n\n\
         <!-- Generated by scripts/update-details from the tags in src/bin/*.rs; tests/details.rs fails while it is \
             stale. -->\n\n\
         Every implementation detail is tagged where it acts by a comment naming it\n\
         (`// Core 7: per-minibatch advantage normalization`); here, per detail, every tagged line of\n\
         each binary. Numbers and names: the index of \"The 37 Implementation Details of PPO\" (Core,\n\
         Atari, Continuous, LSTM, MultiDiscrete; its four situational details are Aux 1–4), Extra for\n\
         details beyond the article, and the variants' own (Workers, Noisy, Seeds, Ressim, Multilevel).\n\
         A table has a column for each binary with a tag of its category; an empty cell: that binary\n\
         does not implement the detail.\n\
         `tests/details.rs` also checks that each variant carries the tags of its own details and of\n\
         its parent's (`diffs/family.txt`).\n",
    );
    for cat in categories() {
        let rows: Vec<(&Detail, &String)> = details.iter().filter(|((c, _), _)| *c == cat).collect();
        if rows.is_empty() {
            continue;
        }
        md += &format!("\n## {cat}\n\n");
        // a column for each binary with a tag of this category
        let cols: Vec<&String> = cols.iter().filter(|b| tags[*b].iter().any(|t| t.detail.0 == cat)).collect();
        if cols.is_empty() {
            md += "Not implemented yet:\n\n";
            for ((c, n), name) in rows {
                md += &format!("- {c} {n}: {name}\n");
            }
            continue;
        }
        md += "| detail |";
        for col in &cols {
            md += &format!(" `{col}` |");
        }
        md += &format!("\n|---|{}\n", "---|".repeat(cols.len()));
        for (&(c, n), name) in rows {
            md += &format!("| {c} {n}: {name} |");
            for col in &cols {
                let links: Vec<String> = tags[*col]
                    .iter()
                    .filter(|t| t.detail == (c, n))
                    .map(|t| format!("[{f}:{l}](../src/bin/{f}#L{l})", f = t.file, l = t.line))
                    .collect();
                md += &format!(" {} |", links.join(", "));
            }
            md.push('\n');
        }
    }
    md
}

/// Every tag in `src/bin/*.rs` names a detail of the catalogue: the article's numbered details and the extra ones after
/// them.
#[test]
fn tags_name_existing_details() {
    let details = catalogue();
    let bad: Vec<String> = tags()
        .values()
        .flatten()
        .filter(|t| !details.contains_key(&t.detail))
        .map(|t| format!("src/bin/{}:{}: `{} {}` is not a numbered detail", t.file, t.line, t.detail.0, t.detail.1))
        .collect();
    assert!(
        bad.is_empty(),
        "{}\n(the details: tests/details.rs's ARTICLE, after \"The 37 Implementation Details of PPO\", and the \
            lists after it)",
        bad.join("\n")
    );
}

/// Every binary of `diffs/family.txt` that has tags carries a tag for each of its own details (`OWN`) and its
/// ancestors', but for those `DROPPED` lists.
#[test]
fn variants_carry_their_tags() {
    let (details, tags, fam) = (catalogue(), tags(), common::family());
    let own = |bin: &str| -> Vec<Detail> {
        let (_, ranges) = OWN
            .iter()
            .find(|(b, _)| *b == bin)
            .unwrap_or_else(|| panic!("{bin} (diffs/family.txt) has no entry in OWN"));
        ranges.iter().flat_map(|&(cat, lo, hi)| (lo..=hi).map(move |n| (cat, n))).collect()
    };
    let mut missing = Vec::new();
    for bin in family_order() {
        let Some(found) = tags.get(&bin) else { continue };
        let mut required = BTreeSet::new();
        let mut cur = Some(bin.clone());
        while let Some(b) = cur {
            required.extend(own(&b));
            cur = fam.iter().find(|(_, c)| *c == b).map(|(p, _)| p.clone());
        }
        required.retain(|d| !DROPPED.iter().any(|&(b, cat, _)| b == bin && cat == d.0 && !own(&bin).contains(d)));
        for d in required {
            if !found.iter().any(|t| t.detail == d) {
                let name = details.get(&d).map_or("(not in the catalogue)", String::as_str);
                missing.push(format!("src/bin/{bin}.rs ({bin}) lacks a tag for {} {}: {name}", d.0, d.1));
            }
        }
    }
    assert!(missing.is_empty(), "{}\n(tag each detail where it acts: `// Category N: name`)", missing.join("\n"));
}

/// Every detail of the article (Core, Atari, Continuous, LSTM, MultiDiscrete, Aux 1-4) and every
/// extra one is implemented by some binary.
#[test]
fn every_detail_is_implemented_somewhere() {
    let (details, tags) = (catalogue(), tags());
    let missing: Vec<String> = details
        .iter()
        .filter(|(d, _)| !tags.values().flatten().any(|t| t.detail == **d))
        .map(|((c, n), name)| format!("{c} {n}: {name}"))
        .collect();
    assert!(missing.is_empty(), "no binary implements:\n{}", missing.join("\n"));
}

/// `docs/details.md` is what `render` makes from the tags; with `UPDATE_DOCS=1` it is rewritten instead.
#[test]
fn details_index_is_current() {
    let (path, want) = ("docs/details.md", render());
    if common::update_docs() {
        if std::fs::read_to_string(path).ok().as_deref() != Some(&want) {
            std::fs::write(path, &want).expect("write docs/details.md");
            eprintln!("wrote {path}");
        }
        return;
    }
    let have = std::fs::read_to_string(path).unwrap_or_default();
    assert!(have == want, "{path} is missing or stale; run scripts/update-details");
}

/// What was once a detail in the library, each now written in the binaries where it acts: Core 6's
/// shuffle (`shuffled`, torch.randperm), Extra 1's rules and its Gaussian KL (`adapt_lr`,
/// `gaussian_kl`). The library does not draw minibatch orders or adapt a learning rate.
const DETAILS_ONCE_IN_THE_LIBRARY: &[&str] =
    &["fn shuffled", "fn adapt_lr", "fn gaussian_kl", "randperm", "desired_kl"];

/// No PPO detail lives in the library (`src/**/*.rs` but `src/bin/`): docs/details.md points into `src/bin/` only,
/// no library comment opens with a detail's tag (it may name one it serves, "(Core 5)"), none that lived there is back.
#[test]
fn no_detail_lives_in_the_library() {
    let index = std::fs::read_to_string("docs/details.md").expect("docs/details.md");
    let targets: Vec<&str> = index.split("](").skip(1).filter_map(|rest| rest.split(')').next()).collect();
    let outside: Vec<&&str> =
        targets.iter().filter(|t| t.starts_with("../src/") && !t.starts_with("../src/bin/")).collect();
    assert!(targets.iter().any(|t| t.starts_with("../src/bin/")), "docs/details.md points at no binary");
    assert!(outside.is_empty(), "docs/details.md points into the library: {outside:?}");
    let (mut found, mut files, mut dirs) = (Vec::new(), Vec::new(), vec![std::path::PathBuf::from("src")]);
    while let Some(dir) = dirs.pop() {
        for path in std::fs::read_dir(&dir).expect("a source folder").flatten().map(|e| e.path()) {
            match path.extension() {
                _ if path.is_dir() && !path.ends_with("src/bin") => dirs.push(path),
                Some(e) if e == "rs" => files.push(path),
                _ => {}
            }
        }
    }
    assert!(files.iter().any(|f| f.ends_with("src/lib.rs")), "src/lib.rs not found: {files:?}");
    for path in files {
        let src = std::fs::read_to_string(&path).expect("source file");
        for (line, text) in line_comments(&src) {
            let text = text.trim_start();
            if let Some(detail) = mentions(text).first().filter(|d| text.starts_with(&format!("{} {}:", d.0, d.1))) {
                found.push(format!("{}:{line}: a comment tagged {} {}", path.display(), detail.0, detail.1));
            }
        }
        for (n, code) in src.lines().enumerate() {
            for what in DETAILS_ONCE_IN_THE_LIBRARY.iter().filter(|w| code.contains(*w)) {
                found.push(format!("{}:{}: {what}", path.display(), n + 1));
            }
        }
    }
    assert!(found.is_empty(), "PPO details in the library (they belong in the binaries):\n{}", found.join("\n"));
}
