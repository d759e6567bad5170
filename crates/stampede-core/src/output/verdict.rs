//! `stampede compare`'s verdict: for each figure of the total and of each step, whether the new
//! run is better, worse or within run-to-run noise; and the `--fail-on` rules a pipeline gates on.
//!
//! The noise band of a figure is the widest of:
//! - how much the figure moved within each run, from one interval of its timeline to the next
//!   (two standard errors of the difference of the two runs' interval means);
//! - for the tail (p99, p99.9, max), how far the next figure up lies in either run: a handful of
//!   samples sets the tail, and one more or one fewer slow request moves it that far;
//! - how far the figure moves by sampling alone, given how many samples each run has: two
//!   standard errors of the difference of two runs' quantiles (in quantile, `q(1-q)/n` each),
//!   read off each run's own percentiles as a latency; for the error rate, two standard errors
//!   of the difference of two proportions; for the rate, two standard errors of the difference
//!   of two counts, each counted as a Poisson count (relative error one in √n). Two runs of 40
//!   requests each cannot tell a p50 apart by a few samples' worth, an error rate by one error,
//!   nor a rate by a few per cent;
//! - a floor relative to the base: 5 % (p50 to p95, req/s), 10 % (p99), 20 % (p99.9), and 0.5
//!   percentage points for the error rate; and 50 µs for any latency (the timer's grain);
//! - for a tail figure that rests on fewer than 5 samples beyond it (the max on one), the base
//!   itself: one slow request more or less moves it anywhere short of doubling.
//!
//! Pure: the same two reports give the same verdict.

use std::fmt::Write as _;

use stampede_model::report::{LatencySummary, Report, StepSummary, TimelinePoint};

/// Which way a figure went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Direction {
    /// Moved beyond the noise band the bad way (latency or error rate up, rate down).
    Worse,
    /// Moved beyond the noise band the good way.
    Better,
    /// Moved no more than the noise band.
    Noise,
}

/// One figure of the total or of a step, judged.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// `total`, or `scenario/step`.
    pub step: String,
    /// `p99`, `rps`, `errors.rate`…
    pub metric: &'static str,
    /// Its value in the base run: ms for latencies, requests/s for `rps`, per cent for
    /// `errors.rate`.
    pub base: f64,
    /// Its value in the new run, in the same unit.
    pub new: f64,
    /// Half-width of the noise band, in the figure's unit.
    pub noise: f64,
    /// Which way it went, judged against `noise`.
    pub direction: Direction,
}

impl Figure {
    /// The change as people read it: `+12.3 %`, or `+0.40 pp` for the error rate.
    pub fn change_text(&self) -> String {
        if self.metric == "errors.rate" {
            format!("{:+.2} pp", self.new - self.base)
        } else if self.base == 0.0 {
            "new".into()
        } else {
            format!("{:+.1} %", (self.new - self.base) / self.base * 100.0)
        }
    }

    fn unit(&self) -> &'static str {
        match self.metric {
            "rps" => "/s",
            "errors.rate" => " %",
            _ => " ms",
        }
    }
}

/// The figures judged, in the order the verdict lists them: (name, higher is better).
const FIGURES: [(&str, bool); 8] = [
    ("p50", false),
    ("p90", false),
    ("p95", false),
    ("p99", false),
    ("p99.9", false),
    ("max", false),
    ("rps", true),
    ("errors.rate", false),
];

fn figure(s: &StepSummary, metric: &str) -> f64 {
    let l = &s.latency_ms;
    match metric {
        "p50" => l.p50,
        "p90" => l.p90,
        "p95" => l.p95,
        "p99" => l.p99,
        "p99.9" => l.p999,
        "max" => l.max,
        "rps" => s.rps,
        _ => s.error_rate * 100.0,
    }
}

/// The next figure up the tail, whose distance says how sparse the tail is.
fn next_up(s: &StepSummary, metric: &str) -> Option<f64> {
    let l = &s.latency_ms;
    match metric {
        "p99" => Some(l.p999),
        "p99.9" | "max" => Some(l.max),
        _ => None,
    }
}

