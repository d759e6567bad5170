//! The HTML report: one self-contained file (no script, no style sheet or font fetched, no
//! network access when opened: even the favicon is an empty `data:` URL, which browsers would
//! otherwise fetch), charts drawn as inline SVG here. Readable on a laptop screen
//! and printable (`@media print` keeps charts whole on a page).
//!
//! Every chart's series is an SVG `<polyline>` with a `data-points` attribute (how many points
//! it draws), so that a test, or a person with the browser's inspector, sees that a chart holds
//! data; a chart with no data says so (`class="empty"`).
//!
//! A report with a `trend` (this run and earlier runs of the same test) of at least two runs
//! adds a Trend section: latency and throughput per run, a dot per run, runs that did not pass
//! marked by a red dashed line (`class="failed-run"`), and a table of the runs.
//!
//! A report of a capacity search (`capacity`) adds a Capacity section after the run's facts:
//! the answer, then the curve by target rate (latency, error rate, achieved rate), a dot per
//! plateau (hollow: a refining plateau, `class="refine"`; red: one that failed,
//! `class="failed"`), a line at the capacity (`class="capacity-marker"`), and a table of the
//! plateaus.

mod capacity;
mod charts;
mod format;
mod page;
mod svg;
mod tables;
mod trend;

#[cfg(test)]
mod tests;

use std::borrow::Cow;

pub use page::render_html;

/// Colours of series, in order.
const PALETTE: [&str; 8] = ["#2563eb", "#16a34a", "#ea580c", "#dc2626", "#7c3aed", "#0891b2", "#ca8a04", "#db2777"];

/// Colour of the baseline's series (drawn dashed).
const BASELINE: &str = "#9ca3af";

/// Colour of a chart's marker line (the capacity).
const MARKER: &str = "#111827";

/// One line of a chart: its name in the legend, its colour and its points (x, y).
struct Series {
    name: String,
    color: Cow<'static, str>,
    points: Vec<(f64, f64)>,
}

/// What the x axis shows.
enum XAxis {
    /// Seconds since the start, with round ticks.
    Seconds,
    /// A rate (iterations/s) from 0, ticks as for seconds.
    Rate,
    /// Labels at given positions (the axis starts at 0).
    Ticks(Vec<(f64, String)>),
}

/// A chart's size and margins, in SVG units.
const W: f64 = 560.0;
const H: f64 = 220.0;
const LEFT: f64 = 56.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 30.0;

/// How a chart draws the dot of a point.
#[derive(Clone, Copy, Default)]
struct Dot {
    /// Drawn hollow (a refining plateau).
    hollow: bool,
    /// Drawn red (a plateau that failed).
    failed: bool,
}

/// What a chart draws over its lines.
#[derive(Default)]
struct Marks<'a> {
    /// A dot at every point, drawn as this says of the point's index in its series (a chart
    /// whose x positions are runs or plateaus).
    dots: Option<&'a dyn Fn(usize) -> Dot>,
    /// At each x, a red dashed line titled with its text (a run that did not pass).
    failed_runs: &'a [(f64, String)],
    /// At x, a dark line labelled with the text (the capacity).
    marker: Option<(f64, &'a str)>,
    /// At each x, an amber dashed line titled with its text (the load changed mid-run).
    changes: &'a [(f64, String)],
}
