//! The files the CLI writes (reports, summaries, imported scenarios): whole or not at all.
//!
//! Each is written into a temporary file in its own folder, then renamed over its name, so a
//! reader (a CI parser, `--baseline` of the next run) sees the old file or the new one, never
//! an empty or half-written one, and a failure leaves what was there.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// Where the bytes of `path` go: the file a symbolic link names (the link stays a link), or
/// `path` itself.
fn destination(path: &Path) -> PathBuf {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        _ => path.to_path_buf(),
    }
}

/// Whether `path` names something that is not a regular file: `/dev/stdout`, a pipe. Those
/// are written in place (a rename would replace the device or the pipe with a file).
fn is_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file())
}

/// The folder a temporary file for `path` is created in (its own, for the rename to stay on
/// one file system).
fn folder(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// A temporary file beside `path`, with the permissions a new file gets (`0666` less the
/// umask, as `File::create`) or those `path` already has.
fn temporary_beside(path: &Path) -> io::Result<tempfile::NamedTempFile> {
    let mut builder = tempfile::Builder::new();
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let prefix = format!(".{name}.");
    builder.prefix(&prefix).suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let file = builder.tempfile_in(folder(path))?;
    if let Ok(existing) = std::fs::metadata(path) {
        file.as_file().set_permissions(existing.permissions())?;
    }
    Ok(file)
}

/// Checks before a run that `path` can be written at its end, without touching it: its
/// folder takes a new file and `path` is not a folder.
pub(crate) fn check_writable(path: &Path) -> io::Result<()> {
    let path = destination(path);
    if std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
        return Err(io::Error::new(io::ErrorKind::IsADirectory, "it is a folder"));
    }
    if is_special(&path) {
        return std::fs::OpenOptions::new().append(true).open(&path).map(drop);
    }
    temporary_beside(&path).map(drop)
}

/// Writes `contents` to `path` whole: into a temporary file in the same folder, then renamed
/// over `path`. On failure `path` is as it was and the temporary file is removed.
pub(crate) fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    let path = destination(path);
    if is_special(&path) {
        return std::fs::OpenOptions::new().write(true).open(&path)?.write_all(contents);
    }
    let mut file = temporary_beside(&path)?;
    file.write_all(contents)?;
    file.as_file().sync_all()?;
    file.persist(&path).map_err(|e| e.error)?;
    Ok(())
}

/// Appends `contents` to what `path` holds (a CI step summary file is shared by the steps of
/// a job), the whole file replaced at once as [`write_atomically`] does.
pub(crate) fn append_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    let path = destination(path);
    if is_special(&path) {
        return std::fs::OpenOptions::new().append(true).open(&path)?.write_all(contents);
    }
    let mut whole = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    whole.extend_from_slice(contents);
    write_atomically(&path, &whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in `dir`, sorted.
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "old, and longer than the new one").unwrap();
        write_atomically(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(names(dir.path()), ["report.json"]);
    }

    #[test]
    fn a_write_that_cannot_happen_leaves_the_file_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(&path, "old").unwrap();
        // A folder cannot be renamed over by a file.
        let folder = dir.path().join("a-folder");
        std::fs::create_dir(&folder).unwrap();
        assert!(write_atomically(&folder, b"new").is_err());
        assert!(check_writable(&folder).is_err());
        assert!(write_atomically(&dir.path().join("missing/report.json"), b"new").is_err());
        assert!(check_writable(&dir.path().join("missing/report.json")).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        assert_eq!(names(dir.path()), ["a-folder", "report.json"]);
    }

    #[test]
    fn checking_a_file_is_writable_does_not_create_or_touch_it() {
        let dir = tempfile::tempdir().unwrap();
        let (new, old) = (dir.path().join("new.xml"), dir.path().join("old.xml"));
        std::fs::write(&old, "kept").unwrap();
        check_writable(&new).unwrap();
        check_writable(&old).unwrap();
        assert_eq!(names(dir.path()), ["old.xml"]);
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "kept");
    }

    #[test]
    fn an_append_keeps_what_the_file_held() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.md");
        append_atomically(&path, b"one\n").unwrap();
        append_atomically(&path, b"two\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
        assert_eq!(names(dir.path()), ["summary.md"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_link_stays_a_link_and_its_file_gets_the_bytes_with_its_permissions() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let (file, link) = (dir.path().join("real.json"), dir.path().join("link.json"));
        std::fs::write(&file, "old").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        std::os::unix::fs::symlink(&file, &link).unwrap();
        write_atomically(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new");
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o640);
    }
}