fn floor(metric: &str, base: f64) -> f64 {
    match metric {
        "errors.rate" => 0.5,
        "p99" => 0.10 * base,
        "p99.9" => 0.20 * base,
        // One sample: noise unless it moves past the whole tail (see `next_up`).
        "max" => 0.50 * base,
        _ => 0.05 * base,
    }
    .max(if metric == "rps" || metric == "errors.rate" { 0.0 } else { 0.05 })
}

/// The quantile (0–1) a latency figure stands for; `None` for the max and the other figures.
fn quantile(metric: &str) -> Option<f64> {
    match metric {
        "p50" => Some(0.5),
        "p90" => Some(0.9),
        "p95" => Some(0.95),
        "p99" => Some(0.99),
        "p99.9" => Some(0.999),
        _ => None,
    }
}

/// The latency at quantile `q` of a run, read off its summary's points (min, percentiles, max)
/// in straight lines between them.
fn latency_at(l: &LatencySummary, q: f64) -> f64 {
    let points = [
        (0.0, l.min),
        (0.5, l.p50),
        (0.75, l.p75),
        (0.9, l.p90),
        (0.95, l.p95),
        (0.99, l.p99),
        (0.999, l.p999),
        (1.0, l.max),
    ];
    let q = q.clamp(0.0, 1.0);
    points.windows(2).find(|pair| q <= pair[1].0).map_or(l.max, |pair| {
        let ((q0, v0), (q1, v1)) = (pair[0], pair[1]);
        v0 + (v1 - v0) * (q - q0) / (q1 - q0)
    })
}

/// How far the figure moves between two runs by sampling alone (two standard errors of the
/// difference), in the figure's unit. For a latency: each run's quantile band (`q(1-q)/n` of
/// its own samples) turned into a latency by its own percentiles, on the side the change went
/// (the base's upper side and the new run's lower side when it rose), in quadrature; a run with
/// a long tail above its p50 does not widen the band of a p50 that rose. For the error rate:
/// two proportions'; for the rate: two Poisson counts' (relative error one in √n).
fn sampling(metric: &str, (b, bv): (&StepSummary, f64), (n, nv): (&StepSummary, f64)) -> f64 {
    if b.requests == 0 || n.requests == 0 {
        return 0.0;
    }
    let (rb, rn) = (b.requests as f64, n.requests as f64);
    if metric == "rps" {
        return 2.0 * bv * (1.0 / rb + 1.0 / rn).sqrt();
    }
    if metric == "errors.rate" {
        let p = (b.errors + n.errors) as f64 / (rb + rn);
        return 2.0 * (p * (1.0 - p) * (1.0 / rb + 1.0 / rn)).sqrt() * 100.0;
    }
    let Some(q) = quantile(metric) else { return 0.0 };
    let side = |s: &StepSummary, up: bool| {
        if s.responses == 0 {
            return 0.0;
        }
        let dq = 2.0 * (q * (1.0 - q) / s.responses as f64).sqrt();
        let (l, at) = (&s.latency_ms, latency_at(&s.latency_ms, q));
        if up { latency_at(l, q + dq) - at } else { at - latency_at(l, q - dq) }
    };
    let rose = nv >= bv;
    side(b, rose).hypot(side(n, !rose))
}

/// The figure's value in an interval `p` of a timeline (`None`: the interval does not have it).
fn interval_value(p: &TimelinePoint, step: Option<(&str, &str)>, metric: &str) -> Option<f64> {
    let (p50, p90, p99, max, requests, errors) = match step {
        None => (p.p50_ms, p.p90_ms, p.p99_ms, p.max_ms, p.requests, p.errors),
        Some((sc, st)) => {
            let s = p.steps.iter().find(|s| s.scenario == sc && s.step == st)?;
            (s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms, s.requests, s.errors)
        }
    };
    if requests == 0 {
        return None;
    }
    Some(match metric {
        "p50" => p50,
        "p90" => p90,
        "p95" => (p90 + p99) / 2.0,
        "p99" => p99,
        "p99.9" => (p99 + max) / 2.0,
        "max" => max,
        "rps" if step.is_none() => p.rps,
        "rps" => return None,
        _ => errors as f64 / requests as f64 * 100.0,
    })
}

/// Mean and variance of the values, and how many there were.
fn spread(values: &[f64]) -> Option<(f64, usize)> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((var, values.len()))
}

