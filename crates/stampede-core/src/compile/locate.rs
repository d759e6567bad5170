//! Where in the YAML text a problem is: its line and column, from the problem's location
//! (``scenario `buy`, step `cart`: request.json``, `load.stages[1]`) and the parsed file.
//!
//! Names are resolved to positions with the file (scenario `buy` is `scenarios[2]`, step
//! `cart` is `steps[1].steps[0]`), then the path is followed through the text: block mappings
//! and sequences by indentation, flow mappings (`{url: …}`) within their line. It is a
//! locator, not a parser: when part of a path cannot be followed, the deepest part found is
//! given (the step, if not its field).

use stampede_model::scenario::{ScenarioFile, Step};

/// One segment of a path into the file.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// The line and column (from 1) of the problem at `location`, if found in `text`.
pub fn locate(location: &str, text: &str, file: &ScenarioFile) -> Option<(usize, usize)> {
    let path = path_of(location, file)?;
    let lines: Vec<&str> = text.lines().collect();
    let mut node = Node::Block { from: 0, indent: 0, item: false };
    let mut found = None;
    for seg in &path {
        match node.child(&lines, seg) {
            Some((at, child)) => {
                found = Some(at);
                node = child;
            }
            None => break,
        }
    }
    found.map(|(line, column)| (line + 1, column + 1))
}

/// A location's path: names resolved with `file`, then its field path.
fn path_of(location: &str, file: &ScenarioFile) -> Option<Vec<Seg>> {
    let (head, field) = match location.split_once(": ") {
        Some((head, field)) => (head, field),
        None => (location, ""),
    };
    let mut path = Vec::new();
    let mut steps: Option<&[Step]> = None;
    let mut named = false;
    for part in head.split(", ") {
        if let Some(name) = quoted(part, "scenario ") {
            let i = file.scenarios.iter().position(|s| s.name == name)?;
            path.extend([Seg::Key("scenarios".into()), Seg::Index(i), Seg::Key("steps".into())]);
            steps = Some(&file.scenarios[i].steps);
            named = true;
        } else if let Some((list, which)) = ["init", "setup", "teardown"].iter().find(|l| part == **l).map(|l| {
            (
                *l,
                match *l {
                    "init" => &file.init,
                    "setup" => &file.setup,
                    _ => &file.teardown,
                },
            )
        }) {
            path.push(Seg::Key(list.into()));
            steps = Some(which);
            named = true;
        } else if let Some(name) = quoted(part, "step group ") {
            path.extend(find_step(steps?, &|s| s.group.as_deref() == Some(name))?);
        } else if let Some(name) = quoted(part, "step ") {
            path.extend(find_step(steps?, &|s| s.name == name)?);
        } else if named {
            // `scenario `s`, steps[2]`: a position under the named list.
            path.extend(dotted(part.strip_prefix("steps").unwrap_or(part)));
        } else {
            // Not a name: the head is itself a field path (`load.stages[1]`, `thresholds[0] `…``).
            path.extend(dotted(part.split(' ').next().unwrap_or(part)));
        }
    }
    if named || field.is_empty() {
        path.extend(dotted(field));
    }
    // A step's path ends with its list's key where no index followed (`steps` of a scenario).
    if matches!(path.last(), Some(Seg::Key(k)) if k == "steps") && field.is_empty() {
        path.pop();
    }
    (!path.is_empty()).then_some(path)
}

/// `prefix`NAME`` → NAME.
fn quoted<'a>(part: &'a str, prefix: &str) -> Option<&'a str> {
    part.strip_prefix(prefix)?.strip_prefix('`')?.strip_suffix('`')
}

/// The path (from a step list) of the first step, depth first, that `is` picks.
fn find_step(steps: &[Step], is: &dyn Fn(&Step) -> bool) -> Option<Vec<Seg>> {
    for (i, s) in steps.iter().enumerate() {
        if is(s) {
            return Some(vec![Seg::Index(i)]);
        }
        if let Some(mut inner) = find_step(&s.steps, is) {
            let mut path = vec![Seg::Index(i), Seg::Key("steps".into())];
            path.append(&mut inner);
            return Some(path);
        }
    }
    None
}

/// `a.b[2].c` → keys and indexes (a key's own dots are not told apart: `json.$.x` stops at
/// the first part that is not found).
fn dotted(text: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in text.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            if open > 0 {
                out.push(Seg::Key(rest[..open].to_string()));
            }
            rest = &rest[open..];
            while let Some(close) = rest.find(']') {
                match rest[1..close].parse() {
                    Ok(i) => out.push(Seg::Index(i)),
                    Err(_) => return out,
                }
                rest = &rest[close + 1..];
                if !rest.starts_with('[') {
                    break;
                }
            }
        } else {
            out.push(Seg::Key(rest.to_string()));
        }
    }
    out
}

/// A YAML node as the locator sees it.
#[derive(Clone, Copy, Debug)]
enum Node<'t> {
    /// Block content: lines from `from`, all at the indentation of the first one, which is at
    /// least `indent`; with `item`, line `from` is a sequence item's `- ` line, whose mapping
    /// starts after the dash.
    Block { from: usize, indent: usize, item: bool },
    /// Flow or scalar content on one line: `text` starting at `column` of `line`.
    Inline { line: usize, column: usize, text: &'t str },
}

