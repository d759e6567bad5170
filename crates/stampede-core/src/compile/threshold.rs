//! Thresholds: pass/fail criteria on the results, e.g. `latency{step:login}.p99 < 250ms`,
//! `errors.rate < 1%`, `checks.rate > 99.9%`, `requests.rate >= 100`.
//!
//! Grammar: `METRIC[{KEY:VALUE,...}].STAT OP NUMBER[UNIT]` where METRIC is `latency`,
//! `errors`, `requests` or `checks`; KEY is `scenario`, `step` or `group` (a `group` block's
//! transactions: `requests` counts them, `errors` the failed ones), and for `errors` also `kind`
//! (one kind of error: `errors{kind:UNAVAILABLE}.rate < 0.1%`, `errors{kind:timeout}.count == 0`); OP is one of
//! `< <= > >= == !=`; UNIT is `us`, `ms`, `s` (latency) or `%` (rates).
//! Thresholds are evaluated on merged histograms and counters, never on averaged percentiles.
//!
//! A threshold can be relative to a baseline run: `latency.p99 < baseline * 1.10`,
//! `requests.rate > baseline * 0.95` (`baseline` alone is `baseline * 1`). The baseline's value
//! comes from its report, for the same statistic and selectors; without a baseline such a
//! threshold fails and says why.

use std::fmt;

use stampede_model::report::{LatencySummary, Report, StepSummary, Verdict};
use stampede_model::{ErrorKind, StepKey};

use crate::stats::metrics::{StepStats, WorkerMetrics};

/// What thresholds judge: the steps' stats and the `group` blocks' transactions, each with
/// its (scenario, name) keys.
#[derive(Clone, Copy)]
pub struct Measured<'a> {
    /// (scenario, step) names by metric index, one per entry of `steps`.
    pub step_keys: &'a [StepKey],
    /// Each step's stats, by metric index.
    pub steps: &'a [StepStats],
    /// (scenario, group) names of the `group` blocks by transaction index, one per entry of `groups`.
    pub group_keys: &'a [StepKey],
    /// Each `group` block's transaction stats, by transaction index.
    pub groups: &'a [StepStats],
}

impl<'a> Measured<'a> {
    /// A plan's keys with recorded `metrics`.
    pub fn new(step_keys: &'a [StepKey], group_keys: &'a [StepKey], metrics: &'a WorkerMetrics) -> Self {
        Measured { step_keys, steps: &metrics.steps, group_keys, groups: &metrics.groups }
    }
}

/// Which statistic a threshold looks at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stat {
    /// Latency in ms: mean, min, max, or a percentile (0–100).
    LatencyMean,
    /// `latency.min`, in ms.
    LatencyMin,
    /// `latency.max`, in ms.
    LatencyMax,
    /// `latency.pQ`: percentile Q (0–100, `p99.9` is 99.9), in ms.
    LatencyPercentile(f64),
    /// Failed requests / requests (0–1).
    ErrorRate,
    /// `errors.count`: failed requests (of `kind` when selected), a count.
    ErrorCount,
    /// Requests per second over the run.
    RequestRate,
    /// `requests.count`: requests (a group's transactions), a count.
    RequestCount,
    /// Answers that passed their checks / answers (0–1).
    CheckRate,
}

