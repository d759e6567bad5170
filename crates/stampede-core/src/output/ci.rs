//! What CI systems read: JUnit XML (Jenkins, GitLab, GitHub's test reporters; each threshold and
//! each check a test case) and a Markdown summary (a GitHub Actions step summary, a GitLab merge
//! request note).

use std::fmt::Write as _;

use stampede_model::report::{Report, StepSummary};

/// XML text and attribute escaping.
fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Control characters are not allowed in XML 1.0.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// One test case: its name, and its failure message if it failed.
struct Case {
    name: String,
    failure: Option<String>,
}

fn suite(out: &mut String, name: &str, classname: &str, seconds: f64, cases: &[Case]) {
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{seconds:.3}\">",
        xml(name),
        cases.len()
    );
    for c in cases {
        let _ = write!(out, "    <testcase classname=\"{}\" name=\"{}\" time=\"0\"", xml(classname), xml(&c.name));
        match &c.failure {
            None => out.push_str("/>\n"),
            Some(why) => {
                let _ =
                    writeln!(out, ">\n      <failure type=\"failed\" message=\"{}\">{}</failure>", xml(why), xml(why));
                out.push_str("    </testcase>\n");
            }
        }
    }
    out.push_str("  </testsuite>\n");
}

/// The report as JUnit XML: a suite of the thresholds (one case each, failed with its actual
/// value and why), a suite of the checks (one case each, failed when any evaluation failed),
/// and a `run` case that fails when the run was aborted or did not deliver its load.
pub fn render_junit(report: &Report) -> String {
    let seconds = report.run.duration_seconds.max(0.0);
    let class = format!("stampede.{}", report.name);
    let thresholds: Vec<Case> = report
        .thresholds
        .iter()
        .map(|v| Case {
            name: v.threshold.clone(),
            failure: (!v.passed).then(|| match &v.message {
                Some(why) => format!("actual {}: {why}", v.actual_text),
                None => format!("actual {}", v.actual_text),
            }),
        })
        .collect();
    let checks: Vec<Case> = report
        .checks
        .iter()
        .map(|c| Case {
            name: format!("{}/{}: {}", c.scenario, c.step, c.name),
            failure: (c.fails > 0).then(|| format!("{} of {} failed", c.fails, c.passes + c.fails)),
        })
        .collect();
    let run_failure = report
        .run
        .aborted
        .as_ref()
        .map(|why| format!("aborted: {why}"))
        .or_else(|| report.undelivered().map(|why| format!("the load asked for was not delivered: {why}")));
    let run = [Case { name: "run".into(), failure: run_failure }];
    let all = thresholds.len() + checks.len() + run.len();
    let failed =
        [&thresholds[..], &checks[..], &run[..]].iter().flat_map(|s| s.iter()).filter(|c| c.failure.is_some()).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"{}\" tests=\"{all}\" failures=\"{failed}\" errors=\"0\" time=\"{seconds:.3}\">",
        xml(&report.name)
    );
    suite(&mut out, &format!("{} thresholds", report.name), &format!("{class}.thresholds"), seconds, &thresholds);
    suite(&mut out, &format!("{} checks", report.name), &format!("{class}.checks"), seconds, &checks);
    suite(&mut out, &format!("{} run", report.name), &class, seconds, &run);
    out.push_str("</testsuites>\n");
    out
}

/// JUnit XML for a run that could not take place (its setup failed, the built-in target or
/// the workers could not start…): one `run` case in error, with the reason, so a CI test
/// report shows why there are no thresholds or checks to judge.
pub fn render_junit_not_run(name: &str, why: &str) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuites name=\"{}\" tests=\"1\" failures=\"0\" errors=\"1\" time=\"0.000\">", xml(name));
    let _ = writeln!(
        out,
        "  <testsuite name=\"{} run\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" time=\"0.000\">",
        xml(name)
    );
    let _ = writeln!(
        out,
        "    <testcase classname=\"stampede.{}\" name=\"run\" time=\"0\">\n      \
         <error type=\"not-run\" message=\"the run did not take place: {why}\">the run did not take place: {why}</error>\n    \
         </testcase>",
        xml(name),
        why = xml(why)
    );
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// The Markdown summary of a run that could not take place: the verdict and the reason.
pub fn render_summary_not_run(name: &str, why: &str) -> String {
    format!("### Stampede: {}\n\n❌ **Did not run**: {}\n", cell(name), cell(why))
}