impl<'t> Node<'t> {
    /// `seg` of this node: where it is (line, column from 0) and its own node.
    fn child(self, lines: &[&'t str], seg: &Seg) -> Option<((usize, usize), Node<'t>)> {
        match self {
            Node::Inline { line, column, text } => {
                let Seg::Key(key) = seg else { return None };
                let at = flow_key(text, key)?;
                let value_at = at + key.len() + 1;
                let value = text[value_at..].trim_start();
                let column = column + text.len() - text[at..].len();
                let value_column = column + (text.len() - at) - value.len();
                Some(((line, column), Node::Inline { line, column: value_column, text: value }))
            }
            Node::Block { from, indent, item } => {
                let mut index = 0;
                let mut level = None;
                for (n, raw) in lines.iter().enumerate().skip(from) {
                    let mut content = raw.trim_start();
                    if content.is_empty() || content.starts_with('#') {
                        continue;
                    }
                    // A sequence item's mapping starts on its `- ` line.
                    if item && n == from {
                        content = content.strip_prefix('-').map_or(content, str::trim_start);
                    }
                    let at = raw.len() - content.len();
                    let level = *level.get_or_insert(at);
                    if at < level.max(indent) {
                        return None;
                    }
                    if at > level {
                        continue;
                    }
                    match seg {
                        Seg::Index(i) => {
                            let inner = content.strip_prefix('-')?.trim_start();
                            if index == *i {
                                let inner_at = raw.len() - inner.len();
                                let node = if inner.is_empty() {
                                    Node::Block { from: n + 1, indent: at + 1, item: false }
                                } else if inner.starts_with(['{', '[']) || !is_key_line(inner) {
                                    Node::Inline { line: n, column: inner_at, text: inner }
                                } else {
                                    Node::Block { from: n, indent: inner_at, item: true }
                                };
                                return Some(((n, inner_at), node));
                            }
                            index += 1;
                        }
                        Seg::Key(key) => {
                            let Some(value) = key_value(content, key) else { continue };
                            let value_at = raw.len() - value.len();
                            let node = if value.trim().is_empty() || value.trim_start().starts_with('#') {
                                Node::Block { from: n + 1, indent: at, item: false }
                            } else {
                                Node::Inline { line: n, column: value_at, text: value }
                            };
                            return Some(((n, at), node));
                        }
                    }
                }
                None
            }
        }
    }
}

/// The rest of `line` after `key:` when the line is that key's.
fn key_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line
        .strip_prefix(key)
        .or_else(|| line.strip_prefix(&format!("\"{key}\"")))
        .or_else(|| line.strip_prefix(&format!("'{key}'")))?;
    let rest = rest.strip_prefix(':')?;
    (rest.is_empty() || rest.starts_with(' ')).then_some(rest.trim_start())
}

/// Whether a block line is `key: …`.
fn is_key_line(line: &str) -> bool {
    line.split_once(':').is_some_and(|(k, v)| !k.contains([' ', '"', '\'']) && (v.is_empty() || v.starts_with(' ')))
}

/// Where `key:` starts in a flow mapping's text (after `{` or `,`), quotes allowed.
fn flow_key(text: &str, key: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = text[from..].find(key) {
        let at = from + found;
        let before = text[..at].trim_end_matches(['"', '\'']).trim_end();
        let after = text[at + key.len()..].trim_start_matches(['"', '\'']);
        if (before.ends_with('{') || before.ends_with(',')) && after.starts_with(':') {
            return Some(at - (text[..at].len() - text[..at].trim_end_matches(['"', '\'']).len()));
        }
        from = at + key.len().max(1);
        if from >= bytes.len() {
            break;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"name: shop
load: {executor: constant-vus, vus: 1, duration: 1s}
init:
  - name: login
    request: {method: POST, url: "{{baseUrl}}/login"}
scenarios:
  - name: browse
    steps:
      - name: list
        request:
          url: "{{baseUrl}}/list"
  - name: buy
    steps:
      - group: checkout
        steps:
          - repeat: {count: 2}
            steps:
              - name: add
                if: size(cart) > 0
                request: {url: "{{baseUrl}}/cart", json: {id: 1}}
thresholds:
  - latency.p99 < 1s
"#;

    fn at(location: &str) -> Option<(usize, usize)> {
        let file = crate::compile::parse::parse_str(TEXT, std::path::Path::new("t.yaml")).unwrap();
        locate(location, TEXT, &file)
    }

    #[test]
    fn problems_are_found_at_their_line_and_column() {
        assert_eq!(at("scenario `browse`, step `list`: request.url"), Some((11, 11)));
        assert_eq!(at("scenario `buy`, step `add`: if"), Some((19, 17)));
        assert_eq!(at("scenario `buy`, step `add`: request.json"), Some((20, 52)));
        assert_eq!(at("scenario `buy`, step `add`: request.json.id"), Some((20, 59)));
        assert_eq!(at("scenario `buy`, step group `checkout`: request"), Some((14, 9)), "the block itself");
        assert_eq!(at("scenario `buy`, steps[0]: repeat"), Some((14, 9)));
        assert_eq!(at("init, step `login`: request.url"), Some((5, 29)));
        assert_eq!(at("load.vus"), Some((2, 32)));
        assert_eq!(at("thresholds[0] `latency.p99 < 1s`"), Some((22, 5)));
        assert_eq!(
            at("scenario `buy`, step `add`: check.json.$.x"),
            Some((18, 17)),
            "the step when its field is not there"
        );
        assert_eq!(at("scenario `nope`, step `add`: if"), None);
    }
}
