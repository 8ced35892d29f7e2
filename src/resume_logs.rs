//! `--resume` and the run's logs: the CSVs cut back to the checkpoint (what was logged after it goes, a row
//! cut short by a crash too) and TensorBoard's events rebuilt from them, so that no row is missing or
//! repeated; the logs must reach the checkpoint. `RunLog` calls it when it opens a run directory.

use crate::checkpoint::{CheckpointMeta, Start};
use crate::cli::Failure;
use crate::logs::{rename_durably, tmp_path};
use std::path::Path;

/// `--resume`: the logs must hold every row up to the checkpoint (as many as it counted when it was
/// written), or resuming would leave a hole in them.
fn logs_reach(checkpoint: &CheckpointMeta, updates: usize, episodes: usize) -> Result<(), String> {
    // checkpoints of versions before the counts: one update row per iteration
    let (want_updates, want_episodes) = checkpoint.logged.unwrap_or((checkpoint.iteration, episodes));
    if updates < want_updates {
        let (i, missing) = (checkpoint.iteration, want_updates - updates);
        Err(format!(
            "its updates.csv has {updates} rows up to the checkpoint's iteration {i}, {missing} fewer than were logged"
        ))
    } else if episodes < want_episodes {
        let (step, missing) = (checkpoint.global_step, want_episodes - episodes);
        let at = format!("up to the checkpoint's global_step {step}");
        Err(format!("its episodes.csv has {episodes} episodes {at}, {missing} fewer than were logged"))
    } else {
        Ok(())
    }
}

/// A CSV file's header and rows.
pub(crate) type Table = (csv::StringRecord, Vec<csv::StringRecord>);

/// The rows of updates.csv and episodes.csv up to where the loop starts; with `--resume` they must
/// hold every row up to the checkpoint (bad input otherwise). A new run's: none.
pub(crate) fn kept_logs(start: &Start, dir: &Path) -> Result<(Table, Table), Failure> {
    let (iteration, global_step) = (start.iteration as f64, start.global_step as f64);
    let cannot_read = |e: std::io::Error| Failure::running(format!("cannot read {}: {e}", dir.display()));
    let updates_kept = rows_up_to(&dir.join("updates.csv"), Some(("iteration", iteration))).map_err(cannot_read)?;
    let episodes_kept =
        rows_up_to(&dir.join("episodes.csv"), Some(("global_step", global_step))).map_err(cannot_read)?;
    let (updates, episodes) = (("updates.csv", &updates_kept.0), ("episodes.csv", &episodes_kept.0));
    for ((name, header), column) in
        [(updates, "iteration"), (episodes, "global_step"), (episodes, "charts/episodic_return")]
    {
        if !header.is_empty() && !header.iter().any(|h| h == column) {
            let damaged = format!("cannot resume {}: its {name} has no {column} column (damaged)", dir.display());
            return Err(Failure::bad_input(damaged));
        }
    }
    if let Some(checkpoint) = &start.checkpoint {
        logs_reach(checkpoint, updates_kept.1.len(), episodes_kept.1.len())
            .map_err(|e| Failure::bad_input(format!("cannot resume {}: {e}", dir.display())))?;
    }
    Ok((updates_kept, episodes_kept))
}

/// The logs of `dir` cut back to where the loop starts, the rows `kept` ([`kept_logs`]):
/// the CSVs written anew with them (what was logged after the checkpoint goes), and TensorBoard's
/// events too, so that no row is missing or repeated; the writer of the new events (a new run: a
/// new file, empty).
pub(crate) fn logs_anew(
    start: &Start,
    dir: &Path,
    (updates_kept, episodes_kept): &(Table, Table),
) -> std::io::Result<tboard::EventWriter<std::fs::File>> {
    rewrite(&dir.join("updates.csv"), updates_kept)?;
    rewrite(&dir.join("episodes.csv"), episodes_kept)?;
    if start.iteration > 0 {
        println!("resuming {} at iteration {}, global_step {}", dir.display(), start.iteration, start.global_step);
    }
    events_from(dir, [updates_kept, episodes_kept], None)
}

/// The TensorBoard events of `events_dir` written anew from the rows of `logs_dir`'s CSVs (as
/// [`logs_anew`] left them): the rows of seed `seed` where the CSVs have a column `seed` (a log
/// of several seeds), all rows otherwise; the old events go once the new are written.
pub(crate) fn events_anew(
    events_dir: &Path,
    logs_dir: &Path,
    seed: Option<u64>,
) -> std::io::Result<tboard::EventWriter<std::fs::File>> {
    let [updates, episodes] = ["updates.csv", "episodes.csv"].map(|name| rows_up_to(&logs_dir.join(name), None));
    events_from(events_dir, [&updates?, &episodes?], seed)
}

fn events_from(
    dir: &Path,
    tables: [&Table; 2],
    seed: Option<u64>,
) -> std::io::Result<tboard::EventWriter<std::fs::File>> {
    let old_events: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("events.out.tfevents.")))
        .collect();
    let mut tb = tboard::EventWriter::create(dir).map_err(std::io::Error::other)?;
    for (header, rows) in tables {
        let step = header.iter().position(|h| h == "global_step").unwrap_or(0);
        let seed_column = header.iter().position(|h| h == "seed");
        let ours = |row: &csv::StringRecord| match (seed_column, seed) {
            (Some(i), Some(seed)) => row[i].parse::<u64>().is_ok_and(|s| s == seed),
            (None, None) => true,
            _ => false, // a log of seeds has no events of its own; a seed's are in a log of seeds
        };
        for row in rows.iter().filter(|row| ours(row)) {
            let step = row[step].parse::<f64>().unwrap_or(0.0) as i64;
            for (tag, value) in header.iter().zip(row).filter(|(tag, _)| tag.contains('/')) {
                let value = value.parse::<f64>().unwrap_or(f64::NAN) as f32;
                tb.write_scalar(step, tag, value).map_err(std::io::Error::other)?;
            }
        }
    }
    for old in old_events {
        std::fs::remove_file(old)?;
    }
    Ok(tb)
}

/// `--resume`: a CSV file's header and its rows (a row cut short by a crash ends them), with `limit`
/// (column, value) up to the last whose column is at most the value; none when the file does not exist
/// (a new run).
fn rows_up_to(path: &Path, limit: Option<(&str, f64)>) -> std::io::Result<Table> {
    if !path.exists() {
        return Ok(Default::default());
    }
    let mut reader = csv::ReaderBuilder::new().flexible(true).from_path(path)?;
    let header = reader.headers()?.clone();
    let column = limit.map(|(name, value)| (header.iter().position(|h| h == name).unwrap_or(0), value));
    let fits = |r: &csv::StringRecord| {
        r.len() == header.len() && column.is_none_or(|(i, limit)| r[i].parse::<f64>().is_ok_and(|x| x <= limit))
    };
    let rows: Vec<_> = reader.records().map_while(|r| r.ok().filter(fits)).collect();
    Ok((header, rows))
}

/// Writes a CSV file anew with `table` (what was logged after the checkpoint goes), atomically.
fn rewrite(path: &Path, (header, rows): &Table) -> std::io::Result<()> {
    if !path.exists() {
        return Ok(());
    }
    let tmp = tmp_path(path);
    let mut writer = csv::Writer::from_path(&tmp)?;
    if !header.is_empty() {
        writer.write_record(header)?;
    }
    for row in rows {
        writer.write_record(row)?;
    }
    writer.flush()?;
    drop(writer);
    rename_durably(&tmp, path)
}
