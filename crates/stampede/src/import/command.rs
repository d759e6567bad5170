//! The shell of `stampede import`: reads the input (a UTF-8 byte-order mark skipped), runs the
//! importer, checks that what it wrote loads and validates — with the real environment, stand-ins
//! only for the variables it names that are unset and for data files not there yet — and writes
//! it. Exit codes: 0 imported (warnings on stderr), 2 nothing HTTP in the input (or it cannot be
//! read), 3 a bug of ours: the scenario did not validate; it is written anyway, the problem at
//! its head, so nothing is lost.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use stampede_engine::CompileOptions;

use super::{BASE_URL, Imported};
use crate::Failure;

/// What `stampede import` was asked.
pub(crate) struct Request<'a> {
    pub(crate) format: Format,
    pub(crate) input: Option<&'a Path>,
    pub(crate) out: Option<&'a Path>,
    pub(crate) keep_static: bool,
    pub(crate) print_loadtest: bool,
    /// What `{{env.BASE_URL}}` (the origin a request's source does not give) stands for.
    pub(crate) base_url: Option<&'a str>,
    /// Postman: an environment file (its variables become `vars`, its credentials `env`).
    pub(crate) env_file: Option<&'a Path>,
}

/// The formats `stampede import` reads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Format {
    Curl,
    Postman,
    Openapi,
    Har,
    Jmx,
}

/// `text` without the byte-order mark Fiddler, Windows editors and some exporters begin with.
pub(crate) fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

fn read(path: Option<&Path>) -> Result<(String, String), Failure> {
    match path.filter(|p| p.as_os_str() != "-") {
        Some(p) => {
            let bytes =
                std::fs::read(p).with_context(|| format!("cannot read {}", p.display())).map_err(Failure::Invalid)?;
            let text = String::from_utf8(bytes)
                .map_err(|e| anyhow::anyhow!("{}: not UTF-8 text (byte {})", p.display(), e.utf8_error().valid_up_to()))
                .map_err(Failure::Invalid)?;
            Ok((text, p.display().to_string()))
        }
        None => {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
                .context("cannot read standard input")
                .map_err(Failure::Invalid)?;
            Ok((text, "standard input".to_string()))
        }
    }
}

/// Runs the importer of `format` on `text`.
pub(crate) fn convert(
    format: Format,
    text: &str,
    source: &str,
    keep_static: bool,
    env: Option<(&str, &str)>,
) -> Result<Imported, String> {
    let text = without_bom(text);
    match format {
        Format::Curl => super::curl::curl(text, source),
        Format::Postman => super::postman::postman(text, source, env.map(|(t, s)| (without_bom(t), s))),
        Format::Openapi => super::openapi::openapi(text, source),
        Format::Har => super::har::har(text, source, keep_static),
        Format::Jmx => super::jmx::jmx(text, source),
    }
}

/// `--base-url`: the origin every `{{env.BASE_URL}}` of the output stood for, written in.
pub(crate) fn with_base_url(mut imported: Imported, base: &str) -> Imported {
    let base = base.trim_end_matches('/');
    let hole = format!("{{{{env.{BASE_URL}}}}}");
    if imported.env.remove(BASE_URL).is_some() {
        imported.yaml = imported.yaml.replace(&hole, base);
    }
    imported
}

/// The environment the output is validated with: the real one, and for each variable it names
/// that is unset a stand-in of the right shape (a URL for an origin).
pub(crate) fn validation_env(imported: &Imported) -> HashMap<String, String> {
    let mut env: HashMap<String, String> = std::env::vars().collect();
    for name in imported.env.keys() {
        env.entry(name.clone()).or_insert_with(|| {
            if name == BASE_URL || imported.urls.contains(name) { "http://127.0.0.1".into() } else { "1".into() }
        });
    }
    env
}

/// The files of multipart parts `steps` (blocks' too) send.
fn part_files(steps: &[stampede_model::scenario::Step], out: &mut Vec<String>) {
    for step in steps {
        let parts = step.request.as_ref().and_then(|r| r.multipart.as_ref());
        out.extend(parts.into_iter().flatten().filter_map(|p| p.file.clone()));
        part_files(&step.steps, out);
    }
}