/// How the measured value compares to the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `<`: below the limit.
    Lt,
    /// `<=`: at most the limit.
    Le,
    /// `>`: above the limit.
    Gt,
    /// `>=`: at least the limit.
    Ge,
    /// `==`: equal to the limit, within 1e-9.
    Eq,
    /// `!=`: off the limit by 1e-9 or more.
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
    /// The threshold as written (trimmed): how reports and verdicts name it.
    pub source: String,
    /// Only this scenario's steps or groups (`scenario:`); `None`: every scenario.
    pub scenario: Option<String>,
    /// Only steps of this name (`step:`); `None`: every step, unless `group` is set.
    pub step: Option<String>,
    /// A `group` block's transactions instead of steps.
    pub group: Option<String>,
    /// `errors` of this kind only (a gRPC status, `timeout`…).
    pub kind: Option<ErrorKind>,
    /// The statistic compared, with its metric.
    pub stat: Stat,
    /// How the statistic compares to the limit.
    pub op: Op,
    /// Limit in the stat's base unit: ms for latency, 0–1 for rates, per second for request rate.
    /// Unused when the threshold is relative.
    pub limit: f64,
    /// `… OP baseline * F`: the limit is the baseline's value times F.
    pub relative: Option<f64>,
    /// Evaluated during the run too; a failure stops it.
    pub abort_on_fail: bool,
    /// With `abort_on_fail`: not evaluated before this much of the run has passed.
    pub delay_abort_eval: std::time::Duration,
}

/// Why a threshold does not parse, in words for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ThresholdError(String);

impl fmt::Display for Threshold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Parses one threshold expression.
pub fn parse(src: &str) -> Result<Threshold, ThresholdError> {
    let s = src.trim();
    let (lhs, op, rhs) = split_comparison(s)?;
    let (metric, selectors, stat_name) = split_metric(lhs.trim())?;
    let Selectors { scenario, step, group, kind } = parse_selectors(selectors, metric)?;
    let stat = parse_stat(metric, stat_name)?;
    let (limit, relative) = match parse_relative(rhs.trim()).map_err(ThresholdError)? {
        Some(factor) => (0.0, Some(factor)),
        None => (parse_limit(rhs.trim(), stat).map_err(ThresholdError)?, None),
    };
    Ok(Threshold {
        source: s.to_string(),
        scenario,
        step,
        group,
        kind,
        stat,
        op,
        limit,
        relative,
        abort_on_fail: false,
        delay_abort_eval: std::time::Duration::ZERO,
    })
}

/// A threshold split at its comparison: (the left side, the comparison, the right side).
fn split_comparison(s: &str) -> Result<(&str, Op, &str), ThresholdError> {
    let err = |m: String| ThresholdError(m);
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
    Ok((lhs, op, rhs))
}

/// The left side `METRIC[{SELECTORS}].STAT` split into (metric, selectors, statistic).
fn split_metric(lhs: &str) -> Result<(&str, &str, &str), ThresholdError> {
    let err = |m: String| ThresholdError(m);
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
    Ok((metric, selectors, stat_name))
}

/// What a threshold's selectors (`{KEY:VALUE,...}`) pick.
#[derive(Default)]
struct Selectors {
    scenario: Option<String>,
    step: Option<String>,
    group: Option<String>,
    kind: Option<ErrorKind>,
}

/// The selectors of `metric` (`scenario:buy, step:login`), each known and fit for the metric,
/// with a `step` or a `group`, not both.
fn parse_selectors(selectors: &str, metric: &str) -> Result<Selectors, ThresholdError> {
    let err = |m: String| ThresholdError(m);
    let mut picked = Selectors::default();
    for pair in sel_pairs(selectors) {
        let (k, v) =
            pair.split_once(':').ok_or_else(|| err(format!("`{pair}`: expected key:value, e.g. step:login")))?;
        let v = v.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
        match k.trim() {
            "scenario" => picked.scenario = Some(v),
            "step" => picked.step = Some(v),
            "group" => picked.group = Some(v),
            "kind" => {
                let known = ErrorKind::ALL.iter().find(|k| k.name().eq_ignore_ascii_case(&v)).copied();
                let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
                picked.kind =
                    Some(known.ok_or_else(|| {
                        err(format!("`{v}` is not a kind of error (the kinds: {})", names.join(", ")))
                    })?);
            }
            other => return Err(err(format!("unknown selector `{other}` (use scenario, step, group or kind)"))),
        }
    }
    if picked.kind.is_some() && metric != "errors" {
        return Err(err(format!("`kind` selects errors: `errors{{kind:…}}.rate`, not `{metric}`")));
    }
    if picked.step.is_some() && picked.group.is_some() {
        return Err(err("select a `step` or a `group`, not both".into()));
    }
    Ok(picked)
}

