//! Data feeding: CSV files whose rows fill template variables (`{{users.email}}`).
//!
//! A file is loaded once and shared read-only by every VU (an `Arc`, never a copy per VU).
//! Each iteration a VU takes one row: in file order across all VUs (`sequential`), at random
//! (`random`), or each row at most once across all VUs (`unique`); runners of one LoadTest
//! take disjoint parts (row *i* belongs to runner *i mod count*).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use stampede_model::scenario::DataSpec;
use stampede_model::scenario::{DataMode, OnExhausted};

use crate::compile::files::Files;

/// A loaded data file.
#[derive(Debug)]
pub struct DataSource {
    /// Its key under `data:`, the prefix of its variables (`users` in `{{users.email}}`).
    pub name: String,
    /// Column names from the CSV header row, trimmed, in file order; column `i` fills slot `first_slot + i`.
    pub columns: Vec<String>,
    /// The records, each a value per column (only this runner's share when runners split the file).
    pub rows: Arc<Vec<Vec<String>>>,
    /// Which row an iteration takes (`mode`: `sequential`, `random` or `unique`).
    pub mode: DataMode,
    /// What happens when the rows are used up, default applied (`stop` for `unique`, else `loop`);
    /// unused with `random`.
    pub on_exhausted: OnExhausted,
    /// Slot of the first column in a VU's value slots.
    pub first_slot: usize,
}

/// Reads `spec.csv`: a header row, then records. Keeps only the rows of runner `index` of
/// `count` when a partition is given.
pub fn load(
    name: &str,
    spec: &DataSpec,
    files: Files<'_>,
    partition: Option<(u32, u32)>,
) -> Result<(Vec<String>, Vec<Vec<String>>), String> {
    let path = files.shown(&spec.csv);
    let bytes = files.read(&spec.csv).map_err(|e| e.to_string())?;
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes.as_slice());
    let columns: Vec<String> = reader
        .headers()
        .map_err(|e| format!("`{}`: {e}", path.display()))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    if columns.is_empty() || columns.iter().all(String::is_empty) {
        return Err(format!("`{}`: the file is empty (a header row names the columns)", path.display()));
    }
    if columns.iter().any(String::is_empty) {
        return Err(format!("`{}`: the header row needs a name for every column", path.display()));
    }
    if let Some(dup) = columns.iter().enumerate().find(|(i, c)| columns[..*i].contains(c)).map(|(_, c)| c) {
        return Err(format!("`{}`: the header row names column `{dup}` twice", path.display()));
    }
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let record = record.map_err(|e| format!("`{}`: {e}", path.display()))?;
        let keep = partition.is_none_or(|(index, count)| i as u64 % u64::from(count.max(1)) == u64::from(index));
        if keep {
            rows.push(record.iter().map(str::to_string).collect());
        }
    }
    if rows.is_empty() && partition.is_none() {
        return Err(format!("data `{name}`: `{}` has no rows", path.display()));
    }
    Ok((columns, rows))
}

/// Shared cursor of one data source during a run.
#[derive(Debug, Default)]
pub struct Cursor {
    next: AtomicU64,
}

impl Cursor {
    /// The row for this iteration, or `None` when the source is used up (`onExhausted: stop`).
    pub fn pick(&self, source: &DataSource, rng: &mut fastrand::Rng) -> Option<usize> {
        let len = source.rows.len() as u64;
        if len == 0 {
            return None;
        }
        match source.mode {
            DataMode::Random => Some(rng.usize(..source.rows.len())),
            DataMode::Sequential | DataMode::Unique => {
                let n = self.next.fetch_add(1, Ordering::Relaxed);
                match source.on_exhausted {
                    OnExhausted::Loop => Some((n % len) as usize),
                    OnExhausted::Stop if n < len => Some(n as usize),
                    OnExhausted::Stop => None,
                }
            }
        }
    }
}

/// Copies row `row` of `source` into the VU's slots.
pub fn fill(source: &DataSource, row: usize, slots: &mut [String]) {
    for (c, value) in source.rows[row].iter().enumerate().take(source.columns.len()) {
        let slot = &mut slots[source.first_slot + c];
        slot.clear();
        slot.push_str(value);
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn source(rows: usize, mode: DataMode, on_exhausted: OnExhausted) -> DataSource {
        DataSource {
            name: "d".into(),
            columns: vec!["a".into()],
            rows: Arc::new((0..rows).map(|i| vec![i.to_string()]).collect()),
            mode,
            on_exhausted,
            first_slot: 0,
        }
    }

    #[test]
    fn unique_rows_are_never_given_twice_and_stop_when_used_up() {
        let s = source(5, DataMode::Unique, OnExhausted::Stop);
        let c = Cursor::default();
        let mut rng = fastrand::Rng::with_seed(1);
        let picked: Vec<Option<usize>> = (0..7).map(|_| c.pick(&s, &mut rng)).collect();
        assert_eq!(picked, vec![Some(0), Some(1), Some(2), Some(3), Some(4), None, None]);
    }

    #[test]
    fn sequential_rows_loop() {
        let s = source(3, DataMode::Sequential, OnExhausted::Loop);
        let c = Cursor::default();
        let mut rng = fastrand::Rng::with_seed(1);
        let picked: Vec<usize> = (0..7).map(|_| c.pick(&s, &mut rng).unwrap()).collect();
        assert_eq!(picked, vec![0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn csv_files_parse_quoted_fields_and_partition_by_runner() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("u.csv"),
            "email,city\n\"a@x.io\",\"Paris, FR\"\nb@x.io,Köln\nc@x.io,\"say \"\"hi\"\"\"\n",
        )
        .unwrap();
        let spec = DataSpec { csv: "u.csv".into(), mode: DataMode::Sequential, on_exhausted: None };
        let (cols, rows) = load("users", &spec, Files::new(dir.path(), None), None).unwrap();
        assert_eq!(cols, vec!["email", "city"]);
        assert_eq!(rows[0], vec!["a@x.io", "Paris, FR"]);
        assert_eq!(rows[1][1], "Köln");
        assert_eq!(rows[2][1], "say \"hi\"");
        let (_, part0) = load("users", &spec, Files::new(dir.path(), None), Some((0, 2))).unwrap();
        let (_, part1) = load("users", &spec, Files::new(dir.path(), None), Some((1, 2))).unwrap();
        assert_eq!((part0.len(), part1.len()), (2, 1));
        assert_eq!(part1[0][0], "b@x.io");
        assert!(
            load("users", &DataSpec { csv: "missing.csv".into(), ..spec.clone() }, Files::new(dir.path(), None), None)
                .unwrap_err()
                .contains("cannot read")
        );
        // From spec.data's files instead of the disk (what the operator validates with).
        let files = std::collections::BTreeMap::from([("u.csv".to_string(), b"email\nz@x.io\n".to_vec())]);
        let (_, rows) = load("users", &spec, Files::new(Path::new("/nowhere"), Some(&files)), None).unwrap();
        assert_eq!(rows, vec![vec!["z@x.io".to_string()]]);
        let missing =
            load("users", &DataSpec { csv: "other.csv".into(), ..spec }, Files::new(dir.path(), Some(&files)), None);
        assert_eq!(missing.unwrap_err(), "no data file `other.csv` in spec.data (it has: u.csv)");
    }
}