fn judge_figure(
    step: &str,
    key: Option<(&str, &str)>,
    (metric, higher_better): (&'static str, bool),
    (b, n): (&StepSummary, &StepSummary),
    (base, new): (&Report, &Report),
) -> Figure {
    let (bv, nv) = (figure(b, metric), figure(n, metric));
    // Whole intervals only: the run's last, a few milliseconds long, holds a handful of requests
    // (and a rate of those over almost no time).
    let values = |r: &Report| {
        let lengths: Vec<f64> = r.timeline.iter().scan(0.0, |at, p| Some(p.t - std::mem::replace(at, p.t))).collect();
        let longest = lengths.iter().copied().fold(0.0_f64, f64::max);
        let whole = || r.timeline.iter().zip(&lengths).filter(|(_, l)| **l >= longest / 2.0).map(|(p, _)| p);
        let of_step: Vec<f64> = whole().filter_map(|p| interval_value(p, key, metric)).collect();
        // A report without per-step points (one step): the total's, which are the step's then
        // or of the same order.
        if of_step.len() >= 2 || key.is_none() {
            of_step
        } else {
            whole().filter_map(|p| interval_value(p, None, metric)).collect()
        }
    };
    let within_runs = match (spread(&values(base)), spread(&values(new))) {
        (Some((vb, kb)), Some((vn, kn))) => 2.0 * (vb / kb as f64 + vn / kn as f64).sqrt(),
        _ => 0.0,
    };
    let tail = [(b, bv), (n, nv)]
        .iter()
        .filter_map(|(s, v)| next_up(s, metric).map(|up| (up - v).max(0.0)))
        .fold(0.0_f64, f64::max);
    // A tail figure that rests on a handful of samples (fewer than 5 beyond it, in either run;
    // the max on one) is one slow request more or less: only doubling (or halving) counts.
    let beyond = |s: &StepSummary| match metric {
        "p99" => s.requests as f64 * 0.01,
        "p99.9" => s.requests as f64 * 0.001,
        "max" => 0.0,
        _ => f64::INFINITY,
    };
    let sparse = if beyond(b).min(beyond(n)) < 5.0 { bv } else { 0.0 };
    let noise = [within_runs, tail, sampling(metric, (b, bv), (n, nv)), floor(metric, bv), sparse]
        .into_iter()
        .fold(0.0_f64, f64::max);
    let direction = if (nv - bv).abs() <= noise {
        Direction::Noise
    } else if (nv > bv) == higher_better {
        Direction::Better
    } else {
        Direction::Worse
    };
    Figure { step: step.to_string(), metric, base: bv, new: nv, noise, direction }
}

/// Every figure of the total and of each step both runs have, judged; worse first (the largest
/// relative change first, the total before its steps), then better, then within noise.
pub fn judge(base: &Report, new: &Report) -> Vec<Figure> {
    let mut out: Vec<Figure> =
        FIGURES.iter().map(|&f| judge_figure("total", None, f, (&base.total, &new.total), (base, new))).collect();
    // One step is the total: said once.
    let steps = if new.steps.len() == 1 && base.steps.len() == 1 { &[][..] } else { &new.steps[..] };
    for n in steps {
        let (Some(sc), Some(st)) = (&n.scenario, &n.step) else { continue };
        let Some(b) = base.steps.iter().find(|b| b.scenario == n.scenario && b.step == n.step) else { continue };
        let name = format!("{sc}/{st}");
        for &f in &FIGURES {
            out.push(judge_figure(&name, Some((sc, st)), f, (b, n), (base, new)));
        }
    }
    // To a tenth of a per cent: equal changes keep the figures' order (p50 before p95).
    let size =
        |j: &Figure| if j.base == 0.0 { f64::INFINITY } else { ((j.new - j.base) / j.base * 1000.0).abs().round() };
    out.sort_by(|a, b| {
        a.direction
            .cmp(&b.direction)
            .then((b.step == "total").cmp(&(a.step == "total")))
            .then(size(b).partial_cmp(&size(a)).unwrap_or(std::cmp::Ordering::Equal))
    });
    out
}

/// The verdict, first thing `stampede compare` prints: a line saying how it went, each figure
/// that got worse or better with its noise band, and a count of the rest.
pub fn render_verdict(judged: &[Figure]) -> String {
    let count = |d| judged.iter().filter(|j| j.direction == d).count();
    let (worse, better, noise) = (count(Direction::Worse), count(Direction::Better), count(Direction::Noise));
    let mut out = String::new();
    let head = match (worse, better) {
        (0, 0) => "WITHIN NOISE: no figure changed beyond run-to-run noise".to_string(),
        (0, b) => format!("BETTER: {b} figure(s) better, none worse"),
        (w, 0) => format!("WORSE: {w} figure(s) worse, none better"),
        (w, b) => format!("MIXED: {w} figure(s) worse, {b} better"),
    };
    let _ = writeln!(out, "{head}; {noise} within noise");
    for j in judged.iter().filter(|j| j.direction != Direction::Noise) {
        let word = if j.direction == Direction::Worse { "worse " } else { "better" };
        let _ = writeln!(
            out,
            "  {word} {:<28} {:<11} {:.3} → {:.3}{}  {}  (noise ±{:.3}{})",
            j.step,
            j.metric,
            j.base,
            j.new,
            j.unit(),
            j.change_text(),
            j.noise,
            j.unit()
        );
    }
    out
}

/// A `--fail-on` rule: `p99:+10%`, `errors.rate:+0.5pp`, `rps:-5%`: the total's figure moving
/// that way by more than that, beyond noise, fails the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct FailOn {
    /// The rule as written, quoted in the message when it fails.
    pub text: String,
    /// The figure it watches (a [`Figure::metric`] name: `p99`, `rps`, `errors.rate`…).
    pub metric: &'static str,
    /// Signed: `+10.0` fails on a rise of more than 10, `-5.0` on a fall of more than 5.
    pub limit: f64,
    /// In percentage points (the error rate), else in per cent of the base.
    pub points: bool,
}