/// Statistic `stat_name` of `metric` (`p99` of `latency`: its 99th percentile).
fn parse_stat(metric: &str, stat_name: &str) -> Result<Stat, ThresholdError> {
    let err = |m: String| ThresholdError(m);
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
    Ok(stat)
}

/// `baseline` or `baseline * F` (F a positive number): `Some(F)`; anything else: `None`.
fn parse_relative(text: &str) -> Result<Option<f64>, String> {
    let Some(rest) = text.strip_prefix("baseline") else { return Ok(None) };
    let rest = rest.trim();
    if rest.is_empty() {
        return Ok(Some(1.0));
    }
    let factor = rest
        .strip_prefix('*')
        .map(str::trim)
        .ok_or_else(|| format!("`{text}`: expected `baseline` or `baseline * FACTOR`, e.g. baseline * 1.10"))?;
    match factor.parse::<f64>() {
        Ok(f) if f > 0.0 && f.is_finite() => Ok(Some(f)),
        _ => Err(format!("`{factor}`: the factor of a baseline is a positive number, e.g. 1.10")),
    }
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
    /// Checks that the selectors name steps, groups and scenarios that exist.
    pub fn check_selectors(&self, keys: &[StepKey], group_keys: &[StepKey]) -> Result<(), ThresholdError> {
        if let Some(sc) = &self.scenario
            && !keys.iter().chain(group_keys).any(|k| &k.scenario == sc)
        {
            return Err(ThresholdError(format!("no scenario named `{sc}`")));
        }
        for (what, name, keys) in [("step", &self.step, keys), ("group", &self.group, group_keys)] {
            if let Some(name) = name
                && !keys.iter().any(|k| &k.step == name && self.scenario.as_ref().is_none_or(|sc| &k.scenario == sc))
            {
                return Err(ThresholdError(format!("no {what} named `{name}`")));
            }
        }
        Ok(())
    }

    /// The stats it selects, with their keys: a group's transactions, or steps.
    fn selected<'a>(&'a self, m: &Measured<'a>) -> impl Iterator<Item = &'a StepStats> + 'a {
        let (keys, stats, name) = match &self.group {
            Some(g) => (m.group_keys, m.groups, Some(g)),
            None => (m.step_keys, m.steps, self.step.as_ref()),
        };
        keys.iter().zip(stats).filter_map(move |(key, stats)| {
            let scenario_ok = self.scenario.as_ref().is_none_or(|s| s == &key.scenario);
            (scenario_ok && name.is_none_or(|n| n == &key.step)).then_some(stats)
        })
    }

    /// Evaluated during a run (for `abortOnFail`): `None` while the selected steps have no
    /// requests yet, since a latency threshold cannot judge nothing.
    pub fn evaluate_live(&self, m: &Measured<'_>, seconds: f64) -> Option<Verdict> {
        if self.relative.is_some() {
            return None; // judged at the end, against the baseline
        }
        let any = self.selected(m).any(|stats| stats.requests > 0);
        any.then(|| self.evaluate(m, seconds))
    }

    /// Evaluates against per-step stats (merged over workers and runners). A relative
    /// threshold fails here, saying it has no baseline; see [`Threshold::evaluate_against`].
    pub fn evaluate(&self, m: &Measured<'_>, seconds: f64) -> Verdict {
        self.evaluate_against(m, seconds, Err(NO_BASELINE))
    }

    /// Evaluates against per-step stats, a relative threshold against `baseline` (or fails,
    /// naming why there is none).
    pub fn evaluate_against(&self, m: &Measured<'_>, seconds: f64, baseline: Baseline<'_>) -> Verdict {
        // At the precision of the steps' histograms (a live figure's is coarser than a final
        // one's), so that a verdict's figure is the one its step's row shows.
        let mut selected = self.selected(m).peekable();
        let mut merged = StepStats::default();
        if let Some(first) = selected.peek().filter(|s| s.latency.sigfig() != merged.latency.sigfig()) {
            merged.latency = hdrhistogram::Histogram::new_from(&first.latency);
        }
        for stats in selected {
            merged.merge(stats);
        }
        let h = &merged.latency;
        let ms = |us: u64| us as f64 / 1000.0;
        let actual = match self.stat {
            Stat::LatencyMean => h.mean() / 1000.0,
            Stat::LatencyMin => ms(merged.min_latency_us()),
            Stat::LatencyMax => ms(merged.max_us),
            Stat::LatencyPercentile(q) => ms(merged.quantile_us(q / 100.0)),
            Stat::ErrorRate => {
                if merged.requests == 0 {
                    0.0
                } else {
                    self.errors_of(&merged) as f64 / merged.requests as f64
                }
            }
            Stat::ErrorCount => self.errors_of(&merged) as f64,
            Stat::RequestRate => {
                if seconds > 0.0 {
                    merged.requests as f64 / seconds
                } else {
                    0.0
                }
            }
            Stat::RequestCount => merged.requests as f64,
            Stat::CheckRate => {
                // Named checks when the selection has any; else answers that passed the
                // status acceptance.
                let (passed, failed) = merged.check_totals();
                if passed + failed > 0 {
                    passed as f64 / (passed + failed) as f64
                } else {
                    let answered = h.len();
                    let failed = merged.errors[ErrorKind::Check.index()];
                    if answered == 0 { 1.0 } else { (answered.saturating_sub(failed)) as f64 / answered as f64 }
                }
            }
        };
        // No samples: latency thresholds cannot pass.
        let no_samples = self.is_latency() && h.is_empty();
        let mut verdict = Verdict {
            threshold: self.source.clone(),
            passed: false,
            actual: self.shown(actual),
            actual_text: self.text(actual),
            baseline: None,
            ratio: None,
            message: no_samples.then(|| "no answered requests to measure".to_string()),
        };
        match self.relative {
            None => verdict.passed = !no_samples && self.op.holds(actual, self.limit),
            Some(factor) => match baseline.map_err(str::to_string).and_then(|b| self.baseline_value(b)) {
                Ok(base) => {
                    verdict.baseline = Some(self.shown(base));
                    verdict.ratio = (base > 0.0).then(|| (actual / base * 1000.0).round() / 1000.0);
                    verdict.passed = !no_samples && self.op.holds(actual, base * factor);
                    let ratio = verdict.ratio.map_or("–".into(), |r| format!("×{r:.3}"));
                    verdict.actual_text = format!("{} (baseline {}, {ratio})", self.text(actual), self.text(base));
                }
                Err(why) => verdict.message = Some(format!("not judged: {why}")),
            },
        }
        verdict
    }

    /// The selected errors: of the threshold's kind, or all.
    fn errors_of(&self, merged: &StepStats) -> u64 {
        self.kind.map_or_else(|| merged.error_total(), |k| merged.errors[k.index()])
    }

    fn is_latency(&self) -> bool {
        matches!(self.stat, Stat::LatencyMean | Stat::LatencyMin | Stat::LatencyMax | Stat::LatencyPercentile(_))
    }

    /// A value in the threshold's base unit as reported: rates in percent, rounded.
    fn shown(&self, v: f64) -> f64 {
        let v = if matches!(self.stat, Stat::ErrorRate | Stat::CheckRate) { v * 100.0 } else { v };
        (v * 1000.0).round() / 1000.0
    }

    fn text(&self, v: f64) -> String {
        match self.stat {
            Stat::ErrorRate | Stat::CheckRate => format!("{:.3}%", v * 100.0),
            Stat::ErrorCount | Stat::RequestCount => format!("{v:.0}"),
            Stat::RequestRate => format!("{v:.1}/s"),
            _ => format!("{v:.3}ms"),
        }
    }

    /// The same statistic of a baseline run, from its report (in the base unit), for the same
    /// selectors.
    pub fn baseline_value(&self, base: &Report) -> Result<f64, String> {
        let selected: Vec<&StepSummary> = match (&self.scenario, &self.step, &self.group) {
            (None, None, None) => vec![&base.total],
            (scenario, step, group) => (if group.is_some() { &base.groups } else { &base.steps })
                .iter()
                .filter(|s| {
                    scenario.as_ref().is_none_or(|x| s.scenario.as_ref() == Some(x))
                        && step.as_ref().or(group.as_ref()).is_none_or(|x| s.step.as_ref() == Some(x))
                })
                .collect(),
        };
        let what = || {
            let mut parts = Vec::new();
            if let Some(s) = &self.scenario {
                parts.push(format!("scenario `{s}`"));
            }
            if let Some(s) = &self.step {
                parts.push(format!("step `{s}`"));
            }
            if let Some(g) = &self.group {
                parts.push(format!("group `{g}`"));
            }
            parts.join(", ")
        };
        if selected.is_empty() {
            return Err(format!("the baseline has no {}", what()));
        }
        let requests: u64 = selected.iter().map(|s| s.requests).sum();
        let errors: u64 = match self.kind {
            Some(k) => selected.iter().map(|s| s.errors_by_kind.get(k.name()).copied().unwrap_or(0)).sum(),
            None => selected.iter().map(|s| s.errors).sum(),
        };
        let latency = || -> Result<&LatencySummary, String> {
            match selected.as_slice() {
                [one] => Ok(&one.latency_ms),
                _ => Err(format!(
                    "the baseline's report keeps latency per step; {} has {} steps (select one step)",
                    what(),
                    selected.len()
                )),
            }
        };
        Ok(match self.stat {
            Stat::LatencyMean => latency()?.mean,
            Stat::LatencyMin => latency()?.min,
            Stat::LatencyMax => latency()?.max,
            Stat::LatencyPercentile(q) => {
                let l = latency()?;
                match q {
                    50.0 => l.p50,
                    75.0 => l.p75,
                    90.0 => l.p90,
                    95.0 => l.p95,
                    99.0 => l.p99,
                    99.9 => l.p999,
                    _ => {
                        return Err(format!("the baseline's report has p50, p75, p90, p95, p99 and p99.9, not p{q}"));
                    }
                }
            }
            Stat::ErrorRate => {
                if requests == 0 {
                    0.0
                } else {
                    errors as f64 / requests as f64
                }
            }
            Stat::ErrorCount => errors as f64,
            Stat::RequestRate => selected.iter().map(|s| s.rps).sum(),
            Stat::RequestCount => requests as f64,
            Stat::CheckRate => {
                let checks: Vec<_> = base
                    .checks
                    .iter()
                    .filter(|c| {
                        self.scenario.as_ref().is_none_or(|x| &c.scenario == x)
                            && self.step.as_ref().is_none_or(|x| &c.step == x)
                    })
                    .collect();
                let (passed, failed) = checks.iter().fold((0, 0), |(p, f), c| (p + c.passes, f + c.fails));
                if passed + failed > 0 {
                    passed as f64 / (passed + failed) as f64
                } else {
                    let answered: u64 = selected.iter().map(|s| s.responses).sum();
                    let failed: u64 =
                        selected.iter().map(|s| s.errors_by_kind.get("check").copied().unwrap_or(0)).sum();
                    if answered == 0 { 1.0 } else { answered.saturating_sub(failed) as f64 / answered as f64 }
                }
            }
        })
    }
}

