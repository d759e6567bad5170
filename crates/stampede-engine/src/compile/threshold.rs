//! Thresholds: pass/fail criteria on the results, e.g. `latency{step:login}.p99 < 250ms`,
//! `errors.rate < 1%`, `checks.rate > 99.9%`, `requests.rate >= 100`.
//!
//! Grammar: `METRIC[{KEY:VALUE,...}].STAT OP NUMBER[UNIT]` where METRIC is `latency`,
//! `errors`, `requests` or `checks`; KEY is `scenario` or `step`; OP is one of
//! `< <= > >= == !=`; UNIT is `us`, `ms`, `s` (latency) or `%` (rates).
//! Thresholds are evaluated on merged histograms and counters, never on averaged percentiles.

use std::fmt;

use stampede_model::report::Verdict;
use stampede_model::{ErrorKind, StepKey};

use crate::stats::metrics::StepStats;

/// Which statistic a threshold looks at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stat {
    /// Latency in ms: mean, min, max, or a percentile (0–100).
    LatencyMean,
    LatencyMin,
    LatencyMax,
    LatencyPercentile(f64),
    /// Failed requests / requests (0–1).
    ErrorRate,
    ErrorCount,
    /// Requests per second over the run.
    RequestRate,
    RequestCount,
    /// Answers that passed their checks / answers (0–1).
    CheckRate,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Eq => (a - b).abs() < 1e-9,
            Op::Ne => (a - b).abs() >= 1e-9,
        }
    }
}

/// A parsed threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub source: String,
    pub scenario: Option<String>,
    pub step: Option<String>,
    pub stat: Stat,
    pub op: Op,
    /// Limit in the stat's base unit: ms for latency, 0–1 for rates, per second for request rate.
    pub limit: f64,
    /// Evaluated during the run too; a failure stops it.
    pub abort_on_fail: bool,
    /// With `abort_on_fail`: not evaluated before this much of the run has passed.
    pub delay_abort_eval: std::time::Duration,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ThresholdError(String);

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Parses one threshold expression.
pub(crate) fn parse(src: &str) -> Result<Threshold, ThresholdError> {
    let err = |m: String| ThresholdError(m);
    let s = src.trim();
    let op_pos =
        s.find(['<', '>', '=', '!']).ok_or_else(|| err(format!("`{s}` has no comparison (<, <=, >, >=, ==, !=)")))?;
    let (lhs, rest) = s.split_at(op_pos);
    let (op, rhs) = if let Some(r) = rest.strip_prefix("<=") {
        (Op::Le, r)
    } else if let Some(r) = rest.strip_prefix(">=") {
        (Op::Ge, r)
    } else if let Some(r) = rest.strip_prefix("==") {
        (Op::Eq, r)
    } else if let Some(r) = rest.strip_prefix("!=") {
        (Op::Ne, r)
    } else if let Some(r) = rest.strip_prefix('<') {
        (Op::Lt, r)
    } else if let Some(r) = rest.strip_prefix('>') {
        (Op::Gt, r)
    } else {
        return Err(err(format!("`{s}`: unknown comparison")));
    };
    let lhs = lhs.trim();
    // METRIC[{...}] ends at the `}` if there is one, else at the first dot.
    let split_at = match lhs.find('}') {
        Some(close) => close + 1,
        None => lhs.find('.').unwrap_or(lhs.len()),
    };
    let (metric_part, stat_part) = lhs.split_at(split_at);
    let stat_name = stat_part
        .strip_prefix('.')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| err(format!("`{lhs}`: expected METRIC.STAT, e.g. latency.p99 or errors.rate")))?;
    let (metric, selectors) = match metric_part.split_once('{') {
        Some((m, sel)) => {
            let sel = sel.strip_suffix('}').ok_or_else(|| err(format!("`{metric_part}`: missing `}}`")))?;
            (m.trim(), sel)
        }
        None => (metric_part.trim(), ""),
    };
    let mut scenario = None;
    let mut step = None;
    for pair in sel_pairs(selectors) {
        let (k, v) =
            pair.split_once(':').ok_or_else(|| err(format!("`{pair}`: expected key:value, e.g. step:login")))?;
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
        match k.trim() {
            "scenario" => scenario = Some(v),
            "step" => step = Some(v),
            other => return Err(err(format!("unknown selector `{other}` (use scenario or step)"))),
        }
    }
    let stat = match (metric, stat_name) {
        ("latency", "mean" | "avg") => Stat::LatencyMean,
        ("latency", "min") => Stat::LatencyMin,
        ("latency", "max") => Stat::LatencyMax,
        ("latency", p) if p.starts_with('p') => {
            let q: f64 = p[1..].parse().map_err(|_| err(format!("`{p}` is not a percentile like p95 or p99.9")))?;
            if !(0.0..=100.0).contains(&q) {
                return Err(err(format!("`{p}`: a percentile is between p0 and p100")));
            }
            Stat::LatencyPercentile(q)
        }
        ("errors", "rate") => Stat::ErrorRate,
        ("errors", "count") => Stat::ErrorCount,
        ("requests", "rate") => Stat::RequestRate,
        ("requests", "count") => Stat::RequestCount,
        ("checks", "rate") => Stat::CheckRate,
        ("latency" | "errors" | "requests" | "checks", other) => {
            return Err(err(format!("`{metric}` has no statistic `{other}`")));
        }
        (other, _) => return Err(err(format!("unknown metric `{other}` (use latency, errors, requests or checks)"))),
    };
    let limit = parse_limit(rhs.trim(), stat).map_err(err)?;
    Ok(Threshold {
        source: s.to_string(),
        scenario,
        step,
        stat,
        op,
        limit,
        abort_on_fail: false,
        delay_abort_eval: std::time::Duration::ZERO,
    })
}

