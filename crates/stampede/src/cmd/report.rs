//! `stampede report` and `stampede compare`: a run's HTML report, and two runs compared,
//! from JSON reports or a LoadTest's report ConfigMap (`loadtest/NAME`).

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;

use super::history;
use crate::Failure;
use crate::files;

/// A run's report: from a JSON file, or `loadtest/NAME` (also `loadtests/`, `lt/`) from the
/// LoadTest's report ConfigMap, read with the kubeconfig.
pub(crate) fn read_report(source: &str, namespace: Option<&str>) -> Result<stampede_engine::Report, Failure> {
    if let Some(name) = history::loadtest_name(source) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("cannot start the async runtime")
            .map_err(Failure::CouldNotRun)?;
        return runtime.block_on(history::read_loadtest_report(name, namespace));
    }
    let json = Path::new(source);
    let text = std::fs::read_to_string(json)
        .with_context(|| format!("cannot read {}", json.display()))
        .map_err(Failure::Invalid)?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a Stampede JSON report", json.display()))
        .map_err(Failure::Invalid)
}

/// `stampede compare BASE NEW`.
pub(crate) fn compare(
    base: &str,
    new: &str,
    namespace: Option<&str>,
    details: bool,
    fail_on: &[String],
) -> Result<ExitCode, Failure> {
    // The rules first: a mistake in one must not wait for two reports to be read.
    let rules: Vec<stampede_engine::FailOn> = fail_on
        .iter()
        .map(|r| stampede_engine::FailOn::parse(r))
        .collect::<Result<_, _>>()
        .map_err(|e| Failure::Invalid(anyhow::anyhow!(e)))?;
    let (base_report, new_report) = (read_report(base, namespace)?, read_report(new, namespace)?);
    let judged = stampede_engine::judge(&base_report, &new_report);
    println!("base: {base}\nnew:  {new}");
    print!("{}", stampede_engine::render_verdict(&judged));
    if details {
        let steps = stampede_engine::compare(&base_report, &new_report);
        print!("\n{}", stampede_engine::render_comparison(base, new, &steps));
    } else {
        println!("(--details for every figure of every step)");
    }
    let broken: Vec<String> = rules.iter().filter_map(|r| r.broken(&judged)).collect();
    if broken.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for why in &broken {
        eprintln!("FAILED: --fail-on {why}");
    }
    Ok(ExitCode::from(1))
}

/// `stampede report RUN -o report.html [--baseline BASE]`.
pub(crate) fn html_report(
    source: &str,
    out: &Path,
    baseline: Option<&str>,
    namespace: Option<&str>,
) -> Result<ExitCode, Failure> {
    let mut report = read_report(source, namespace)?;
    if let Some(name) = history::loadtest_name(source) {
        report.trend = history::loadtest_trend(name, namespace)?;
    }
    let baseline = baseline.map(|b| read_report(b, namespace)).transpose()?;
    files::write_atomically(out, stampede_engine::render_html(&report, baseline.as_ref()).as_bytes())
        .with_context(|| format!("cannot write the HTML report to {}", out.display()))
        .map_err(Failure::CouldNotRun)?;
    eprintln!("HTML report written to {}", out.display());
    Ok(ExitCode::SUCCESS)
}
