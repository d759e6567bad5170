//! The README keeps the quick start, the shape and pointers; the guides under `docs/` hold the
//! reference. Every guide is linked from the README, and every relative link of the README and
//! the guides leads to a file that exists, and to a heading that exists when it names one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Markdown files checked: the README and every guide.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.insert(0, repo().join("README.md"));
    docs
}

/// The targets of a Markdown text's inline links, outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

/// GitHub's anchors of a Markdown text's headings (lower case, punctuation dropped, spaces as
/// dashes).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim().to_lowercase();
        let slug: String = title
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        out.insert(slug);
    }
    out
}

#[test]
fn every_relative_link_of_the_readme_and_the_guides_leads_somewhere() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).unwrap();
        let folder = doc.parent().unwrap();
        for link in links(&text) {
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() { doc.clone() } else { folder.join(path) };
            if !target.exists() {
                broken.push(format!("{}: {link}: no such file", doc.display()));
                continue;
            }
            if !anchor.is_empty() && target.extension().is_some_and(|e| e == "md") {
                let headings = anchors(&std::fs::read_to_string(&target).unwrap());
                if !headings.contains(anchor) {
                    broken.push(format!("{}: {link}: no such heading", doc.display()));
                }
            }
        }
    }
    assert!(checked > 30, "only {checked} links: the reader is broken");
    assert!(broken.is_empty(), "{broken:#?}");
}

#[test]
fn the_readme_points_to_every_guide_and_stays_short() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let linked: BTreeSet<String> = links(&readme).into_iter().collect();
    for guide in documents().into_iter().skip(1) {
        let name = format!("docs/{}", guide.file_name().unwrap().to_string_lossy());
        assert!(linked.contains(&name), "the README does not link {name}");
    }
    // The quick start, the guides, the layout and the architecture: the reference is in docs/.
    assert!(readme.lines().count() < 250, "the README has {} lines", readme.lines().count());
    assert!(readme.contains("## Quick start") && readme.contains("## Guides"), "the README's sections changed");
}

#[test]
fn the_link_reader_sees_links_outside_code_and_github_anchors() {
    let text = "See [a](docs/a.md#x-y) and [b](#b).\n```\n[not](a link)\n```\n## Runs over time: reruns!";
    assert_eq!(links(text), ["docs/a.md#x-y", "#b"]);
    assert!(anchors(text).contains("runs-over-time-reruns"));
}
