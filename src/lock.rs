//! One writer per run directory: the process that writes `runs/<run-name>/` holds an advisory lock
//! on its file `lock` for its whole life. The OS releases the lock when the process ends, however it
//! ends, so a killed run leaves no stale lock; a second process (a `--resume` of a live run, two
//! resumes at once) is refused before it changes a file. The holder writes its process id into the
//! file, so that the refusal can name it.

use std::io::Write;
use std::path::Path;

/// The lock on a run directory, held while this value lives (the run keeps it to its end).
pub(crate) struct RunLock {
    _file: std::fs::File,
}

impl RunLock {
    /// Takes the lock on `dir`, or says which process holds it. Once held, the temporary files a
    /// writer that died left behind (see [`crate::logs::tmp_path`]; the run's own files', the saved
    /// model's named `<exp_name>`) are removed: no other process writes here.
    pub(crate) fn take(dir: &Path, binary: &str, exp_name: &str) -> Result<RunLock, String> {
        let path = dir.join("lock");
        let opened = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path);
        let mut file = opened.map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        if let Err(e) = file.try_lock() {
            // the holder writes its id right after taking the lock: give it a moment
            let mut holder = String::new();
            for _ in 0..20 {
                holder = std::fs::read_to_string(&path).unwrap_or_default().trim().to_string();
                if !holder.is_empty() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let holder = if holder.is_empty() { "another process".to_string() } else { holder };
            return Err(match e {
                std::fs::TryLockError::WouldBlock => format!(
                    "{} is in use by {holder}: one process writes a run at a time (wait for it to end, or stop it)",
                    dir.display()
                ),
                std::fs::TryLockError::Error(e) => format!("cannot lock {}: {e}", path.display()),
            });
        }
        let id = format!("process {} ({binary})\n", std::process::id());
        file.set_len(0).and_then(|()| file.write_all(id.as_bytes())).and_then(|()| file.flush()).ok();
        for entry in std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))? {
            let leftover = entry.ok().map(|e| e.path()).filter(|p| is_tmp(p, exp_name));
            if let Some(leftover) = leftover {
                let _ = std::fs::remove_file(leftover); // what remains is harmless: it is never read
            }
        }
        Ok(RunLock { _file: file })
    }
}

/// A temporary file [`tmp_path`] makes for one of the run's own files (`<stem>.tmp.<pid><ext>`), or
/// versions before it (`checkpoint.tmp.safetensors`); any other name is the user's (a model saved
/// with `--exp-name a.tmp.b` is `a.tmp.b.safetensors`, and stays).
fn is_tmp(path: &Path, exp_name: &str) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return false };
    let model = format!("{exp_name}.safetensors");
    let own = ["checkpoint.safetensors", "args.json", "updates.csv", "episodes.csv", "eval.csv", &model];
    name == "checkpoint.tmp.safetensors"
        || own.iter().any(|file| {
            let (stem, ext) = file.rsplit_once('.').unwrap_or((file, ""));
            let pid = name.strip_prefix(&format!("{stem}.tmp.")).and_then(|rest| rest.strip_suffix(&format!(".{ext}")));
            pid.is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logs::tmp_path;

    /// A second lock on a held directory is refused with the holder's id; once the holder is
    /// dropped (as when its process ends), the lock is free again, and leftovers are cleared.
    #[test]
    fn one_holder_at_a_time() {
        let dir = tempfile::tempdir().expect("temp dir");
        let held = RunLock::take(dir.path(), "ppo", "ppo").expect("the first takes it");
        let refused = RunLock::take(dir.path(), "ppo", "ppo").err().expect("the second is refused");
        assert!(refused.contains(&format!("in use by process {} (ppo)", std::process::id())), "{refused}");
        let leftover = dir.path().join("checkpoint.tmp.99999.safetensors");
        std::fs::write(&leftover, b"half").expect("write");
        drop(held);
        let _held = RunLock::take(dir.path(), "ppo", "ppo").expect("free again");
        assert!(!leftover.exists(), "a dead writer's temporary file stays");
        assert!(is_tmp(&tmp_path(&dir.path().join("args.json")), "ppo"), "a temporary file is known as one");
    }

    /// Only the run's own temporary files are removed: a model saved under a name with `.tmp.` in it
    /// is the user's (it was, before: every `*.tmp.*` went).
    #[test]
    fn only_the_runs_own_temporary_files_are_temporary() {
        let dir = Path::new("runs/x");
        for exp_name in ["a.tmp.b", "x.tmp.123"] {
            let model = dir.join(format!("{exp_name}.safetensors"));
            assert!(!is_tmp(&model, exp_name), "{exp_name}'s model is no temporary file");
            assert!(is_tmp(&tmp_path(&model), exp_name), "its temporary file is one");
            assert!(!is_tmp(&model, "ppo"), "nor is it another run's temporary file");
        }
        for own in ["checkpoint.safetensors", "updates.csv", "episodes.csv", "eval.csv"] {
            assert!(is_tmp(&tmp_path(&dir.join(own)), "ppo"), "{own}");
        }
        assert!(is_tmp(&dir.join("checkpoint.tmp.safetensors"), "ppo"), "the old name");
        assert!(!is_tmp(&dir.join("notes.tmp.txt"), "ppo") && !is_tmp(&dir.join("updates.tmp.csv"), "ppo"));
    }
}