/// Markdown table cell text: pipes escaped, one line.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn row(out: &mut String, name: &str, s: &StepSummary) {
    let l = &s.latency_ms;
    let _ = writeln!(
        out,
        "| {} | {} | {:.1} | {:.2} | {:.2} | {:.2} | {:.2} | {} ({:.2} %) |",
        cell(name),
        s.requests,
        s.rps,
        l.p50,
        l.p95,
        l.p99,
        l.max,
        s.errors,
        s.error_rate * 100.0
    );
}

/// The report as Markdown for a CI step summary: the verdict, the run's facts, the total and each
/// step, the thresholds (why one failed), and the checks that failed.
pub fn render_summary_markdown(report: &Report) -> String {
    let r = &report.run;
    let failed = report.thresholds.iter().filter(|v| !v.passed).count();
    let verdict = if let Some(why) = &r.aborted {
        format!("❌ **Aborted**: {why}")
    } else if failed > 0 {
        format!("❌ **Failed**: {failed} of {} thresholds", report.thresholds.len())
    } else if let Some(why) = report.undelivered() {
        format!("⚠️ **Load not delivered**: {why}")
    } else if report.thresholds.is_empty() {
        "**Finished** (no thresholds)".to_string()
    } else {
        format!("✅ **Passed**: {n} of {n} thresholds", n = report.thresholds.len())
    };
    let mut out = String::new();
    let _ = writeln!(out, "### Stampede: {}\n\n{verdict}\n", cell(&report.name));
    let _ = writeln!(
        out,
        "{} · {:.1} s · up to {} VUs · {} iterations · {} requests, {:.1}/s · {} errors ({:.2} %)\n",
        r.executor,
        r.duration_seconds,
        r.vus_max,
        r.iterations,
        report.total.requests,
        report.total.rps,
        report.total.errors,
        report.total.error_rate * 100.0
    );
    out.push_str("| step | requests | req/s | p50 ms | p95 ms | p99 ms | max ms | errors |\n");
    out.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for s in &report.steps {
        row(&mut out, &super::report::step_label(report, s), s);
    }
    row(&mut out, "**total**", &report.total);
    if !report.thresholds.is_empty() {
        out.push_str("\n| | threshold | actual | |\n| --- | --- | ---: | --- |\n");
        for v in &report.thresholds {
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} |",
                if v.passed { "✅" } else { "❌" },
                v.threshold.replace('`', "'"),
                cell(&v.actual_text),
                cell(v.message.as_deref().unwrap_or_default())
            );
        }
    }
    let failing: Vec<_> = report.checks.iter().filter(|c| c.fails > 0).collect();
    if !failing.is_empty() {
        out.push_str("\n**Checks that failed**\n\n");
        for c in failing {
            let _ = writeln!(
                out,
                "- {}/{}: {} — {} of {} failed",
                cell(&c.scenario),
                cell(&c.step),
                cell(&c.name),
                c.fails,
                c.passes + c.fails
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_did_not_take_place_is_one_case_in_error_with_its_reason_escaped() {
        let xml = render_junit_not_run("a <b>", "setup failed: step `x` got \"503\" & more");
        assert!(xml.contains("<testsuites name=\"a &lt;b&gt;\" tests=\"1\" failures=\"0\" errors=\"1\""), "{xml}");
        assert_eq!(xml.matches("<testcase ").count(), 1, "{xml}");
        assert!(
            xml.contains(
                "<error type=\"not-run\" message=\"the run did not take place: setup failed: step `x` got &quot;503&quot; &amp; more\">"
            ),
            "{xml}"
        );
        assert_eq!(render_summary_not_run("a|b", "no\nload"), "### Stampede: a\\|b\n\n❌ **Did not run**: no load\n");
    }
}