impl FailOn {
    /// Parses `METRIC:±N%` (or `±Npp` for `errors.rate`).
    pub fn parse(text: &str) -> Result<FailOn, String> {
        let names: Vec<&str> = FIGURES.iter().map(|f| f.0).collect();
        let (metric, limit) = text
            .split_once(':')
            .ok_or_else(|| format!("--fail-on `{text}`: expected METRIC:±N% (e.g. p99:+10%, rps:-5%)"))?;
        let metric = FIGURES.iter().map(|f| f.0).find(|m| *m == metric.trim()).ok_or_else(|| {
            format!("--fail-on `{text}`: unknown figure `{}` (one of {})", metric.trim(), names.join(", "))
        })?;
        let limit = limit.trim();
        let (number, points) = match (limit.strip_suffix("pp"), limit.strip_suffix('%')) {
            (Some(n), _) => (n, true),
            (None, Some(n)) => (n, false),
            _ => return Err(format!("--fail-on `{text}`: the limit ends in % (or pp for errors.rate)")),
        };
        if points != (metric == "errors.rate") {
            return Err(format!("--fail-on `{text}`: errors.rate is in pp (percentage points), the others in %"));
        }
        if !number.starts_with(['+', '-']) {
            return Err(format!("--fail-on `{text}`: say which way with + (a rise) or - (a fall)"));
        }
        let limit: f64 = number.parse().map_err(|_| format!("--fail-on `{text}`: `{number}` is not a number"))?;
        Ok(FailOn { text: text.to_string(), metric, limit, points })
    }