fn sel_pairs(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|p| !p.is_empty())
}

fn parse_limit(text: &str, stat: Stat) -> Result<f64, String> {
    let num_end = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+')).unwrap_or(text.len());
    let (num, unit) = text.split_at(num_end);
    if text.trim().is_empty() {
        return Err("the limit is missing after the comparison".into());
    }
    let n: f64 = num.parse().map_err(|_| format!("`{text}` is not a number"))?;
    let unit = unit.trim();
    if n < 0.0 {
        return Err(format!("`{text}`: a limit cannot be negative"));
    }
    match stat {
        Stat::LatencyMean | Stat::LatencyMin | Stat::LatencyMax | Stat::LatencyPercentile(_) => match unit {
            "ms" | "" => Ok(n),
            "s" => Ok(n * 1000.0),
            "us" | "µs" => Ok(n / 1000.0),
            other => Err(format!("`{other}` is not a latency unit (us, ms, s)")),
        },
        Stat::ErrorRate | Stat::CheckRate => match unit {
            "%" if n <= 100.0 => Ok(n / 100.0),
            "%" => Err(format!("`{text}`: a percentage is 0–100%")),
            "" if (0.0..=1.0).contains(&n) => Ok(n),
            "" => Err(format!("`{text}`: a rate is 0–1, or a percentage like 1%")),
            other => Err(format!("`{other}` is not a rate unit (use %)")),
        },
        Stat::RequestRate | Stat::RequestCount | Stat::ErrorCount => match unit {
            "" | "/s" => Ok(n),
            other => Err(format!("`{other}` is not a unit for a count or a rate per second")),
        },
    }
}

impl Threshold {
    /// Checks that the selectors name steps and scenarios that exist.
    pub fn check_selectors(&self, keys: &[StepKey]) -> Result<(), ThresholdError> {
        if let Some(sc) = &self.scenario
            && !keys.iter().any(|k| &k.scenario == sc)
        {
            return Err(ThresholdError(format!("no scenario named `{sc}`")));
        }
        if let Some(st) = &self.step
            && !keys.iter().any(|k| &k.step == st && self.scenario.as_ref().is_none_or(|sc| &k.scenario == sc))
        {
            return Err(ThresholdError(format!("no step named `{st}`")));
        }
        Ok(())
    }

