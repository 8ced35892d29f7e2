//! # plot: PNG learning curves from run directories
//!
//! Not a PPO variant: a helper that reads `runs/<run-name>/episodes.csv` and `args.json` and
//! draws episodic return against global step (or, with `--x-axis seconds`, against the run's
//! time so far, from the timing columns of `updates.csv`), one panel per env id, one colour per
//! experiment name. Each run's returns are averaged over its last `--window` episodes; several runs
//! of one experiment (seeds) are drawn as their mean with a min-max band; where runs are of different
//! lengths, each point is drawn from the runs that reach it. The legend says how many runs (and, where
//! their lengths differ, how many of each length), the lines under each panel's title say what the
//! line and the band are, and the same is printed, with where each line ends. `--metric COLUMN` draws
//! a column of `updates.csv` instead (e.g. `charts/learning_rate`), one point per update averaged over
//! `--window` updates.
//!
//! With `--workers-table TABLE.csv` (what `scripts/bench_workers` writes) it draws miniDRL's three
//! scaling figures instead: SPS, experience SPS and learning SPS against the workers at a fixed batch,
//! against the workers at fixed envs per worker, and against one worker's envs, each beside ppo_lstm's
//! SPS with the same envs in one process. With `--solved-table RUNS.csv` (what `scripts/study_cartpole`
//! writes) it draws the solved fraction of each setting's runs against episodes, a panel per table.
//!
//! Run: `cargo run --release --bin plot -- runs/* --out curves.png`

use clap::Parser;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(about = "Draw PNG learning curves (episodic return vs global step) from run directories")]
struct Args {
    /// run directories (each with args.json and episodes.csv)
    #[arg(required_unless_present_any = ["workers_table", "solved_table"])]
    runs: Vec<PathBuf>,
    /// draw scripts/bench_workers' table (miniDRL's three scaling figures) instead of runs
    #[arg(long, conflicts_with = "runs")]
    workers_table: Option<PathBuf>,
    /// draw scripts/study_cartpole's runs (the solved fraction against episodes) instead of runs
    #[arg(long, conflicts_with_all = ["runs", "workers_table"])]
    solved_table: Option<PathBuf>,
    /// the PNG file to write
    #[arg(long, default_value = "curves.png")]
    out: PathBuf,
    /// episodes averaged into each point of a run's curve
    #[arg(long, default_value_t = 20, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    window: usize,
    /// points on the common global-step grid used to average seeds
    #[arg(long, default_value_t = 200, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..))]
    points: usize,
    /// what the x axis shows: global steps, or seconds of collection and learning so far
    #[arg(long, value_enum, default_value = "steps")]
    x_axis: XAxis,
    /// draw this column of updates.csv (e.g. charts/learning_rate) instead of the episodic return
    #[arg(long)]
    metric: Option<String>,
    /// a TrueType font for the labels
    #[arg(long, default_value = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")]
    font: PathBuf,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
enum XAxis {
    Steps,
    Seconds,
}

/// A CSV file's reader, and the index of each named column of its header (an error naming the file and
/// the column when there is none).
type Columns = Box<dyn Fn(&str) -> Result<usize, String>>;
fn open_table(path: &Path) -> Result<(csv::Reader<std::fs::File>, Columns), String> {
    let mut reader = csv::Reader::from_path(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let header = reader.headers().map_err(|e| format!("{}: {e}", path.display()))?.clone();
    let path = path.display().to_string();
    let col =
        move |name: &str| header.iter().position(|h| h == name).ok_or_else(|| format!("{path}: no column {name}"));
    Ok((reader, Box::new(col)))
}

/// For each update of a run: its global step and the seconds of collection and learning up to
/// its end (from updates.csv).
fn read_elapsed(dir: &Path, seed: Option<u64>) -> Result<Vec<(f64, f64)>, String> {
    let path = dir.join("updates.csv");
    let (mut reader, col) = open_table(&path)?;
    let (step, collect, learn) =
        (col("global_step")?, col("timing/collection_seconds")?, col("timing/learning_seconds")?);
    let seed_column = seed.map(|_| col("seed")).transpose()?;
    let mut elapsed = 0.0;
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("{}: {e}", path.display()))?;
        let num = |i: usize| {
            record.get(i).and_then(|s| s.parse::<f64>().ok()).ok_or_else(|| format!("{}: bad row", path.display()))
        };
        if seed_column.is_some_and(|i| record.get(i).and_then(|s| s.parse::<u64>().ok()) != seed) {
            continue;
        }
        elapsed += num(collect)? + num(learn)?;
        out.push((num(step)?, elapsed));
    }
    Ok(out)
}

