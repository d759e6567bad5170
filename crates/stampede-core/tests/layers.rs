//! The workspace's module structure, read from the source of every crate under `crates/`:
//!
//! - no two files use each other, even through others (`run/step` → `run/ws` → `run/step`),
//!   whether by `crate::`, `super::` or `self::` paths, and no two folders either;
//! - in the crates with layers (the core and the engine), each top-level module uses only the
//!   modules listed before it, so a new `use` that breaks the layering fails here;
//! - `lib.rs` exposes modules through its map and re-exports, never as `pub mod` (the engine);
//! - no source file is over 1,000 lines.
//!
//! Test code (from a file's `#[cfg(test)]` on, and test-only files) may use anything, and
//! comments use nothing; `lib.rs`, `main.rs` and `mod.rs` files are maps (declarations and
//! re-exports), not users: another test keeps functions out of `mod.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules of the layered crates, lowest first: a module may use only those
/// before it.
const LAYERS: [(&str, &[&str]); 2] = [
    ("stampede-core", &["error", "stats", "wire", "compile", "outcome", "output", "capacity", "validate"]),
    ("stampede-engine", &["error", "stats", "client", "run", "output", "execution"]),
];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The paths a source text names from `prefix` (`crate::`, `super::`, `self::`), each as its
/// segments after the prefix (at most `depth`), including inside `use crate::{a::x, b::{y, z}}`
/// groups. `super::super::x` is read as `super::` then `super::x`.
fn used_paths(text: &str, prefix: &str, depth: usize) -> BTreeSet<Vec<String>> {
    /// Reads one use-tree at the start of `s` under `path`; returns where it stopped.
    fn tree(s: &[char], mut at: usize, path: &[String], depth: usize, out: &mut BTreeSet<Vec<String>>) -> usize {
        let skip_space = |at: &mut usize| {
            while *at < s.len() && s[*at].is_whitespace() {
                *at += 1;
            }
        };
        skip_space(&mut at);
        if s.get(at) == Some(&'{') {
            at += 1;
            loop {
                at = tree(s, at, path, depth, out);
                skip_space(&mut at);
                match s.get(at) {
                    Some(',') => at += 1,
                    Some('}') => return at + 1,
                    _ => return at,
                }
                skip_space(&mut at);
                if s.get(at) == Some(&'}') {
                    return at + 1;
                }
            }
        }
        let start = at;
        while at < s.len() && (s[at].is_alphanumeric() || s[at] == '_') {
            at += 1;
        }
        let mut path = path.to_vec();
        if at > start {
            path.push(s[start..at].iter().collect());
        }
        if path.len() < depth && s.get(at) == Some(&':') && s.get(at + 1) == Some(&':') {
            return tree(s, at + 2, &path, depth, out);
        }
        if !path.is_empty() {
            out.insert(path);
        }
        at
    }
    let mut out = BTreeSet::new();
    let chars: Vec<char> = text.chars().collect();
    let needle: Vec<char> = prefix.chars().collect();
    let mut at = 0;
    while at + needle.len() <= chars.len() {
        let starts_word = at == 0 || !(chars[at - 1].is_alphanumeric() || chars[at - 1] == '_' || chars[at - 1] == ':');
        if starts_word && chars[at..at + needle.len()] == needle[..] {
            at = tree(&chars, at + needle.len(), &[], depth, &mut out).max(at + 1);
        } else {
            at += 1;
        }
    }
    out
}

/// One source file: its module path (`run/step.rs` is `["run", "step"]`, `run/mod.rs` is
/// `["run"]`), whether it is a map (`lib.rs`, `main.rs`, `mod.rs`), and its production code.
struct File {
    module: Vec<String>,
    map: bool,
    code: String,
}

/// The production files of a crate's `src`: test-only files (declared `#[cfg(test)] mod name;`)
/// are left out, and so is each file's code from its first `#[cfg(test)]` on.
fn production_files(src: &Path) -> Vec<File> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let texts: Vec<(PathBuf, String)> = paths
        .into_iter()
        .map(|f| (f.strip_prefix(src).unwrap().to_path_buf(), std::fs::read_to_string(&f).unwrap()))
        .collect();
    let test_only: BTreeSet<String> = texts
        .iter()
        .flat_map(|(_, t)| t.split("#[cfg(test)]").skip(1))
        .filter_map(|after| after.trim_start().strip_prefix("mod ")?.split_once(';').map(|(n, _)| format!("{n}.rs")))
        .collect();
    texts
        .into_iter()
        .filter(|(f, _)| !test_only.contains(&f.file_name().unwrap().to_string_lossy().into_owned()))
        .filter(|(f, _)| !f.starts_with("bin"))
        .map(|(f, t)| {
            let mut module: Vec<String> =
                f.with_extension("").components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            let map = matches!(module.last().map(String::as_str), Some("lib" | "main" | "mod"));
            if map {
                module.pop();
            }
            // Comments (doc links among them) name paths but use nothing.
            let code = t.split("#[cfg(test)]").next().unwrap_or_default();
            let code = code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
            File { module, map, code }
        })
        .collect()
}

