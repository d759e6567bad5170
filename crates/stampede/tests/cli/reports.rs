//! #32: the files `stampede run` writes (`--out`, `--html`, `--junit`, `--summary`) are written
//! once the run ended, each whole: invalid input never touches them, and a run that could not
//! take place says why in its JUnit file and summary, and leaves no empty file behind.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::commands::{junit_xsd, stampede, text, write_scenario};

/// A valid scenario against the built-in target: `iterations` iterations of one GET, and
/// `thresholds` (YAML, a list).
fn scenario(iterations: u32, thresholds: &str) -> String {
    format!(
        "name: files\nbaseUrl: builtin\nload: {{executor: constant-vus, vus: 2, iterations: {iterations}}}\n\
         scenarios:\n  - name: s\n    steps:\n      - {{name: get, request: {{url: \"{{{{baseUrl}}}}/get\"}}}}\n\
         thresholds: {thresholds}\n"
    )
}

/// A scenario that parses but does not compile: a template names a variable nothing defines.
const INVALID: &str = "name: files\nbaseUrl: builtin\nload: {executor: constant-vus, vus: 2, iterations: 4}\n\
     scenarios:\n  - name: s\n    steps:\n      - {name: get, request: {url: \"{{baseUrl}}/{{ noSuchVariable }}\"}}\n";

/// The names in `dir` with each file's bytes, sorted.
fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    files.sort();
    files
}

fn arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn a_baseline_that_is_also_the_out_file_is_read_before_the_run_and_replaced_whole_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let last = dir.path().join("last.json");
    let file = write_scenario(dir.path(), &scenario(40, "[]"));
    let run = stampede(&["run", arg(&file), "--quiet", "--out", arg(&last)]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let first = std::fs::read(&last).unwrap();

    // Refused runs leave it as it was: an invalid scenario, a baseline that is not a report.
    let invalid = dir.path().join("invalid.yaml");
    std::fs::write(&invalid, INVALID).unwrap();
    let not_a_report = dir.path().join("not-a-report.json");
    std::fs::write(&not_a_report, "{}").unwrap();
    for (input, baseline) in [(&invalid, &last), (&file, &not_a_report)] {
        let run = stampede(&["run", arg(input), "--quiet", "--baseline", arg(baseline), "--out", arg(&last)]);
        assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
        assert_eq!(std::fs::read(&last).unwrap(), first, "{} with --baseline {}", input.display(), baseline.display());
    }

    // A run that takes place is judged against the old report, then replaces it.
    let file = write_scenario(dir.path(), &scenario(60, "[\"requests.count > baseline\"]"));
    let run = stampede(&["run", arg(&file), "--quiet", "--baseline", arg(&last), "--out", arg(&last)]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let report: Value = serde_json::from_slice(&std::fs::read(&last).unwrap()).unwrap();
    assert_eq!(report["total"]["requests"], 60);
    let verdict = &report["thresholds"][0];
    assert_eq!((verdict["passed"].as_bool(), verdict["baseline"].as_f64()), (Some(true), Some(40.0)), "{verdict}");
    assert_eq!(contents(dir.path()).len(), 4, "no temporary file left: {:?}", contents(dir.path()));
}

#[test]
fn an_invalid_scenario_leaves_every_report_file_as_it_was_and_creates_none() {
    for existing in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let file = write_scenario(dir.path(), INVALID);
        let outputs: Vec<(&str, PathBuf)> = ["out", "html", "junit", "summary"]
            .into_iter()
            .map(|flag| (flag, dir.path().join(format!("{flag}.file"))))
            .collect();
        if existing {
            for (flag, path) in &outputs {
                std::fs::write(path, format!("the {flag} of an earlier run\n")).unwrap();
            }
        }
        let before = contents(dir.path());
        let mut args = vec!["run".to_string(), arg(&file).to_string(), "--quiet".to_string()];
        for (flag, path) in &outputs {
            args.extend([format!("--{flag}"), arg(path).to_string()]);
        }
        let run = stampede(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
        assert!(text(&run.stderr).contains("noSuchVariable"), "{}", text(&run.stderr));
        assert_eq!(contents(dir.path()), before, "existing files: {existing}");
    }
}

#[test]
fn a_run_whose_setup_fails_writes_a_junit_error_case_and_a_summary_saying_why_and_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let file = write_scenario(
        dir.path(),
        &format!(
            "{}setup:\n  - {{name: create data, request: {{url: \"{{{{baseUrl}}}}/status/503\"}}, check: {{status: 200}}}}\n",
            scenario(4, "[\"errors.rate < 1%\"]")
        ),
    );
    let (out, html, junit, summary) = (
        dir.path().join("r.json"),
        dir.path().join("r.html"),
        dir.path().join("junit.xml"),
        dir.path().join("summary.md"),
    );
    std::fs::write(&summary, "## An earlier step's summary\n\n").unwrap();
    let run = stampede(&[
        "run",
        arg(&file),
        "--quiet",
        "--out",
        arg(&out),
        "--html",
        arg(&html),
        "--junit",
        arg(&junit),
        "--summary",
        arg(&summary),
    ]);
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    assert!(!out.exists() && !html.exists(), "no report of a run that did not take place");

    let valid = Command::new("xmllint")
        .args(["--noout", "--schema"])
        .arg(junit_xsd())
        .arg(&junit)
        .output()
        .expect("xmllint (libxml2-utils: bash tests/deps.sh)");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(valid.status.success(), "{}\n{xml}", text(&valid.stderr));
    assert!(xml.contains("<testsuites name=\"files\" tests=\"1\" failures=\"0\" errors=\"1\""), "{xml}");
    let error = xml
        .lines()
        .find(|l| l.contains("<error type=\"not-run\""))
        .unwrap_or_else(|| panic!("no error case in:\n{xml}"));
    assert!(
        error.contains("the run did not take place: setup failed, so no load was sent")
            && error.contains("step `create data`"),
        "{error}"
    );

    let markdown = std::fs::read_to_string(&summary).unwrap();
    assert!(markdown.starts_with("## An earlier step's summary\n\n### Stampede: files\n"), "{markdown}");
    assert!(markdown.contains("❌ **Did not run**: setup failed, so no load was sent"), "{markdown}");
    let names: Vec<String> = contents(dir.path()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["junit.xml", "scenario.yaml", "summary.md"]);
}
