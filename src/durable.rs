//! Durable writes: a file written to a temporary name of this process's, then renamed into place, its data and
//! the directory's entry on disk before the write counts as done (checkpoints, the CSVs cut back on `--resume`,
//! args.json, the saved model).

use std::path::{Path, PathBuf};

/// The temporary file that `path` is written to before a rename puts it in place: unique to this
/// process (`checkpoint.tmp.<pid>.safetensors`), so that no two processes ever write one file.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("file");
    let ext = path.extension().and_then(|s| s.to_str()).map_or(String::new(), |e| format!(".{e}"));
    path.with_file_name(format!("{stem}.tmp.{}{ext}", std::process::id()))
}

/// Puts `tmp` (a [`tmp_path`], written and closed) in place as `path` so that a crash, a kill or a
/// power loss leaves either the old file or the new one whole, on disk: `tmp`'s data reach the disk
/// (fsync), the rename, then the directory's entry (fsync of the directory).
pub(crate) fn rename_durably(tmp: &Path, path: &Path) -> std::io::Result<()> {
    std::fs::File::open(tmp)?.sync_all()?;
    std::fs::rename(tmp, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// fsync of a directory: its entries (a file made or renamed in it) reach the disk.
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(if dir.as_os_str().is_empty() { Path::new(".") } else { dir })?.sync_all()
}