/// Every module path a file names, made absolute (from the crate root).
fn used_modules(file: &File) -> BTreeSet<Vec<String>> {
    let mut out: BTreeSet<Vec<String>> = used_paths(&file.code, "crate::", 4);
    // `self::` in `a/mod.rs` is `a`; in `a/b.rs` it is `a::b`. `super::` is one up from there.
    let here = file.module.clone();
    for p in used_paths(&file.code, "self::", 4) {
        out.insert(here.iter().cloned().chain(p).collect());
    }
    for p in used_paths(&file.code, "super::", 4) {
        let mut base = here.clone();
        base.pop();
        let mut rest = p.as_slice();
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        out.insert(base.into_iter().chain(rest.iter().cloned()).collect());
    }
    out
}

/// The crate's graph of files: each non-map file → the files it uses (a used path names the
/// longest module that is a file of this crate; paths into other crates' re-exported modules
/// name none).
fn file_graph(files: &[File]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<&[String]> = files.iter().map(|f| f.module.as_slice()).collect();
    let node = |path: &[String]| -> Option<String> {
        (1..=path.len()).rev().map(|n| &path[..n]).find(|p| modules.contains(p)).map(|p| p.join("/"))
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files.iter().filter(|f| !f.map) {
        let me = file.module.join("/");
        let uses: BTreeSet<String> = used_modules(file).iter().filter_map(|p| node(p)).filter(|n| *n != me).collect();
        graph.entry(me).or_default().extend(uses);
    }
    graph
}

/// The folders' graph: each top-level module → the other top-level modules its files use.
fn folder_graph(files: &[File]) -> BTreeMap<String, BTreeSet<String>> {
    let tops: BTreeSet<&str> = files.iter().filter_map(|f| f.module.first().map(String::as_str)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in files.iter().filter(|f| !f.map || f.module.len() == 1) {
        let Some(me) = file.module.first() else { continue };
        let uses = used_modules(file)
            .into_iter()
            .filter_map(|p| p.first().cloned())
            .filter(|t| t != me && tops.contains(t.as_str()));
        graph.entry(me.clone()).or_default().extend(uses);
    }
    graph
}

/// A cycle of `graph`, if it has one (depth-first search for a back edge).
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit<'a>(
        n: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeMap<&'a str, bool>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match done.get(n) {
            Some(true) => return None,
            Some(false) => {
                let from = path.iter().position(|p| *p == n).unwrap_or(0);
                return Some(path[from..].iter().chain([&n]).map(|s| s.to_string()).collect());
            }
            None => {}
        }
        done.insert(n, false);
        path.push(n);
        for next in graph.get(n).into_iter().flatten() {
            if let Some(found) = visit(next, graph, done, path) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(n, true);
        None
    }
    let mut done = BTreeMap::new();
    graph.keys().find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
}

/// Every crate of the workspace, by name, with its production files.
fn workspace() -> Vec<(String, Vec<File>)> {
    let mut crates: Vec<(String, Vec<File>)> = std::fs::read_dir(crates_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("src").is_dir())
        .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), production_files(&p.join("src"))))
        .collect();
    crates.sort_by(|a, b| a.0.cmp(&b.0));
    crates
}

#[test]
fn no_crate_has_a_circle_of_files_or_folders() {
    let crates = workspace();
    assert!(crates.len() >= 8, "{:?}", crates.iter().map(|c| &c.0).collect::<Vec<_>>());
    let mut circles = Vec::new();
    for (name, files) in &crates {
        let files_graph = file_graph(files);
        if let Some(c) = cycle(&files_graph) {
            circles.push(format!("{name}: a circle of files: {}", c.join(" -> ")));
        }
        if let Some(c) = cycle(&folder_graph(files)) {
            circles.push(format!("{name}: a circle of folders: {}", c.join(" -> ")));
        }
    }
    assert!(circles.is_empty(), "{}", circles.join("\n"));
}