    /// Why the rule fails on `judged` (the total's figure, beyond noise), if it does.
    pub fn broken(&self, judged: &[Figure]) -> Option<String> {
        let j = judged.iter().find(|j| j.step == "total" && j.metric == self.metric)?;
        if j.direction == Direction::Noise {
            return None;
        }
        let change = if self.points {
            j.new - j.base
        } else if j.base == 0.0 {
            return (j.new != 0.0 && self.limit > 0.0)
                .then(|| format!("{}: {} from 0 to {:.3}", self.text, self.metric, j.new));
        } else {
            (j.new - j.base) / j.base * 100.0
        };
        let beyond = if self.limit >= 0.0 { change > self.limit } else { change < self.limit };
        beyond
            .then(|| format!("{}: total {} {} ({:.3} → {:.3})", self.text, self.metric, j.change_text(), j.base, j.new))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stampede_model::report::LatencySummary;

    fn summary(p50: f64, p99: f64, rps: f64) -> StepSummary {
        StepSummary {
            rps,
            requests: 1000,
            responses: 1000,
            latency_ms: LatencySummary {
                mean: p50,
                min: p50 / 2.0,
                max: p99 * 1.5,
                p50,
                p75: p50 * 1.02,
                p90: p50 * 1.05,
                p95: p50 * 1.08,
                p99,
                p999: p99 * 1.2,
            },
            ..StepSummary::default()
        }
    }

    fn report(total: StepSummary) -> Report {
        let mut r: Report = serde_json::from_value(serde_json::json!({
            "schemaVersion": 1, "name": "x", "startedAt": "2026-01-01T00:00:00Z",
            "run": {"executor": "constant-vus", "durationSeconds": 1.0, "vusMax": 1, "threads": 1,
                    "iterations": 1, "interrupted": false, "builtinTarget": false,
                    "generator": {"cpuPercent": 0.0, "cpuSeconds": 0.0, "cpuMicrosPerRequest": 0.0, "peakRssBytes": 0}},
            "total": serde_json::to_value(&total).unwrap(),
            "steps": [], "scenarios": [], "timeline": [], "checks": [], "errorSamples": [], "thresholds": [],
        }))
        .unwrap();
        r.total = total;
        r
    }

    #[test]
    fn small_moves_are_noise_a_slowdown_is_worse_and_named_first() {
        let base = report(summary(10.0, 12.0, 500.0));
        // A p99 16 % up with a sparse tail (p99.9 of the base 14.4): within noise; p50 +3 %.
        let same = report(summary(10.3, 13.9, 490.0));
        let judged = judge(&base, &same);
        assert!(judged.iter().all(|j| j.direction == Direction::Noise), "{judged:#?}");
        assert!(render_verdict(&judged).starts_with("WITHIN NOISE"), "{}", render_verdict(&judged));
        // 20 ms slower: every latency figure worse, the total's p50 (the largest change) first.
        let slow = report(summary(30.0, 33.0, 160.0));
        let judged = judge(&base, &slow);
        let verdict = render_verdict(&judged);
        assert!(verdict.starts_with("WORSE"), "{verdict}");
        let first = verdict.lines().nth(1).unwrap();
        assert!(first.contains("total") && first.contains("p50") && first.contains("+200.0 %"), "{verdict}");
        assert!(judged.iter().any(|j| j.metric == "rps" && j.direction == Direction::Worse));
        // The rules: a rise of the p99 past 10 % fails; a fall of rps within 5 % does not.
        let rule = FailOn::parse("p99:+10%").unwrap();
        assert!(rule.broken(&judged).unwrap().contains("+175.0 %"), "{:?}", rule.broken(&judged));
        assert_eq!(FailOn::parse("p99:+10%").unwrap().broken(&judge(&base, &same)), None);
        assert!(FailOn::parse("rps:-5%").unwrap().broken(&judged).is_some());
        assert_eq!(FailOn::parse("rps:-80%").unwrap().broken(&judged), None, "-68 % is not past -80 %");
    }

    /// Runs of `requests` requests, `errors` of them failed, whose latencies lie between 0.8 and
    /// 3 ms, plus `shift`, with the p50 at `p50` + `shift`.
    fn run(p50: f64, shift: f64, requests: u64, errors: u64) -> Report {
        let at = |v: f64| v + shift;
        report(StepSummary {
            requests,
            responses: requests - errors,
            errors,
            error_rate: errors as f64 / requests as f64,
            rps: 100.0,
            latency_ms: LatencySummary {
                mean: at(p50),
                min: at(0.8),
                p50: at(p50),
                p75: at(1.9),
                p90: at(2.2),
                p95: at(2.4),
                p99: at(2.8),
                p999: at(3.0),
                max: at(3.0),
            },
            ..StepSummary::default()
        })
    }

    #[test]
    fn a_few_samples_more_or_less_is_noise_in_a_small_run_and_not_in_a_large_one() {
        let verdict = |base: &Report, new: &Report, metric: &str| {
            let judged = judge(base, new);
            judged.into_iter().find(|j| j.step == "total" && j.metric == metric).unwrap()
        };
        // Of 40 samples, the p50 moving from 1.2 to 1.5 ms is a few samples' ranks: noise. Of
        // 10,000, it is not.
        let p50 = verdict(&run(1.2, 0.0, 40, 0), &run(1.5, 0.0, 40, 0), "p50");
        assert_eq!(p50.direction, Direction::Noise, "{p50:?}");
        assert!(p50.noise > 0.3, "a few ranks of each run's own distribution, not the 5 % floor: {p50:?}");
        let p50 = verdict(&run(1.2, 0.0, 10_000, 0), &run(1.5, 0.0, 10_000, 0), "p50");
        assert_eq!(p50.direction, Direction::Worse, "{p50:?}");
        // One error in 40 against none: noise; 2.5 % of 10,000 against none: worse.
        let errors = verdict(&run(1.2, 0.0, 40, 0), &run(1.2, 0.0, 40, 1), "errors.rate");
        assert_eq!(errors.direction, Direction::Noise, "{errors:?}");
        let errors = verdict(&run(1.2, 0.0, 10_000, 0), &run(1.2, 0.0, 10_000, 250), "errors.rate");
        assert_eq!(errors.direction, Direction::Worse, "{errors:?}");
        // A rate 10 % up over 40 requests: noise; over 10,000: better.
        let faster = |requests| {
            let mut new = run(1.2, 0.0, requests, 0);
            new.total.rps = 110.0;
            verdict(&run(1.2, 0.0, requests, 0), &new, "rps")
        };
        assert_eq!(faster(40).direction, Direction::Noise, "{:?}", faster(40));
        assert_eq!(faster(10_000).direction, Direction::Better, "{:?}", faster(10_000));
        // A p50 10 % up over 40 requests, the new run with a long tail above it: the base's
        // upper side and the new run's lower side decide, not the tail: worse.
        let mut tailed = run(1.2, 0.0, 40, 0);
        tailed.total.latency_ms.p50 = 1.32;
        tailed.total.latency_ms.min = 1.25;
        tailed.total.latency_ms.p75 = 30.0;
        let mut tight = run(1.2, 0.0, 40, 0);
        tight.total.latency_ms.p75 = 1.21;
        let p50 = verdict(&tight, &tailed, "p50");
        assert_eq!(p50.direction, Direction::Worse, "{p50:?}");
        // 20 ms slower is worse however few the samples.
        let slow = judge(&run(1.2, 0.0, 40, 0), &run(1.2, 20.0, 40, 0));
        for metric in ["p50", "p90", "p95"] {
            let j = slow.iter().find(|j| j.metric == metric).unwrap();
            assert_eq!(j.direction, Direction::Worse, "{j:?}");
        }
    }

    #[test]
    fn the_latency_at_a_quantile_lies_on_the_lines_between_the_summarys_points() {
        let l = run(1.2, 0.0, 40, 0).total.latency_ms;
        assert_eq!(latency_at(&l, 0.5), 1.2);
        assert!((latency_at(&l, 0.625) - 1.55).abs() < 1e-9, "{}", latency_at(&l, 0.625));
        assert!((latency_at(&l, 0.25) - 1.0).abs() < 1e-9);
        assert_eq!(latency_at(&l, -0.1), 0.8);
        assert_eq!(latency_at(&l, 1.2), 3.0);
    }

    #[test]
    fn bad_rules_say_what_is_wrong() {
        for (rule, says) in [
            ("p99", "expected METRIC:±N%"),
            ("p42:+10%", "unknown figure `p42`"),
            ("p99:+10", "ends in %"),
            ("errors.rate:+1%", "in pp"),
            ("p99:10%", "with + (a rise) or - (a fall)"),
            ("p99:+ten%", "`+ten` is not a number"),
        ] {
            let err = FailOn::parse(rule).unwrap_err();
            assert!(err.contains(says), "{rule}: {err}");
        }
        assert_eq!(FailOn::parse("errors.rate:+0.5pp").unwrap().limit, 0.5);
    }
}
