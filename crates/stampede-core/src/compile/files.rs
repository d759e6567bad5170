//! The files a scenario names (data CSVs, multipart uploads, TLS certificates and keys): read
//! from the disk beside the scenario, or, when the operator validates a LoadTest, from the
//! contents of `spec.data`. Every file goes through here, so the CLI, the runner and the
//! operator's validation see the same files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where named files come from.
#[derive(Clone, Copy, Debug)]
pub struct Files<'a> {
    /// Folder that relative names start from (the scenario file's).
    base_dir: &'a Path,
    /// Contents by name, used instead of the disk when given (`spec.data`).
    contents: Option<&'a BTreeMap<String, Vec<u8>>>,
}

/// Why a named file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// A name the LoadTest's `spec.data` does not hold.
    #[error("no data file `{name}` in spec.data (it has: {known})")]
    NotInData {
        /// The file name the scenario gave.
        name: String,
        /// The names `spec.data` holds, comma-separated (`none` when it holds none).
        known: String,
    },
    /// A file on the disk that could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The path tried: the name joined to the scenario file's folder.
        path: PathBuf,
        /// Why reading it failed.
        source: std::io::Error,
    },
}

impl<'a> Files<'a> {
    /// Files named relative to `base_dir` (the scenario file's folder), or taken from `contents`
    /// (a LoadTest's `spec.data`) when given.
    pub fn new(base_dir: &'a Path, contents: Option<&'a BTreeMap<String, Vec<u8>>>) -> Self {
        Files { base_dir, contents }
    }

    /// The file's bytes.
    pub fn read(&self, name: &str) -> Result<Vec<u8>, FileError> {
        match self.contents {
            Some(contents) => contents.get(name).cloned().ok_or_else(|| {
                let known: Vec<&str> = contents.keys().map(String::as_str).collect();
                let known = if known.is_empty() { "none".into() } else { known.join(", ") };
                FileError::NotInData { name: name.to_string(), known }
            }),
            None => {
                let path = self.base_dir.join(name);
                std::fs::read(&path).map_err(|source| FileError::Read { path, source })
            }
        }
    }

    /// The folder relative names start from.
    pub fn base_dir(&self) -> &'a Path {
        self.base_dir
    }

    /// The contents given instead of the disk (`spec.data`).
    pub fn contents(&self) -> Option<&'a BTreeMap<String, Vec<u8>>> {
        self.contents
    }

    /// How messages show the file: its path on disk, or its name in `spec.data`.
    pub fn shown(&self, name: &str) -> PathBuf {
        if self.contents.is_some() { PathBuf::from(name) } else { self.base_dir.join(name) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_come_from_spec_data_when_given_else_from_the_disk() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), b"disk").unwrap();
        let disk = Files::new(dir.path(), None);
        assert_eq!(disk.read("a.txt").unwrap(), b"disk");
        assert!(disk.read("b.txt").unwrap_err().to_string().starts_with("cannot read "));
        assert_eq!(disk.shown("a.txt"), dir.path().join("a.txt"));

        let data = BTreeMap::from([("a.txt".to_string(), b"data".to_vec())]);
        let from_data = Files::new(dir.path(), Some(&data));
        assert_eq!(from_data.read("a.txt").unwrap(), b"data");
        assert_eq!(
            from_data.read("b.txt").unwrap_err().to_string(),
            "no data file `b.txt` in spec.data (it has: a.txt)"
        );
        assert_eq!(from_data.shown("a.txt"), PathBuf::from("a.txt"));
    }
}