#[test]
fn each_module_of_a_layered_crate_uses_only_the_layers_below_it() {
    let crates = workspace();
    for (name, layers) in LAYERS {
        let files = &crates.iter().find(|(n, _)| n == name).unwrap().1;
        let graph = folder_graph(files);
        let found: BTreeSet<&str> = graph.keys().map(String::as_str).collect();
        assert_eq!(
            found,
            layers.iter().copied().collect(),
            "{name}'s top-level modules changed: update LAYERS and lib.rs's map"
        );
        let rank = |m: &str| layers.iter().position(|l| *l == m);
        let mut wrong = Vec::new();
        for (module, uses) in &graph {
            for used in uses {
                if rank(used) >= rank(module) {
                    wrong.push(format!("{name}: {module} uses {used}, which is not below it"));
                }
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }
}

/// Whether a line starts a function (`pub(crate) async fn x(`).
fn declares_a_function(line: &str) -> bool {
    let mut l = line.trim_start();
    for word in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async ", "unsafe "] {
        l = l.strip_prefix(word).unwrap_or(l);
    }
    l.starts_with("fn ")
}

/// A folder's `mod.rs` is its map: declarations, re-exports, shared types and constants, but
/// no function (the circle check does not follow a map's uses).
#[test]
fn no_mod_rs_holds_a_function() {
    let mut with_code = Vec::new();
    for (name, files) in workspace() {
        for f in files.iter().filter(|f| f.map && !f.module.is_empty()) {
            if f.code.lines().any(declares_a_function) {
                with_code.push(format!("{name}: {}/mod.rs", f.module.join("/")));
            }
        }
    }
    assert!(with_code.is_empty(), "{with_code:?}");
}

/// No source file of any crate, tests included, is over 1,000 lines: past that a file holds
/// more than one thing (split it by what it holds).
#[test]
fn no_source_file_is_over_1000_lines() {
    let mut long = Vec::new();
    let mut seen = 0;
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let krate = entry.unwrap().path();
        for part in ["src", "tests"] {
            if !krate.join(part).is_dir() {
                continue;
            }
            let mut files = Vec::new();
            rust_files(&krate.join(part), &mut files);
            for f in files {
                seen += 1;
                let lines = std::fs::read_to_string(&f).unwrap().lines().count();
                if lines > 1000 {
                    long.push(format!("{} ({lines} lines)", f.strip_prefix(crates_dir()).unwrap().display()));
                }
            }
        }
    }
    assert!(seen > 100, "only {seen} files: the scan is broken");
    assert!(long.is_empty(), "{long:#?}");
}

#[test]
fn the_engine_declares_no_public_module() {
    let lib = std::fs::read_to_string(crates_dir().join("stampede-engine/src/lib.rs")).unwrap();
    let public_mods: Vec<&str> = lib.lines().filter(|l| l.starts_with("pub mod ")).collect();
    assert!(public_mods.is_empty(), "{public_mods:?}");
}

#[test]
fn the_reader_resolves_crate_self_and_super_paths_in_groups() {
    let text = "use crate::{stats::x, client::{a, b::C}};\nlet y = crate::run::f();\nuse super::{step::{Answer, Failure}, vu};\nuse super::super::top;\nuse self::inner::Z;";
    let file = File { module: vec!["run".into(), "ws".into()], map: false, code: text.into() };
    let shown: Vec<String> = used_modules(&file).into_iter().map(|p| p.join("/")).collect();
    assert_eq!(
        shown,
        [
            "client/a",
            "client/b/C",
            "run/f",
            "run/step/Answer",
            "run/step/Failure",
            "run/vu",
            "run/ws/inner/Z",
            "stats/x",
            "top"
        ]
    );
    // A circle through `super::` is found; a file's use of its own folder's map is not one.
    let files = [
        File { module: vec!["run".into()], map: true, code: "mod step; mod ws; pub use ws::Socket;".into() },
        File { module: vec!["run".into(), "step".into()], map: false, code: "use super::ws::Socket;".into() },
        File { module: vec!["run".into(), "ws".into()], map: false, code: "use super::step::Answer;".into() },
    ];
    assert_eq!(cycle(&file_graph(&files)).unwrap(), ["run/step", "run/ws", "run/step"]);
    let files = &files[..2];
    assert_eq!(cycle(&file_graph(files)), None);
    // A function in a map is seen whatever its qualifiers; a field or a comment is not one.
    assert!(declares_a_function("    pub(crate) async fn x() {") && declares_a_function("const fn y() {}"));
    assert!(!declares_a_function("    fun: fn() -> u8,") && !declares_a_function("/// fn z"));
}