/// One run: its env id, experiment name, smoothed (global_step, return) points (held at the last
/// value to the run's end) and its length in steps.
struct Curve {
    env_id: String,
    exp_name: String,
    points: Vec<(f64, f64)>,
    steps: f64,
}

/// The (x, y) pairs of two named columns of a CSV file, one per row (with `seed`, the rows of that
/// seed: a run of several seeds, `ppo_seeds`'s, has a column `seed`, of whole numbers up to 2^64 - 1).
fn read_xy(path: &Path, x: &str, y: &str, seed: Option<u64>) -> Result<Vec<(f64, f64)>, String> {
    let (mut reader, col) = open_table(path)?;
    let (x, y, seed_column) = (col(x)?, col(y)?, seed.map(|_| col("seed")).transpose()?);
    let mut out = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("{}: {e}", path.display()))?;
        let num = |i: usize| {
            record
                .get(i)
                .and_then(|s| s.parse::<f64>().ok())
                .ok_or_else(|| format!("{}: bad row {record:?}", path.display()))
        };
        if seed_column.is_some_and(|i| record.get(i).and_then(|s| s.parse::<u64>().ok()) != seed) {
            continue;
        }
        out.push((num(x)?, num(y)?));
    }
    Ok(out)
}

/// The seeds of a run of several (the values of updates.csv's column `seed`, in order), or `[None]`.
fn seeds_of(dir: &Path) -> Result<Vec<Option<u64>>, String> {
    let path = dir.join("updates.csv");
    let Ok((mut reader, col)) = open_table(&path) else { return Ok(vec![None]) }; // read_run says what is wrong
    let Ok(column) = col("seed") else { return Ok(vec![None]) };
    let mut seeds: Vec<Option<u64>> = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("{}: {e}", path.display()))?;
        let seed = record.get(column).and_then(|s| s.parse::<u64>().ok());
        let seed = seed.ok_or_else(|| format!("{}: a seed that is not a whole number: {record:?}", path.display()))?;
        if !seeds.contains(&Some(seed)) {
            seeds.push(Some(seed));
        }
    }
    Ok(seeds)
}

/// One run's curve, or with `seed` one seed's of a run of several.
fn read_run(
    dir: &Path,
    seed: Option<u64>,
    window: usize,
    x_axis: XAxis,
    metric: Option<&str>,
) -> Result<Curve, String> {
    let args_path = dir.join("args.json");
    let text = std::fs::read_to_string(&args_path).map_err(|e| format!("{}: {e}", args_path.display()))?;
    let args: serde_json::Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", args_path.display()))?;
    let field =
        |k: &str| args[k].as_str().map(String::from).ok_or_else(|| format!("{}: no '{k}'", args_path.display()));
    let mut raw = match metric {
        Some(column) => read_xy(&dir.join("updates.csv"), "global_step", column, seed)?,
        None => read_xy(&dir.join("episodes.csv"), "global_step", "charts/episodic_return", seed)?,
    };
    // the run's length: its last update's global step (a run's last episode ends before it), or its
    // last episode's where updates.csv cannot be read
    let last_update =
        read_xy(&dir.join("updates.csv"), "global_step", "global_step", seed).ok().and_then(|u| u.last().copied());
    let steps = last_update.map_or(f64::NAN, |u| u.0).max(raw.last().map_or(f64::NAN, |p| p.0));
    let mut end = steps;
    if x_axis == XAxis::Seconds {
        // an episode that ended during an update is placed at that update's end
        let elapsed = read_elapsed(dir, seed)?;
        for point in raw.iter_mut() {
            let i = elapsed.partition_point(|&(step, _)| step < point.0).min(elapsed.len().saturating_sub(1));
            point.0 = elapsed.get(i).map_or(f64::NAN, |e| e.1);
        }
        end = elapsed.last().map_or(f64::NAN, |e| e.1);
    }
    // trailing moving average over `window` episodes (over the episodes so far where there are fewer)
    let mut points: Vec<(f64, f64)> = (0..raw.len())
        .map(|i| {
            let from = (i + 1).saturating_sub(window);
            (raw[i].0, raw[from..=i].iter().map(|p| p.1).sum::<f64>() / (i + 1 - from) as f64)
        })
        .collect();
    // from the last episode to the run's end the average of the last episodes stands (runs of one
    // length then end together, not one after the other)
    if let Some(&(x, y)) = points.last() {
        if end > x {
            points.push((end, y));
        }
    }
    Ok(Curve { env_id: field("env_id")?, exp_name: field("exp_name")?, points, steps })
}