/// Stand-ins for the files the scenario reads (data CSVs, multipart uploads) that are not where
/// it will look (`dir`): a CSV as its columns and one row, an upload empty, so the output
/// validates; a warning says to put each there. `None` when every one is there (the disk is
/// read as usual).
fn stand_ins(
    imported: &mut Imported,
    file: &stampede_model::scenario::ScenarioFile,
    dir: &Path,
) -> Option<std::sync::Arc<BTreeMap<String, Vec<u8>>>> {
    let mut missing = false;
    let mut files = BTreeMap::new();
    let mut uploads = Vec::new();
    part_files(&file.setup, &mut uploads);
    part_files(&file.teardown, &mut uploads);
    part_files(&file.init, &mut uploads);
    for s in &file.scenarios {
        part_files(&s.steps, &mut uploads);
    }
    let named = file.data.values().map(|d| (d.csv.clone(), true)).chain(uploads.into_iter().map(|u| (u, false)));
    for (name, csv) in named {
        let at = dir.join(&name);
        if let Ok(bytes) = std::fs::read(&at) {
            files.insert(name, bytes);
            continue;
        }
        missing = true;
        let columns = imported.data.get(&name).cloned().unwrap_or_default();
        let stand_in = if csv {
            let columns = if columns.is_empty() { vec!["column".to_string()] } else { columns.clone() };
            format!("{}\n{}\n", columns.join(","), vec!["1"; columns.len()].join(",")).into_bytes()
        } else {
            Vec::new()
        };
        let header =
            if columns.is_empty() { String::new() } else { format!(", with the header row `{}`", columns.join(",")) };
        imported.warnings.push(format!(
            "the file `{name}` is not at {} yet (where the scenario reads it): put it there before running{header}",
            at.display()
        ));
        files.insert(name, stand_in);
    }
    missing.then(|| std::sync::Arc::new(files))
}

/// `stampede import FORMAT [INPUT] [-o OUT] [--base-url URL] [--env FILE] [--print-loadtest]`.
pub(crate) fn import(r: &Request<'_>) -> Result<ExitCode, Failure> {
    let (text, source) = read(r.input)?;
    let env_file = r.env_file.map(|p| read(Some(p))).transpose()?;
    let imported =
        convert(r.format, &text, &source, r.keep_static, env_file.as_ref().map(|(t, s)| (t.as_str(), s.as_str())))
            .map_err(|e| Failure::Invalid(anyhow::anyhow!(e)))?;
    let mut imported = match r.base_url {
        Some(b) => with_base_url(imported, b),
        None => imported,
    };
    // Where the output goes: data files are read beside it.
    let dir = match (r.out, r.input) {
        (Some(out), _) => out.parent().map(Path::to_path_buf),
        (None, Some(input)) if input.as_os_str() != "-" => input.parent().map(Path::to_path_buf),
        _ => None,
    }
    .filter(|d| !d.as_os_str().is_empty())
    .unwrap_or_else(|| PathBuf::from("."));
    let shown = r.out.map_or_else(|| "the imported scenario".to_string(), |p| p.display().to_string());
    let checked = check(&mut imported, &dir, &shown);
    for w in &imported.warnings {
        eprintln!("warning: {w}");
    }
    for (var, from) in &imported.env {
        eprintln!("note: set {var} before running ({from})");
    }
    let (yaml, bug) = match checked {
        Ok(file) if r.print_loadtest => {
            (crate::quick::loadtest_yaml(&file).map_err(|e| Failure::CouldNotRun(anyhow::anyhow!(e)))?, None)
        }
        Ok(_) => (imported.yaml, None),
        Err(problem) => {
            let head: String = problem.lines().map(|l| format!("# NOT VALID: {}\n", super::one_line(l))).collect();
            (format!("{head}{}", imported.yaml), Some(problem))
        }
    };
    match r.out {
        Some(p) => crate::files::write_atomically(p, yaml.as_bytes())
            .with_context(|| format!("cannot write {}", p.display()))
            .map_err(Failure::CouldNotRun)?,
        None => print!("{yaml}"),
    }
    match bug {
        None => Ok(ExitCode::SUCCESS),
        Some(problem) => {
            eprintln!(
                "error: a bug of `stampede import`: {shown} does not validate (written anyway, the problem at its \
                 head; please report it with the input):\n{problem}"
            );
            Ok(ExitCode::from(3))
        }
    }
}

/// Loads and validates the output (`shown` in messages); the problem as text when it does not.
fn check(imported: &mut Imported, dir: &Path, shown: &str) -> Result<stampede_model::scenario::ScenarioFile, String> {
    let path = dir.join("imported.yaml");
    let file = stampede_engine::parse_str(&imported.yaml, &path)
        .map_err(|e| e.to_string().replace(&path.display().to_string(), shown))?;
    let files = stand_ins(imported, &file, dir);
    let opts = CompileOptions {
        env: Some(validation_env(imported)),
        base_dir: Some(dir.to_path_buf()),
        files,
        ..CompileOptions::default()
    };
    stampede_engine::validate(&file, &path, &opts)
        .map_err(|e| e.to_string().replace(&path.display().to_string(), shown))?;
    Ok(file)
}
