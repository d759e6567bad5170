//! #22: the operator's shape, checked on its sources: its modules import each other without a
//! circle (the controller and the schedule controller used to import each other).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module of `src/` (a file, or a folder's `mod.rs`) and the modules of the crate it names.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()).map(str::to_string) else { continue };
        if path.extension().is_none_or(|e| e != "rs") || name == "lib" || name == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let named: BTreeSet<String> = text
            .match_indices("crate::")
            .filter_map(|(i, _)| {
                let rest = &text[i + "crate::".len()..];
                let module: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                (!module.is_empty() && module != name).then_some(module)
            })
            .collect();
        graph.insert(name, named);
    }
    graph
}

#[test]
fn the_operators_modules_import_each_other_without_a_circle() {
    let graph = imports();
    assert!(graph.contains_key("controller") && graph.contains_key("shell"), "{graph:?}");
    // Depth-first, with the path so far: a module met again on it closes a circle.
    fn visit(m: &str, graph: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, done: &mut BTreeSet<String>) {
        if let Some(i) = path.iter().position(|p| p == m) {
            panic!("import circle: {} -> {m}", path[i..].join(" -> "));
        }
        if !done.insert(m.to_string()) {
            return;
        }
        path.push(m.to_string());
        for next in graph.get(m).into_iter().flatten().filter(|n| graph.contains_key(*n)) {
            visit(next, graph, path, done);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for m in graph.keys() {
        visit(m, &graph, &mut Vec::new(), &mut done);
    }
}

/// The error type of each `Result<T, E>` written in `text` (its second argument at the top level).
fn result_errors(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("Result<") {
        let mut depth = 0;
        let mut args = vec![String::new()];
        for c in text[i + "Result<".len()..].chars() {
            match c {
                '<' | '(' => depth += 1,
                ')' => depth -= 1,
                '>' if depth == 0 => break,
                '>' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(String::new());
                    continue;
                }
                _ => {}
            }
            if let Some(last) = args.last_mut() {
                last.push(c);
            }
        }
        if args.len() == 2 {
            out.push(args[1].trim().to_string());
        }
    }
    out
}

/// #22: the operator's errors are typed: what may pass is an `Error` (retried), what the user
/// must fix an `Invalid` (a condition); no `Result<_, String>` blurs the two.
#[test]
fn no_result_of_the_operator_has_a_string_for_its_error() {
    assert_eq!(result_errors("fn f() -> Result<Vec<(u8, String)>, String> {}"), ["String"]);
    assert!(result_errors("fn f() -> Result<(Option<String>, Scenario)> {}").is_empty());
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut folders = vec![src];
    let mut files = 0;
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                folders.push(path);
                continue;
            }
            files += 1;
            let text = std::fs::read_to_string(&path).unwrap();
            let strings: Vec<String> = result_errors(&text).into_iter().filter(|e| e == "String").collect();
            assert!(strings.is_empty(), "{}: a Result with a String error", path.display());
        }
    }
    assert!(files >= 15, "only {files} files found: the scan is broken");
}

/// Each function of `text` outside its tests: (name, lines from `fn` to its closing brace).
/// A function is a line `<indent>[pub[(…)] ][const ][async ]fn name` whose body ends at the
/// first line that is `<indent>}` (rustfmt's layout).
fn function_lengths(text: &str) -> Vec<(String, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines.iter().position(|l| l.trim() == "#[cfg(test)]").unwrap_or(lines.len());
    let mut out = Vec::new();
    for (i, line) in lines[..end].iter().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let mut rest = line.trim_start();
        for prefix in ["pub(crate) ", "pub(super) ", "pub ", "const ", "async "] {
            rest = rest.strip_prefix(prefix).unwrap_or(rest);
        }
        let Some(signature) = rest.strip_prefix("fn ") else { continue };
        let name: String = signature.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        let close = format!("{}}}", " ".repeat(indent));
        // A declaration without a body (a trait's) ends with `;` before any `{`.
        let body = lines[i..end].iter().position(|l| l.trim_end().ends_with('{') || l.trim_end().ends_with(';'));
        if body.is_some_and(|b| lines[i + b].trim_end().ends_with(';')) {
            continue;
        }
        if line.trim_end().ends_with('}') {
            out.push((name, 1));
        } else if let Some(len) = lines[i..end].iter().position(|l| *l == close) {
            out.push((name, len + 1));
        }
    }
    out
}

/// #22: no function of the shell or of a decision is over 80 lines (`decide_run` was 394).
#[test]
fn no_function_of_the_shell_or_the_decisions_is_over_80_lines() {
    let sample = "fn short() {\n    a();\n}\n\npub(crate) async fn long() -> u8 {\n    1\n    + 2\n}\n#[cfg(test)]\nfn t() {\n}\n";
    assert_eq!(function_lengths(sample), [("short".to_string(), 3), ("long".to_string(), 4)]);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut seen = 0;
    // The shells, the leader election and the decisions: files, or every file of a folder.
    let mut files = Vec::new();
    for part in ["shell.rs", "controller.rs", "leader.rs", "lifecycle.rs", "lifecycle", "schedule"] {
        let path = src.join(part);
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                files.push(entry.unwrap().path());
            }
        } else if path.exists() {
            files.push(path);
        }
    }
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let file = file.display();
        let lengths = function_lengths(&text);
        seen += lengths.len();
        let long: Vec<&(String, usize)> = lengths.iter().filter(|(_, n)| *n > 80).collect();
        assert!(long.is_empty(), "{file}: functions over 80 lines: {long:?}");
    }
    assert!(seen > 50, "only {seen} functions found: the scan is broken");
}

/// The package names in `cargo tree` of `package`'s normal dependencies (what its binary links).
fn linked(package: &str) -> BTreeSet<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

/// #34: the operator validates, merges and judges with the pure core alone: it links neither
/// the load engine nor the built-in target, nor their HTTP/2, gRPC-client or WebSocket code.
/// Its one TLS stack is kube's client's, to the API server.
#[test]
fn the_operator_stands_on_the_core_and_kube_without_the_engine() {
    let operator = linked("stampede-operator");
    assert!(operator.contains("stampede-core") && operator.contains("kube-client"), "{operator:?}");
    for never in ["stampede-engine", "stampede-target", "stampede-runner", "tokio-tungstenite", "tungstenite", "h2"] {
        assert!(!operator.contains(never), "the operator links {never}");
    }
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "stampede-operator",
            "-e",
            "normal",
            "-i",
            "tokio-rustls",
            "--depth",
            "1",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let users: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect();
    assert_eq!(users, ["hyper-rustls"], "tokio-rustls should come through kube's client alone");

    // The core itself: no runtime, sockets or TLS stack (PEM types only).
    let core = linked("stampede-core");
    for never in ["tokio", "mio", "socket2", "hyper", "h2", "rustls", "tokio-rustls", "nix", "stampede-engine"] {
        assert!(!core.contains(never), "the core links {never}");
    }
}
