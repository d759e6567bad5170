//! The engine's folders form layers: each top-level module uses only the modules listed
//! before it in [`LAYERS`] (so there is no import cycle between them), and `lib.rs` exposes
//! modules only through re-exports. Read from the source, so a new `use crate::…` that breaks
//! the layering fails here. Test code (from a file's `#[cfg(test)]` on, and test-only files)
//! may use any layer.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules, lowest first: a module may use only those before it.
const LAYERS: [&str; 7] = ["error", "stats", "client", "compile", "run", "output", "session"];

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

/// The paths a source text names through `crate::`, as their first two segments, including
/// inside `use crate::{a::x, b::{y, z}}` groups.
fn used_paths(text: &str) -> BTreeSet<Vec<String>> {
    /// Reads one use-tree at the start of `s` under `prefix`; returns what it read up to.
    fn tree(s: &[char], mut at: usize, prefix: &[String], out: &mut BTreeSet<Vec<String>>) -> usize {
        let skip_space = |at: &mut usize| {
            while *at < s.len() && s[*at].is_whitespace() {
                *at += 1;
            }
        };
        skip_space(&mut at);
        if s.get(at) == Some(&'{') {
            at += 1;
            loop {
                at = tree(s, at, prefix, out);
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
        let mut path = prefix.to_vec();
        if at > start {
            path.push(s[start..at].iter().collect());
        }
        if path.len() < 2 && s.get(at) == Some(&':') && s.get(at + 1) == Some(&':') {
            return tree(s, at + 2, &path, out);
        }
        if !path.is_empty() {
            out.insert(path);
        }
        at
    }
    let mut out = BTreeSet::new();
    let chars: Vec<char> = text.chars().collect();
    let needle: Vec<char> = "crate::".chars().collect();
    let mut at = 0;
    while at + needle.len() <= chars.len() {
        if chars[at..at + needle.len()] == needle[..] {
            at = tree(&chars, at + needle.len(), &[], &mut out).max(at + 1);
        } else {
            at += 1;
        }
    }
    out
}

/// The top-level modules a source text names through `crate::`.
fn used_modules(text: &str) -> BTreeSet<String> {
    used_paths(text).into_iter().map(|p| p[0].clone()).collect()
}

/// The production code of every source file, by path relative to `src`: test-only files
/// (declared `#[cfg(test)] mod name;`) are left out, and so is each file's code from its
/// first `#[cfg(test)]` on.
fn production_code(src: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let texts: Vec<(PathBuf, String)> = files
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
        .map(|(f, t)| (f, t.split("#[cfg(test)]").next().unwrap_or_default().to_string()))
        .collect()
}

/// Module → the other top-level modules it uses.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, code) in production_code(src) {
        let first = file.components().next().unwrap().as_os_str().to_string_lossy().into_owned();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        let uses = graph.entry(module.clone()).or_default();
        uses.extend(used_modules(&code).into_iter().filter(|m| *m != module));
    }
    graph
}

#[test]
fn each_engine_module_uses_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    let found: BTreeSet<&str> = graph.keys().map(String::as_str).collect();
    assert_eq!(found, LAYERS.into_iter().collect(), "top-level modules changed: update LAYERS and lib.rs's table");
    let rank = |m: &str| LAYERS.iter().position(|l| *l == m);
    let mut wrong = Vec::new();
    for (module, uses) in &graph {
        for used in uses {
            match rank(used) {
                Some(r) if r < rank(module).unwrap() => {}
                Some(_) => wrong.push(format!("{module} uses {used}, which is not below it")),
                None => wrong.push(format!("{module} uses crate::{used}, which is no top-level module")),
            }
        }
    }
    println!("{graph:#?}");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Within a folder too, files do not use each other in a circle: the graph of files
/// (`client/http1`, `compile/plan`, …) has no cycle.
#[test]
fn no_two_engine_files_use_each_other_even_indirectly() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let node = |path: &[String]| -> String {
        let folder = src.join(&path[0]).is_dir();
        if folder && path.len() > 1 { format!("{}/{}", path[0], path[1]) } else { path[0].clone() }
    };
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, code) in production_code(&src) {
        let parts: Vec<String> =
            file.with_extension("").components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
            continue;
        }
        let me = node(&parts);
        let uses: BTreeSet<String> = used_paths(&code).iter().map(|p| node(p)).filter(|n| *n != me).collect();
        graph.entry(me).or_default().extend(uses);
    }
    // Depth-first search for a back edge.
    fn visit<'a>(
        n: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, bool>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(true) => return None,
            Some(false) => {
                let from = path.iter().position(|p| *p == n).unwrap_or(0);
                return Some(path[from..].iter().chain([&n]).map(|s| s.to_string()).collect());
            }
            None => {}
        }
        state.insert(n, false);
        path.push(n);
        for next in graph.get(n).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, state, path) {
                return Some(cycle);
            }
        }
        path.pop();
        state.insert(n, true);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if let Some(cycle) = visit(n, &graph, &mut state, &mut Vec::new()) {
            panic!("a cycle of files: {}", cycle.join(" -> "));
        }
    }
    assert!(graph.len() > 20, "{graph:?}");
}

#[test]
fn lib_rs_declares_no_public_module() {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let public_mods: Vec<&str> = lib.lines().filter(|l| l.starts_with("pub mod ")).collect();
    assert!(public_mods.is_empty(), "{public_mods:?}");
}

#[test]
fn the_reader_sees_grouped_and_plain_uses() {
    let text = "use crate::{stats::x, client::{a, b::C}};\nlet y = crate::run::f();\n// crate::output";
    assert_eq!(used_modules(text), ["client", "output", "run", "stats"].map(String::from).into_iter().collect());
    let paths: Vec<String> = used_paths(text).into_iter().map(|p| p.join("/")).collect();
    assert_eq!(paths, ["client/a", "client/b", "output", "run/f", "stats/x"]);
}