/// A plain number for a tick or a value on an axis spanning `range`: enough decimals to tell ticks
/// apart, no trailing zeros (`1.8`, `250`, `0.00025`).
fn plain(v: f64, range: f64) -> String {
    let decimals = if range > 0.0 && range.is_finite() { (3 - range.log10().floor() as i32).clamp(0, 15) } else { 3 };
    let text = format!("{v:.*}", decimals as usize);
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    if text == "-0" {
        "0".into()
    } else {
        text.into()
    }
}

/// A tick of a global-step axis spanning `range`: `0`, `500`, `12.5k`, `1.5M`.
fn steps_tick(x: f64, range: f64) -> String {
    match x.abs() {
        a if a >= 1e6 => format!("{}M", plain(x / 1e6, range / 1e6)),
        a if a >= 1e3 => format!("{}k", plain(x / 1e3, range / 1e3)),
        _ => plain(x, range),
    }
}

/// A whole count of steps with thousands separators: `49,664`.
fn thousands(n: f64) -> String {
    let digits = format!("{:.0}", n.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0.0 {
        out.insert(0, '-');
    }
    out
}

/// The curve's value at `x` by linear interpolation (None outside its range).
fn interpolate(points: &[(f64, f64)], x: f64) -> Option<f64> {
    let i = points.partition_point(|p| p.0 < x);
    match (points.get(i.wrapping_sub(1)), points.get(i)) {
        (_, Some(b)) if b.0 == x => Some(b.1),
        (Some(a), Some(b)) => Some(a.1 + (b.1 - a.1) * (x - a.0) / (b.0 - a.0)),
        _ => None,
    }
}

fn main() {
    let fail = |msg: String| -> ! {
        eprintln!("error: {msg}");
        std::process::exit(2)
    };
    let args = Args::try_parse().unwrap_or_else(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => e.exit(),
        // clap's first paragraph (the error and the allowed values), without its usage lines
        _ => fail(
            e.to_string().split("\n\n").next().unwrap_or_default().trim_start_matches("error: ").replace("\n  ", " "),
        ),
    });
    let font = std::fs::read(&args.font).unwrap_or_else(|e| {
        fail(format!(
            "cannot read font {} ({e}); install Debian's fonts-dejavu-core or pass --font",
            args.font.display()
        ))
    });
    if plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(font.into_boxed_slice())).is_err() {
        fail(format!("{} is not a usable TrueType font", args.font.display()));
    }
    if let Some(table) = &args.solved_table {
        draw_solved_table(table, &args.out).unwrap_or_else(|e| fail(e));
        println!("wrote {}", args.out.display());
        return;
    }
    if let Some(table) = &args.workers_table {
        draw_workers_table(table, &args.out).unwrap_or_else(|e| fail(e));
        println!("wrote {}", args.out.display());
        return;
    }
    // env id -> experiment name -> curves (one per seed)
    let mut groups: BTreeMap<String, BTreeMap<String, Vec<Curve>>> = BTreeMap::new();
    for dir in &args.runs {
        // a run of several seeds (ppo_seeds) is drawn as that many runs
        for seed in seeds_of(dir).unwrap_or_else(|e| fail(e)) {
            let curve =
                read_run(dir, seed, args.window, args.x_axis, args.metric.as_deref()).unwrap_or_else(|e| fail(e));
            if curve.points.is_empty() {
                eprintln!("skipping {}: no finished episodes", dir.display());
                continue;
            }
            groups.entry(curve.env_id.clone()).or_default().entry(curve.exp_name.clone()).or_default().push(curve);
        }
    }
    if groups.is_empty() {
        fail("no run with finished episodes".into());
    }

    let what = args.metric.as_deref().unwrap_or("episodic return");
    let unit = if args.metric.is_some() { "updates" } else { "episodes" };
    let root = BitMapBackend::new(&args.out, (900, 540 * groups.len() as u32)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        root.fill(&WHITE)?;
        for (panel, (env_id, experiments)) in root.split_evenly((groups.len(), 1)).iter().zip(&groups) {
            // what the line and the band are (what is computed below), under the title and printed
            let several = experiments.values().any(|c| c.len() > 1);
            // runs that end at different x (steps, or seconds), whose mean and band end in fewer runs
            let end = |c: &Curve| c.points[c.points.len() - 1].0;
            let ragged = experiments.values().any(|c| c.iter().any(|r| end(r) != end(&c[0])));
            let smoothed = match args.window {
                1 => what.to_string(),
                n => format!("{what} averaged over its last {n} {unit}"),
            };
            let mut notes = vec![match several {
                true => format!("line: mean over the runs of each run's {smoothed}"),
                false => format!("line: the run's {smoothed}"),
            }];
            let band = [
                several.then(|| "band: min–max over the runs".to_string()),
                ragged.then(|| "past a run's end, mean and band are of the runs that go on".to_string()),
            ];
            notes.extend(band.into_iter().flatten().reduce(|a, b| format!("{a}; {b}")));
            println!("{env_id}: {}", notes.join("; "));
            let mut area = panel.margin(6, 0, 0, 0).titled(env_id, ("sans-serif", 26))?;
            for note in &notes {
                area = area.titled(note, ("sans-serif", 15).into_font().color(&RGBColor(70, 70, 70)))?;
            }

            let all = experiments.values().flatten().flat_map(|c| c.points.iter());
            let (mut x_max, mut y_min, mut y_max) = (1.0f64, f64::MAX, f64::MIN);
            for &(x, y) in all {
                (x_max, y_min, y_max) = (x_max.max(x), y_min.min(y), y_max.max(y));
            }
            let pad = match y_max - y_min {
                d if d > 0.0 => d * 0.05,
                _ if y_max != 0.0 => y_max.abs() * 0.1,
                _ => 1.0,
            };
            let (y_lo, y_hi) = (y_min - pad, y_max + pad);
            let seconds = args.x_axis == XAxis::Seconds;
            let x_text = |x: f64| if seconds { plain(x, x_max) } else { steps_tick(x, x_max) };
            // room for the widest y tick label (about 8 pixels a character) beside the axis name
            let y_chars = [y_lo, y_hi].map(|y| plain(y, y_hi - y_lo).len()).into_iter().max().unwrap_or(0);
            let mut chart = ChartBuilder::on(&area)
                .margin(12)
                .margin_top(4)
                .x_label_area_size(40)
                .y_label_area_size(30 + 8 * y_chars.max(4) as u32)
                .build_cartesian_2d(0.0..x_max, y_lo..y_hi)?;
            chart
                .configure_mesh()
                .x_desc(if seconds { "seconds (collection and learning)" } else { "global step" })
                .y_desc(what)
                .x_label_formatter(&|x| x_text(*x))
                .y_label_formatter(&|y| plain(*y, y_hi - y_lo))
                .label_style(("sans-serif", 14))
                .draw()?;
            // each experiment's (x, mean, min, max) and legend label, for the legend's corner
            let mut drawn: Vec<Vec<(f64, f64, f64, f64)>> = Vec::new();
            let mut labels = Vec::new();
            for (k, (exp_name, curves)) in experiments.iter().enumerate() {
                let color = Palette99::pick(k).to_rgba();
                // mean and min-max band over seeds on a common grid, each point from the seeds that reach it
                let lo = curves.iter().map(|c| c.points[0].0).fold(f64::MAX, f64::min);
                let hi = curves.iter().map(end).fold(f64::MIN, f64::max);
                let grid: Vec<f64> =
                    (0..args.points).map(|i| lo + (hi - lo) * i as f64 / (args.points - 1).max(1) as f64).collect();
                let stats: Vec<(f64, f64, f64, f64)> = grid
                    .iter()
                    .filter_map(|&x| {
                        let ys: Vec<f64> = curves.iter().filter_map(|c| interpolate(&c.points, x)).collect();
                        (!ys.is_empty()).then(|| {
                            let mean = ys.iter().sum::<f64>() / ys.len() as f64;
                            (
                                x,
                                mean,
                                ys.iter().copied().fold(f64::MAX, f64::min),
                                ys.iter().copied().fold(f64::MIN, f64::max),
                            )
                        })
                    })
                    .collect();
                let band = curves.len() > 1;
                if band {
                    let band = stats.iter().map(|s| (s.0, s.3)).chain(stats.iter().rev().map(|s| (s.0, s.2)));
                    chart.draw_series(std::iter::once(Polygon::new(band.collect::<Vec<_>>(), color.mix(0.2))))?;
                }
                // how many runs, and where their lengths differ how many of each length:
                // "ppo (3 runs: 2 of 50,000 steps, 1 of 500,000)"
                let mut lengths: Vec<(f64, usize)> = Vec::new();
                let mut steps: Vec<f64> = curves.iter().map(|c| c.steps).collect();
                steps.sort_by(f64::total_cmp);
                for s in steps {
                    match lengths.last_mut() {
                        Some((l, n)) if *l == s => *n += 1,
                        _ => lengths.push((s, 1)),
                    }
                }
                let runs = format!("{} run{}", curves.len(), if curves.len() == 1 { "" } else { "s" });
                let label = match lengths.len() {
                    1 => format!("{exp_name} ({runs})"),
                    _ => {
                        let each = lengths.iter().enumerate().map(|(i, (l, n))| {
                            format!("{n} of {}{}", thousands(*l), if i == 0 { " steps" } else { "" })
                        });
                        format!("{exp_name} ({runs}: {})", each.collect::<Vec<_>>().join(", "))
                    }
                };
                if let Some(&(x, mean, _, _)) = stats.last() {
                    let at = if seconds {
                        format!("{} seconds", plain(x, x_max))
                    } else {
                        format!("{} steps", thousands(x))
                    };
                    println!("{env_id}, {label}: the line ends at {} ({at})", plain(mean, y_hi - y_lo));
                }
                chart
                    .draw_series(LineSeries::new(stats.iter().map(|s| (s.0, s.1)), color.stroke_width(2)))?
                    .label(label.clone())
                    .legend(move |(x, y)| {
                        let fill = if band { color.mix(0.2) } else { TRANSPARENT };
                        EmptyElement::at((x, y))
                            + Rectangle::new([(0, -6), (20, 6)], fill.filled())
                            + PathElement::new(vec![(0, 0), (20, 0)], color.stroke_width(2))
                    });
                drawn.push(stats);
                labels.push(label);
            }
            // the legend in the corner where it covers the fewest points of the lines and bands
            let (w, h) = chart.plotting_area().dim_in_pixel();
            let chars = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as f64;
            let (bw, bh) = ((chars * 8.0 + 60.0) / w as f64, (labels.len() as f64 * 22.0 + 24.0) / h as f64);
            let corners = [
                (SeriesLabelPosition::LowerRight, 1.0 - bw, 1.0, 0.0, bh),
                (SeriesLabelPosition::UpperLeft, 0.0, bw, 1.0 - bh, 1.0),
                (SeriesLabelPosition::UpperRight, 1.0 - bw, 1.0, 1.0 - bh, 1.0),
                (SeriesLabelPosition::LowerLeft, 0.0, bw, 0.0, bh),
            ];
            let covered = |(x0, x1, y0, y1): (f64, f64, f64, f64)| {
                let y = |v: f64| (v - y_lo) / (y_hi - y_lo);
                let inside =
                    |s: &&(f64, f64, f64, f64)| (x0..=x1).contains(&(s.0 / x_max)) && y(s.3) >= y0 && y(s.2) <= y1;
                drawn.iter().flatten().filter(inside).count()
            };
            let position = corners
                .into_iter()
                .min_by_key(|c| covered((c.1, c.2, c.3, c.4)))
                .map_or(SeriesLabelPosition::LowerRight, |c| c.0);
            chart
                .configure_series_labels()
                .position(position)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .draw()?;
        }
        root.present()?;
        Ok(())
    };
    draw().unwrap_or_else(|e| fail(format!("cannot draw {}: {e}", args.out.display())));
    println!("wrote {}", args.out.display());
}