/// What relative thresholds (`… < baseline * 1.10`) are judged against: the baseline run's
/// report, or why there is none (they then fail, saying so).
pub type Baseline<'a> = Result<&'a Report, &'a str>;

/// Why a run without `--baseline` (or `spec.baseline`) fails its relative thresholds.
pub const NO_BASELINE: &str = "no baseline run was given";

/// The one judgement of a plan's thresholds, wherever it is made — a run's report, a capacity
/// plateau, the operator's merged results: each of `thresholds` on what `measured` holds over
/// `seconds`, relative ones against `baseline`.
pub fn judge_thresholds(
    thresholds: &[Threshold],
    measured: &Measured<'_>,
    seconds: f64,
    baseline: Baseline<'_>,
) -> Vec<Verdict> {
    thresholds.iter().map(|t| t.evaluate_against(measured, seconds, baseline)).collect()
}

/// The verdicts a fleet's live figures can give while its run goes on: each of `thresholds` on
/// the steps so far (`steps`, by the keys of `step_keys`) over `seconds`. Left for the end: a
/// relative threshold (its baseline is judged with the final figures), a group's (runners send
/// their groups' transactions only with their result) and a rate of named checks (likewise);
/// and a threshold whose steps have no request yet.
pub fn live_verdicts(
    thresholds: &[Threshold],
    step_keys: &[StepKey],
    steps: &[StepStats],
    seconds: f64,
) -> Vec<Verdict> {
    let m = Measured { step_keys, steps, group_keys: &[], groups: &[] };
    thresholds
        .iter()
        .filter(|t| t.group.is_none() && t.stat != Stat::CheckRate)
        .filter_map(|t| t.evaluate_live(&m, seconds))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_verdicts_judge_the_steps_so_far_and_leave_what_only_the_end_has() {
        let steps = [stats(&[1, 1], 0, 0), stats(&[2, 900], 1, 0), StepStats::default()];
        let thresholds: Vec<Threshold> = [
            "latency.p99 < 500ms",
            "errors.rate < 25%",
            "requests{step:home}.count > 0",
            "latency{group:checkout}.max < 400ms",
            "checks.rate > 99%",
            "latency.p99 < baseline * 1.1",
        ]
        .iter()
        .map(|t| parse(t).unwrap())
        .collect();
        let judged: Vec<(String, bool)> =
            live_verdicts(&thresholds, &keys(), &steps, 10.0).into_iter().map(|v| (v.threshold, v.passed)).collect();
        assert_eq!(judged, [("latency.p99 < 500ms".into(), false), ("errors.rate < 25%".into(), true)]);
    }

    fn keys() -> Vec<StepKey> {
        vec![
            StepKey { scenario: "buy".into(), step: "login".into() },
            StepKey { scenario: "buy".into(), step: "cart".into() },
            StepKey { scenario: "browse".into(), step: "home".into() },
        ]
    }

    fn on<'a>(step_keys: &'a [StepKey], steps: &'a [StepStats]) -> Measured<'a> {
        Measured { step_keys, steps, group_keys: &[], groups: &[] }
    }

    #[test]
    fn a_group_selector_judges_the_groups_transactions_not_its_steps() {
        let group_keys = [StepKey { scenario: "buy".into(), step: "checkout".into() }];
        let steps = [stats(&[1, 1], 0, 0), stats(&[2], 0, 0), stats(&[3], 0, 0)];
        let groups = [stats(&[40, 60, 500], 1, 0)];
        let m = Measured { step_keys: &keys(), steps: &steps, group_keys: &group_keys, groups: &groups };
        let v = parse("latency{group:checkout}.max < 400ms").unwrap().evaluate(&m, 10.0);
        assert_eq!((v.passed, v.actual), (false, 500.0));
        let v = parse("requests{group:checkout}.count == 4").unwrap().evaluate(&m, 10.0);
        assert!(v.passed, "{v:?}");
        let v = parse("errors{scenario:buy, group:checkout}.rate <= 25%").unwrap().evaluate(&m, 10.0);
        assert_eq!((v.passed, v.actual), (true, 25.0));
        let t = parse("latency{group:nope}.p95 < 1s").unwrap();
        assert!(t.check_selectors(&keys(), &group_keys).unwrap_err().0.contains("no group named `nope`"));
        assert!(parse("latency{group:checkout}.p95 < 1s").unwrap().check_selectors(&keys(), &group_keys).is_ok());
        assert!(parse("latency{step:login, group:checkout}.p95 < 1s").is_err());
    }

    #[test]
    fn a_kind_selector_judges_one_kind_of_error_such_as_a_grpc_status() {
        let mut s = stats(&[1; 90], 4, 0);
        for _ in 0..6 {
            s.record_error(ErrorKind::Unavailable);
        }
        s.requests += 6;
        let steps = [s, stats(&[1], 0, 0), stats(&[1], 0, 0)];
        let keys = keys();
        let m = on(&keys, &steps);
        // 102 requests: 4 connect errors and 6 UNAVAILABLE.
        let v = parse("errors{kind:UNAVAILABLE}.count == 6").unwrap().evaluate(&m, 10.0);
        assert!(v.passed, "{v:?}");
        let v = parse("errors{step:login, kind:unavailable}.rate < 5%").unwrap().evaluate(&m, 10.0);
        assert_eq!((v.passed, v.actual), (false, 6.0), "6 of the step's 100 requests");
        let v = parse("errors{kind:DEADLINE_EXCEEDED}.count == 0").unwrap().evaluate(&m, 10.0);
        assert!(v.passed);
        assert!(parse("errors{kind:nope}.rate < 1%").unwrap_err().0.contains("`nope` is not a kind of error"));
        assert!(parse("latency{kind:timeout}.p99 < 1s").unwrap_err().0.contains("`kind` selects errors"));
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
        assert!(t.check_selectors(&keys(), &[]).unwrap_err().0.contains("no step named `nope`"));
    }

    #[test]
    fn evaluates_on_merged_samples_per_selector() {
        let steps = vec![stats(&[10, 20, 300], 0, 0), stats(&[5; 100], 1, 2), stats(&[1000], 0, 0)];
        let v = parse("latency{step:login}.max < 250ms").unwrap().evaluate(&on(&keys(), &steps), 10.0);
        assert!(!v.passed);
        assert_eq!(v.actual, 300.0);
        let v = parse("latency{scenario:buy}.p50 < 6ms").unwrap().evaluate(&on(&keys(), &steps), 10.0);
        assert!(v.passed, "{v:?}");
        let v = parse("latency.max <= 1s").unwrap().evaluate(&on(&keys(), &steps), 10.0);
        assert!(v.passed, "{v:?}");
        // 3 failures (1 connect + 2 checks) out of 105 requests.
        let v = parse("errors.rate < 1%").unwrap().evaluate(&on(&keys(), &steps), 10.0);
        assert!(!v.passed);
        assert!((v.actual - 300.0 / 105.0).abs() < 0.001, "{v:?}");
        let v = parse("checks{step:cart}.rate > 97%").unwrap().evaluate(&on(&keys(), &steps), 10.0);
        assert!(v.passed, "{v:?}"); // 98 of 100 answers passed
        let v = parse("requests.rate >= 10").unwrap().evaluate(&on(&keys(), &steps), 10.0);
        assert!(v.passed, "{v:?}"); // 105 requests in 10 s
    }

    fn baseline_report(p99_ms: f64, requests: u64, errors: u64) -> Report {
        let summary = |step: Option<&str>| StepSummary {
            scenario: step.map(|_| "buy".to_string()),
            step: step.map(str::to_string),
            requests,
            responses: requests - errors,
            errors,
            error_rate: 0.0,
            errors_by_kind: Default::default(),
            status_codes: Default::default(),
            grpc_statuses: Default::default(),
            ws_close_codes: Default::default(),
            latency_ms: LatencySummary { p50: p99_ms / 2.0, p99: p99_ms, ..LatencySummary::default() },
            service_ms: None,
            round_trip_ms: None,
            phases_ms: Default::default(),
            rps: requests as f64 / 10.0,
            bytes_received: 0,
            bytes_sent: 0,
            received_per_sec: 0.0,
            sent_per_sec: 0.0,
            messages: None,
        };
        let text = serde_json::json!({
            "schemaVersion": 1, "name": "base", "startedAt": "2026-01-01T00:00:00Z",
            "run": {"executor": "constant-vus", "durationSeconds": 10.0, "vusMax": 1, "threads": 1,
                    "iterations": 0, "interrupted": false, "builtinTarget": false,
                    "generator": {"cpuPercent": 0.0, "cpuSeconds": 0.0, "cpuMicrosPerRequest": 0.0, "peakRssBytes": 0}},
            "total": summary(None), "steps": [summary(Some("login"))], "scenarios": [], "timeline": [],
            "checks": [], "errorSamples": [], "thresholds": []
        });
        serde_json::from_value(text).unwrap()
    }

    #[test]
    fn relative_thresholds_compare_with_the_baselines_value_and_say_base_new_and_ratio() {
        let t = parse("latency.p99 < baseline * 1.10").unwrap();
        assert_eq!((t.relative, t.stat), (Some(1.1), Stat::LatencyPercentile(99.0)));
        assert_eq!(parse("requests.rate >= baseline").unwrap().relative, Some(1.0));
        for (src, msg) in [
            ("latency.p99 < baseline + 5", "expected `baseline` or `baseline * FACTOR`"),
            ("latency.p99 < baseline * -1", "a positive number"),
            ("latency.p99 < baseline * x", "a positive number"),
        ] {
            assert!(parse(src).unwrap_err().0.contains(msg), "{src}");
        }
        // This run: 3 requests at 10, 20, 300 ms on step login; the baseline's p99 was 250 ms.
        let steps = vec![stats(&[10, 20, 300], 0, 0), stats(&[], 0, 0), stats(&[], 0, 0)];
        let base = baseline_report(250.0, 4, 1);
        let v = t.evaluate_against(&on(&keys(), &steps), 10.0, Ok(&base));
        assert!(!v.passed, "300 ms is more than 250 ms × 1.10: {v:?}");
        assert_eq!((v.actual, v.baseline, v.ratio), (300.0, Some(250.0), Some(1.2)));
        assert!(v.actual_text.contains("baseline 250.000ms") && v.actual_text.contains("×1.200"), "{}", v.actual_text);
        let v = parse("latency.p99 < baseline * 1.25").unwrap().evaluate_against(&on(&keys(), &steps), 10.0, Ok(&base));
        assert!(v.passed, "{v:?}");
        // Per step, from the baseline's step; a rate from its counts (1 error in 4).
        let v = parse("errors{step:login}.rate <= baseline").unwrap().evaluate_against(
            &on(&keys(), &steps),
            10.0,
            Ok(&base),
        );
        assert!(v.passed && v.baseline == Some(25.0), "{v:?}");
        // A percentile the report does not keep, a step it does not have, and no baseline at all:
        // the threshold fails and says why.
        for (src, why) in [
            ("latency.p97 < baseline", "not p97"),
            ("latency{step:cart}.p99 < baseline", "the baseline has no step `cart`"),
        ] {
            let v = parse(src).unwrap().evaluate_against(&on(&keys(), &steps), 10.0, Ok(&base));
            assert!(!v.passed && v.message.as_deref().unwrap().contains(why), "{src}: {v:?}");
        }
        let v = t.evaluate(&on(&keys(), &steps), 10.0);
        assert!(!v.passed && v.message.as_deref().unwrap().contains("no baseline"), "{v:?}");
        assert_eq!(t.evaluate_live(&on(&keys(), &steps), 10.0), None, "judged at the end only");
    }
}
