//! Fuzzing the scenario parser and compiler: mutated copies of every example and every
//! malformed fixture, and scenarios put together at random from the language's keys, through
//! `parse_str` and `validate` as `stampede validate` runs them. Either may refuse a file; none
//! may panic, overflow its stack or hang. `support` is the workspace's shared fuzz runner
//! (seed, case count, replay: see its header and the README's Development section).

#[path = "fuzz/support.rs"]
mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use stampede_engine::CompileOptions;

use support::Rng;

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(yaml_files(&path));
        } else if path.extension().is_some_and(|x| x == "yaml") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Every example and every malformed fixture, as bytes.
fn corpus() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = yaml_files(&root.join("../../examples"));
    files.extend(yaml_files(&root.join("tests/invalid")));
    let corpus: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    assert!(corpus.len() > 40, "only {} files", corpus.len());
    corpus
}

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Parses and validates `text` as `stampede validate` does (a fixed environment, data files
/// beside the examples, a `baseUrl` given or not); refusing it is fine.
fn parse_and_validate(text: &str, base_url: bool) {
    let path = examples_dir().join("fuzzed.yaml");
    let Ok(file) = stampede_engine::parse_str(text, &path) else { return };
    let opts = CompileOptions {
        base_url: base_url.then(|| "http://127.0.0.1:9/".to_string()),
        env: Some(HashMap::from([("X".to_string(), "1".to_string()), ("TOKEN".to_string(), "t".to_string())])),
        base_dir: Some(examples_dir()),
        seed: Some(1),
        ..CompileOptions::default()
    };
    let _ = stampede_engine::validate(&file, &path, &opts);
}

/// Values a key of the language may take, valid and not.
const VALUES: &[&str] = &[
    "1",
    "0",
    "-1",
    "99999999999999999999",
    "-9223372036854775808",
    "1.5",
    "1e309",
    "\"\"",
    "'x'",
    "true",
    "null",
    "[]",
    "{}",
    "10s",
    "1ms",
    "0s",
    "999999999h",
    "-5s",
    "1/s",
    "100/s",
    "\"{{baseUrl}}/x\"",
    "\"{{ vu.id }}\"",
    "\"{{ uuid() }}\"",
    "\"{{ randomInt(1, 3) }}\"",
    "\"{{ env.X }}\"",
    "\"{{ nosuch }}\"",
    "\"{{ 1 +\"",
    "\"{{{{\"",
    "\"}}\"",
    "\"${x}\"",
    "get",
    "post",
    "GET",
    "PATCH",
    "http://127.0.0.1:9/",
    "builtin",
    "constant-vus",
    "ramping-vus",
    "constant-arrival-rate",
    "ramping-arrival-rate",
    "per-vu-iterations",
    "shared-iterations",
    "\"$.a.b\"",
    "\"$[\"",
    "\"(.*)\"",
    "\"(\"",
    "data/cities.csv",
    "data/upload.json",
    "/etc/passwd",
    "../../x",
    "\"vu.id % 2 == 0\"",
    "\"size([1,2]) > 1\"",
    "\"1 +\"",
];

/// Keys of the language at each level (mostly right, sometimes misspelt or misplaced).
const TOP: &[&str] = &[
    "name",
    "baseUrl",
    "load",
    "vars",
    "scenarios",
    "setup",
    "teardown",
    "thresholds",
    "data",
    "http",
    "seed",
    "nosuch",
];
const LOAD: &[&str] = &[
    "executor",
    "vus",
    "iterations",
    "duration",
    "rate",
    "stages",
    "maxVus",
    "preAllocatedVus",
    "timeUnit",
    "gracefulStop",
    "target",
];
const STEP: &[&str] = &[
    "name", "request", "check", "extract", "think", "if", "repeat", "group", "steps", "forEach", "count", "max",
    "while", "weight",
];
const REQUEST: &[&str] =
    &["method", "url", "headers", "query", "json", "body", "form", "multipart", "timeout", "follow"];
const CHECK: &[&str] = &["status", "body", "json", "header", "maxDuration", "contains"];

fn indent(out: &mut String, depth: usize) {
    out.push_str(&"  ".repeat(depth));
}

fn value(rng: &mut Rng) -> String {
    if rng.one_in(6) { format!("[{}, {}]", rng.pick(VALUES), rng.pick(VALUES)) } else { rng.pick(VALUES).to_string() }
}

fn mapping(rng: &mut Rng, out: &mut String, depth: usize, keys: &[&str]) {
    for _ in 0..rng.between(1, 5) {
        indent(out, depth);
        out.push_str(&format!("{}: {}\n", rng.pick(keys), value(rng)));
    }
}

fn steps(rng: &mut Rng, out: &mut String, depth: usize, nesting: usize) {
    for _ in 0..rng.between(1, 4) {
        indent(out, depth);
        out.push_str(&format!("- name: s{}\n", rng.below(4)));
        for _ in 0..rng.between(1, 4) {
            let key = *rng.pick(STEP);
            match key {
                "request" => {
                    indent(out, depth + 1);
                    out.push_str("request:\n");
                    mapping(rng, out, depth + 2, REQUEST);
                }
                "check" | "extract" => {
                    indent(out, depth + 1);
                    out.push_str(&format!("{key}:\n"));
                    mapping(rng, out, depth + 2, CHECK);
                }
                "steps" | "group" if nesting < 40 => {
                    indent(out, depth + 1);
                    out.push_str("steps:\n");
                    steps(rng, out, depth + 2, nesting + 1);
                }
                _ => {
                    indent(out, depth + 1);
                    out.push_str(&format!("{key}: {}\n", value(rng)));
                }
            }
        }
    }
}

/// A scenario put together from the language's keys and values at random.
fn structured(rng: &mut Rng) -> String {
    let mut out = String::new();
    for key in TOP {
        if !rng.one_in(3) {
            continue;
        }
        match *key {
            "load" => {
                out.push_str("load:\n");
                mapping(rng, &mut out, 1, LOAD);
            }
            "scenarios" => {
                out.push_str("scenarios:\n");
                for i in 0..rng.between(1, 3) {
                    out.push_str(&format!("  - name: sc{i}\n    steps:\n"));
                    steps(rng, &mut out, 3, 0);
                }
            }
            "setup" | "teardown" => {
                out.push_str(&format!("{key}:\n"));
                steps(rng, &mut out, 1, 0);
            }
            "vars" | "thresholds" | "http" => {
                out.push_str(&format!("{key}:\n"));
                mapping(rng, &mut out, 1, &["a", "b", "item", "p95", "http_req_failed", "version", "token"]);
            }
            other => out.push_str(&format!("{other}: {}\n", value(rng))),
        }
    }
    out
}

/// The parser and the compiler refuse or accept every mutated or generated scenario without a
/// panic, a stack overflow or a hang. Runs on a thread with the stack of the CLI's main thread
/// (8 MiB), where `stampede validate` parses.
#[test]
fn no_mutated_or_generated_scenario_makes_the_parser_or_compiler_panic() {
    let corpus = corpus();
    let tokens =
        ["{{", "}}", "steps:\n  - ", "request: {url: x}", "if: ", "repeat: ", "\n    ", "- name: x\n", "*a", "&a"];
    let cases = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            support::run(
                "scenario",
                |rng| {
                    if rng.one_in(4) {
                        let text = structured(rng);
                        if rng.one_in(2) {
                            support::mutate(rng, text.as_bytes(), &corpus, &tokens, 64 << 10)
                        } else {
                            text.into_bytes()
                        }
                    } else {
                        let seed = rng.pick(&corpus).clone();
                        support::mutate(rng, &seed, &corpus, &tokens, 64 << 10)
                    }
                },
                |input| parse_and_validate(&String::from_utf8_lossy(input), input.len() % 2 == 0),
            )
        })
        .unwrap()
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
    assert!(cases > 0);
}

/// Every input the fuzz tests found a crash with (`fuzz-regressions/*.yaml`) is refused or
/// accepted without a panic.
#[test]
fn inputs_that_crashed_the_parser_or_compiler_once_no_longer_do() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/engine/fuzz-regressions");
    let files = yaml_files(&dir);
    assert!(!files.is_empty());
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| {
            parse_and_validate(&text, false);
            parse_and_validate(&text, true);
        });
        assert!(outcome.is_ok(), "{} panics", path.display());
    }
    let text = std::fs::read_to_string(dir.join("duration-past-u64-seconds.yaml")).unwrap();
    let e = stampede_engine::parse_str(&text, Path::new("d.yaml")).unwrap_err().to_string();
    assert!(e.contains("invalid duration `99999999999999999999s`: too long"), "{e}");
}