/// miniDRL's three scaling figures from scripts/bench_workers' table: per series (fixed batch, fixed
/// envs per worker, one worker) a panel of SPS, experience SPS and learning SPS against its x (the
/// workers, or one worker's envs), and ppo_lstm's SPS with the same envs (series `ppo_lstm_<series>`).
fn draw_workers_table(table: &Path, out: &Path) -> Result<(), String> {
    let (mut reader, col) = open_table(table)?;
    let (series, workers, envs) = (col("series")?, col("workers")?, col("envs_per_worker")?);
    let metrics = [("sps", "SPS"), ("experience_sps", "experience SPS"), ("learning_sps", "learning SPS")];
    let metric_cols = metrics.map(|(c, _)| col(c));
    // series -> (x, [sps, experience sps, learning sps])
    let mut points: BTreeMap<String, Vec<(f64, [f64; 3])>> = BTreeMap::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("{}: {e}", table.display()))?;
        let num = |i: usize| record.get(i).and_then(|s| s.parse::<f64>().ok());
        let name = record.get(series).unwrap_or_default().to_string();
        let x = if name.ends_with("one_worker") { num(envs) } else { num(workers) };
        let mut ys = [0.0; 3];
        for (y, c) in ys.iter_mut().zip(&metric_cols) {
            *y = num(*c.as_ref().map_err(Clone::clone)?).ok_or_else(|| format!("{}: bad row", table.display()))?;
        }
        points.entry(name).or_default().push((x.ok_or_else(|| format!("{}: bad row", table.display()))?, ys));
    }
    let panels = [
        ("fixed_batch", "fixed batch: SPS against workers", "workers"),
        ("fixed_envs", "fixed envs per worker: SPS against workers", "workers"),
        ("one_worker", "one worker: SPS against its envs", "envs per worker"),
    ];
    let panels: Vec<_> = panels.into_iter().filter(|(s, _, _)| points.contains_key(*s)).collect();
    if panels.is_empty() {
        return Err(format!("{}: no series fixed_batch, fixed_envs or one_worker", table.display()));
    }
    let root = BitMapBackend::new(out, (900, 420 * panels.len() as u32)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        root.fill(&WHITE)?;
        for (area, (name, caption, x_desc)) in root.split_evenly((panels.len(), 1)).iter().zip(&panels) {
            let ours = &points[*name];
            let theirs = points.get(&format!("ppo_lstm_{name}")).cloned().unwrap_or_default();
            let all = ours.iter().chain(&theirs);
            let x_max = all.clone().map(|p| p.0).fold(1.0, f64::max);
            let y_max = all.flat_map(|p| p.1).fold(1.0, f64::max) * 1.1;
            let mut chart = ChartBuilder::on(area)
                .caption(*caption, ("sans-serif", 22))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70)
                .build_cartesian_2d(0.5..x_max + 0.5, 0.0..y_max)?;
            chart
                .configure_mesh()
                .x_desc(*x_desc)
                .y_desc("steps per second")
                // whole workers and envs only
                .x_labels((x_max as usize * 2).min(64))
                .x_label_formatter(&|x| if (x - x.round()).abs() < 1e-6 { format!("{x:.0}") } else { String::new() })
                .y_label_formatter(&|y| format!("{y:.0}"))
                .label_style(("sans-serif", 14))
                .draw()?;
            let lines =
                metrics.iter().enumerate().map(|(k, (_, label))| (ours, k, format!("ppo_lstm_workers {label}")));
            let lines = lines.chain([(&theirs, 0, "ppo_lstm SPS, same envs in one process".to_string())]);
            for (i, (series, k, label)) in lines.enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let xy: Vec<(f64, f64)> = series.iter().map(|p| (p.0, p.1[k])).collect();
                chart
                    .draw_series(LineSeries::new(xy.clone(), color.stroke_width(2)))?
                    .label(label)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
                chart.draw_series(xy.into_iter().map(|p| Circle::new(p, 4, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .draw()?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("cannot draw {}: {e}", out.display()))
}

/// scripts/study_cartpole's runs: per table a panel, per setting the fraction of its runs solved by each
/// episode (a run solved at episode n counts from n on), to the study's 2,500 episodes or the last solved run's;
/// where the runs have a `point` column (the study's base points), a line per setting and point, the second point's
/// dashed.
fn draw_solved_table(table: &Path, out: &Path) -> Result<(), String> {
    let (mut reader, col) = open_table(table)?;
    let (table_col, setting_col, episodes_col) = (col("table")?, col("setting")?, col("episodes")?);
    let point_col = col("point").ok();
    // the points (in the order first seen); table -> (setting, point) -> each run's episodes to solved (None:
    // unsolved), in the order first seen
    let mut points: Vec<String> = Vec::new();
    let mut runs: Vec<(String, Vec<((String, String), Vec<Option<f64>>)>)> = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| format!("{}: {e}", table.display()))?;
        let field = |i: usize| record.get(i).unwrap_or_default().to_string();
        let episodes = field(episodes_col).parse::<f64>().ok();
        let at = runs.iter().position(|(t, _)| *t == field(table_col)).unwrap_or_else(|| {
            runs.push((field(table_col), Vec::new()));
            runs.len() - 1
        });
        let point = point_col.map(field).unwrap_or_default();
        if !points.contains(&point) {
            points.push(point.clone());
        }
        let (settings, key) = (&mut runs[at].1, (field(setting_col), point));
        match settings.iter_mut().find(|(s, _)| *s == key) {
            Some((_, list)) => list.push(episodes),
            None => settings.push((key, vec![episodes])),
        }
    }
    if runs.is_empty() {
        return Err(format!("{}: no runs", table.display()));
    }
    let root = BitMapBackend::new(out, (900, 360 * runs.len() as u32)).into_drawing_area();
    let draw = || -> Result<(), Box<dyn std::error::Error>> {
        root.fill(&WHITE)?;
        for (area, (name, settings)) in root.split_evenly((runs.len(), 1)).iter().zip(&runs) {
            let solved = settings.iter().flat_map(|(_, list)| list.iter().flatten());
            let last = solved.fold(2500.0f64, |m, &e| m.max(e));
            let mut chart = ChartBuilder::on(area)
                .caption(name, ("sans-serif", 22))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(60)
                .build_cartesian_2d(0.0..last, 0.0..1.05)?;
            chart
                .configure_mesh()
                .x_desc("episodes")
                .y_desc("fraction of runs solved")
                .x_label_formatter(&|x| format!("{x:.0}"))
                .y_label_formatter(&|y| format!("{y:.1}"))
                .label_style(("sans-serif", 14))
                .draw()?;
            let mut names: Vec<&String> = Vec::new(); // a color per setting, the same at every point
            for ((setting, point), list) in settings {
                let k = names.iter().position(|s| *s == setting).unwrap_or_else(|| {
                    names.push(setting);
                    names.len() - 1
                });
                let color = Palette99::pick(k).to_rgba();
                let n = list.len() as f64;
                let solved_by = |x: f64| list.iter().filter(|e| e.is_some_and(|e| e <= x)).count() as f64 / n;
                let line: Vec<(f64, f64)> =
                    (0..=250).map(|i| i as f64 * last / 250.0).map(|x| (x, solved_by(x))).collect();
                let label = match point.as_str() {
                    "" => format!("{setting} ({} runs)", list.len()),
                    point => format!("{setting}, {point} ({} runs)", list.len()),
                };
                let style = color.stroke_width(2);
                let drawn = if points.first().is_none_or(|first| first == point) {
                    chart.draw_series(LineSeries::new(line, style))?
                } else {
                    chart.draw_series(DashedLineSeries::new(line, 6, 4, style))?
                };
                drawn.label(label).legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 14))
                .draw()?;
        }
        root.present()?;
        Ok(())
    };
    draw().map_err(|e| format!("cannot draw {}: {e}", out.display()))
}