    /// Evaluated during a run (for `abortOnFail`): `None` while the selected steps have no
    /// requests yet, since a latency threshold cannot judge nothing.
    pub fn evaluate_live(&self, keys: &[StepKey], steps: &[StepStats], seconds: f64) -> Option<Verdict> {
        let any = keys.iter().zip(steps).any(|(key, stats)| {
            self.scenario.as_ref().is_none_or(|s| s == &key.scenario)
                && self.step.as_ref().is_none_or(|s| s == &key.step)
                && stats.requests > 0
        });
        any.then(|| self.evaluate(keys, steps, seconds))
    }

    /// Evaluates against per-step stats (merged over workers and runners).
    pub fn evaluate(&self, keys: &[StepKey], steps: &[StepStats], seconds: f64) -> Verdict {
        let mut merged = StepStats::default();
        for (key, stats) in keys.iter().zip(steps) {
            let scenario_ok = self.scenario.as_ref().is_none_or(|s| s == &key.scenario);
            let step_ok = self.step.as_ref().is_none_or(|s| s == &key.step);
            if scenario_ok && step_ok {
                merged.merge(stats);
            }
        }
        let h = &merged.latency;
        let ms = |us: u64| us as f64 / 1000.0;
        let (actual, text) = match self.stat {
            Stat::LatencyMean => (h.mean() / 1000.0, None),
            Stat::LatencyMin => (ms(merged.min_latency_us()), None),
            Stat::LatencyMax => (ms(merged.max_us), None),
            Stat::LatencyPercentile(q) => (ms(merged.quantile_us(q / 100.0)), None),
            Stat::ErrorRate => {
                let r = if merged.requests == 0 { 0.0 } else { merged.error_total() as f64 / merged.requests as f64 };
                (r, Some(format!("{:.3}%", r * 100.0)))
            }
            Stat::ErrorCount => (merged.error_total() as f64, Some(merged.error_total().to_string())),
            Stat::RequestRate => {
                let r = if seconds > 0.0 { merged.requests as f64 / seconds } else { 0.0 };
                (r, Some(format!("{r:.1}/s")))
            }
            Stat::RequestCount => (merged.requests as f64, Some(merged.requests.to_string())),
            Stat::CheckRate => {
                // Named checks when the selection has any; else answers that passed the
                // status acceptance.
                let (passed, failed) = merged.check_totals();
                let r = if passed + failed > 0 {
                    passed as f64 / (passed + failed) as f64
                } else {
                    let answered = h.len();
                    let failed = merged.errors[ErrorKind::Check.index()];
                    if answered == 0 { 1.0 } else { (answered.saturating_sub(failed)) as f64 / answered as f64 }
                };
                (r, Some(format!("{:.3}%", r * 100.0)))
            }
        };
        let is_latency =
            matches!(self.stat, Stat::LatencyMean | Stat::LatencyMin | Stat::LatencyMax | Stat::LatencyPercentile(_));
        // No samples: latency thresholds cannot pass.
        let passed = if is_latency && h.is_empty() { false } else { self.op.holds(actual, self.limit) };
        let actual_text = text.unwrap_or_else(|| format!("{actual:.3}ms"));
        let shown = if matches!(self.stat, Stat::ErrorRate | Stat::CheckRate) { actual * 100.0 } else { actual };
        Verdict { threshold: self.source.clone(), passed, actual: (shown * 1000.0).round() / 1000.0, actual_text }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<StepKey> {
        vec![
            StepKey { scenario: "buy".into(), step: "login".into() },
            StepKey { scenario: "buy".into(), step: "cart".into() },
            StepKey { scenario: "browse".into(), step: "home".into() },
        ]
    }

    fn stats(latencies_ms: &[u64], errors: u64, check_failures: u64) -> StepStats {
        let mut s = StepStats::default();
        for l in latencies_ms {
            s.record_latency_us(l * 1000);
        }
        s.requests = latencies_ms.len() as u64 + errors;
        for _ in 0..errors {
            s.record_error(ErrorKind::Connect);
        }
        for _ in 0..check_failures {
            s.record_error(ErrorKind::Check);
        }
        s
    }

    #[test]
    fn parses_the_documented_forms() {
        let t = parse("latency{step:login}.p99 < 250ms").unwrap();
        assert_eq!(
            (t.step.as_deref(), t.stat, t.op, t.limit),
            (Some("login"), Stat::LatencyPercentile(99.0), Op::Lt, 250.0)
        );
        let t = parse("latency{scenario: buy, step: cart}.p99.9 <= 1.5s").unwrap();
        assert_eq!((t.scenario.as_deref(), t.stat, t.limit), (Some("buy"), Stat::LatencyPercentile(99.9), 1500.0));
        assert_eq!(parse("errors.rate < 1%").unwrap().limit, 0.01);
        assert_eq!(parse("checks.rate > 99.9%").unwrap().stat, Stat::CheckRate);
        assert_eq!(parse("requests.rate >= 100").unwrap().stat, Stat::RequestRate);
        assert_eq!(parse("latency.mean < 500us").unwrap().limit, 0.5);
    }

    #[test]
    fn rejects_malformed_thresholds_with_a_reason() {
        for (src, msg) in [
            ("latency.p99 250ms", "no comparison"),
            ("latncy.p99 < 1s", "unknown metric `latncy`"),
            ("latency.p101 < 1s", "between p0 and p100"),
            ("latency.median < 1s", "no statistic `median`"),
            ("errors.rate < 5", "a rate is 0–1"),
            ("latency{host:x}.p99 < 1s", "unknown selector `host`"),
            ("latency.p99 < 1 parsec", "not a latency unit"),
            ("latency.p99 < fast", "not a number"),
        ] {
            let e = parse(src).unwrap_err();
            assert!(e.0.contains(msg), "{src}: {e}");
        }
        let t = parse("latency{step:nope}.p99 < 1s").unwrap();
        assert!(t.check_selectors(&keys()).unwrap_err().0.contains("no step named `nope`"));
    }

    #[test]
    fn evaluates_on_merged_samples_per_selector() {
        let steps = vec![stats(&[10, 20, 300], 0, 0), stats(&[5; 100], 1, 2), stats(&[1000], 0, 0)];
        let v = parse("latency{step:login}.max < 250ms").unwrap().evaluate(&keys(), &steps, 10.0);
        assert!(!v.passed);
        assert_eq!(v.actual, 300.0);
        let v = parse("latency{scenario:buy}.p50 < 6ms").unwrap().evaluate(&keys(), &steps, 10.0);
        assert!(v.passed, "{v:?}");
        let v = parse("latency.max <= 1s").unwrap().evaluate(&keys(), &steps, 10.0);
        assert!(v.passed, "{v:?}");
        // 3 failures (1 connect + 2 checks) out of 105 requests.
        let v = parse("errors.rate < 1%").unwrap().evaluate(&keys(), &steps, 10.0);
        assert!(!v.passed);
        assert!((v.actual - 300.0 / 105.0).abs() < 0.001, "{v:?}");
        let v = parse("checks{step:cart}.rate > 97%").unwrap().evaluate(&keys(), &steps, 10.0);
        assert!(v.passed, "{v:?}"); // 98 of 100 answers passed
        let v = parse("requests.rate >= 10").unwrap().evaluate(&keys(), &steps, 10.0);
        assert!(v.passed, "{v:?}"); // 105 requests in 10 s
    }
}
