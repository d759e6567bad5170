//! The charts' SVG: axes with round ticks, a polyline per series, a legend, and the marks a
//! chart draws over its lines (dots, failed runs, the capacity).

use std::borrow::Cow;
use std::fmt::Write as _;

use super::format::{esc, short};
use super::{BASELINE, BOTTOM, Dot, H, LEFT, MARKER, Marks, PALETTE, RIGHT, Series, TOP, W, XAxis};

/// The colour of the `n`th line of a chart with many (one per step, per error kind): the
/// palette's, then hues a golden angle apart, so that no two lines share one.
pub(super) fn series_color(n: usize) -> Cow<'static, str> {
    match PALETTE.get(n) {
        Some(c) => Cow::Borrowed(c),
        None => Cow::Owned(format!("hsl({:.0},70%,38%)", (n as f64 * 137.508) % 360.0)),
    }
}

/// An SVG line chart: axes with round ticks, one polyline per series, a legend.
pub(super) fn line_chart(title: &str, unit: &str, x_axis: &XAxis, series: &[Series]) -> String {
    chart(title, unit, x_axis, series, &Marks::default())
}

/// A line chart with `marks` over its lines.
pub(super) fn chart(title: &str, unit: &str, x_axis: &XAxis, series: &[Series], marks: &Marks<'_>) -> String {
    let points = series.iter().map(|s| s.points.len()).sum::<usize>();
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<figure class=\"chart{}\"><svg viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"{}\">",
        if points == 0 { " empty" } else { "" },
        esc(title)
    );
    let _ = write!(svg, "<text x=\"{LEFT}\" y=\"16\" class=\"title\">{} ({})</text>", esc(title), esc(unit));
    if points == 0 {
        let _ = write!(svg, "<text x=\"{}\" y=\"{}\" class=\"nodata\">no data</text></svg></figure>", W / 2.0, H / 2.0);
        return svg;
    }
    let frame = Frame::new(x_axis, series);
    y_grid(&mut svg, &frame);
    x_ticks(&mut svg, &frame, x_axis);
    let caption = legend(&mut svg, title, unit, series);
    polylines(&mut svg, &frame, series);
    failed_runs(&mut svg, &frame, marks.failed_runs);
    load_changes(&mut svg, &frame, marks.changes);
    if let Some((x, text)) = marks.marker {
        marker(&mut svg, &frame, x, text);
    }
    if let Some(dot) = marks.dots {
        dots(&mut svg, &frame, series, dot);
    }
    svg.push_str("</svg>");
    svg.push_str(caption.as_deref().unwrap_or_default());
    svg.push_str("</figure>");
    svg
}

/// What a chart with points plots: the ranges of its axes, and so where a point goes.
struct Frame {
    x_min: f64,
    x_max: f64,
    y_max: f64,
}

impl Frame {
    /// The ranges that hold every point and every labelled position of the x axis; the y axis
    /// from 0 to a round bound.
    fn new(x_axis: &XAxis, series: &[Series]) -> Frame {
        let all = series.iter().flat_map(|s| s.points.iter());
        let x_max = all.clone().map(|p| p.0).fold(0.0_f64, f64::max).max(1e-9);
        // Every labelled position stays on the chart, with points or without.
        let x_max = match x_axis {
            XAxis::Seconds | XAxis::Rate => x_max,
            XAxis::Ticks(ticks) => ticks.iter().map(|t| t.0).fold(x_max, f64::max),
        };
        let x_min = match x_axis {
            XAxis::Seconds | XAxis::Rate => 0.0,
            XAxis::Ticks(ticks) => ticks.iter().map(|t| t.0).fold(f64::INFINITY, f64::min).min(x_max - 1e-9),
        };
        let y_max = nice(all.map(|p| p.1).fold(0.0_f64, f64::max));
        Frame { x_min, x_max, y_max }
    }

    /// The SVG x of a value on the x axis.
    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x_min) / (self.x_max - self.x_min) * (W - LEFT - RIGHT)
    }

    /// The SVG y of a value on the y axis.
    fn py(&self, y: f64) -> f64 {
        H - BOTTOM - y / self.y_max * (H - TOP - BOTTOM)
    }
}

/// The y axis: five grid lines from 0 to the top, each with its label.
fn y_grid(svg: &mut String, f: &Frame) {
    for i in 0..=4 {
        let y = f.y_max * f64::from(i) / 4.0;
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" x2=\"{x2}\" y1=\"{gy:.1}\" y2=\"{gy:.1}\" class=\"grid\"/>\
             <text x=\"{tx}\" y=\"{ty:.1}\" class=\"tick\" text-anchor=\"end\">{label}</text>",
            x2 = W - RIGHT,
            gy = f.py(y),
            tx = LEFT - 4.0,
            ty = f.py(y) + 3.0,
            label = short(y)
        );
    }
}

/// The x axis's labels: five round ones for seconds and rates, else the axis's own.
fn x_ticks(svg: &mut String, f: &Frame, x_axis: &XAxis) {
    let x_max = f.x_max;
    let ticks: Vec<(f64, String)> = match x_axis {
        XAxis::Seconds => (0..=4).map(|i| x_max * f64::from(i) / 4.0).map(|x| (x, format!("{}s", short(x)))).collect(),
        XAxis::Rate => (0..=4).map(|i| x_max * f64::from(i) / 4.0).map(|x| (x, format!("{}/s", short(x)))).collect(),
        XAxis::Ticks(ticks) => ticks.clone(),
    };
    for (x, label) in ticks {
        // A label at the right end stays whole: its middle moves left as far as it must (about
        // 6 units a character at the ticks' size).
        let half = 3.0 * label.chars().count() as f64;
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" class=\"tick\" text-anchor=\"middle\">{}</text>",
            f.px(x).min(W - 2.0 - half),
            H - BOTTOM + 14.0,
            esc(&label)
        );
    }
}

/// The legend beside the title when it fits there (written now); else the caption to put
/// under the chart, where its entries wrap (many steps' names once ran off the card).
fn legend(svg: &mut String, title: &str, unit: &str, series: &[Series]) -> Option<String> {
    let legend_width: f64 = series.iter().map(|s| 22.0 + 6.5 * s.name.chars().count() as f64).sum();
    let title_end = LEFT + 7.0 * (title.chars().count() + unit.chars().count() + 3) as f64 + 8.0;
    let inline_legend = W - RIGHT - legend_width >= title_end;
    let mut legend_x = W - RIGHT;
    for s in series.iter().rev().filter(|_| inline_legend) {
        legend_x -= 22.0 + 6.5 * s.name.chars().count() as f64;
        let _ = write!(
            svg,
            "<text x=\"{legend_x:.1}\" y=\"16\" class=\"legend\" fill=\"{}\">■ {}</text>",
            s.color,
            esc(&s.name)
        );
    }
    (!inline_legend).then(|| {
        let entries: String =
            series.iter().map(|s| format!("<span style=\"color:{}\">■ {}</span>", s.color, esc(&s.name))).collect();
        format!("<figcaption class=\"legend\">{entries}</figcaption>")
    })
}

/// A polyline per series, the baseline's dashed.
fn polylines(svg: &mut String, f: &Frame, series: &[Series]) {
    for s in series {
        let coords: Vec<String> = s.points.iter().map(|&(x, y)| format!("{:.1},{:.1}", f.px(x), f.py(y))).collect();
        let _ = write!(
            svg,
            "<polyline data-series=\"{}\" data-points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{} points=\"{}\"/>",
            esc(&s.name),
            s.points.len(),
            s.color,
            if s.color == BASELINE { " stroke-dasharray=\"4 3\"" } else { "" },
            coords.join(" ")
        );
    }
}

/// At each x, a red dashed line titled with its text (a run that did not pass).
fn failed_runs(svg: &mut String, f: &Frame, runs: &[(f64, String)]) {
    for (x, text) in runs {
        let _ = write!(
            svg,
            "<line class=\"failed-run\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"{}\" \
             stroke-width=\"1.5\" stroke-dasharray=\"3 3\"><title>{}</title></line>",
            H - BOTTOM,
            PALETTE[3],
            esc(text),
            x = f.px(*x)
        );
    }
}

/// At each x, an amber dashed line titled with its text (the load changed there).
fn load_changes(svg: &mut String, f: &Frame, changes: &[(f64, String)]) {
    for (x, text) in changes {
        let _ = write!(
            svg,
            "<line class=\"load-change\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"#b7791f\" \
             stroke-width=\"1.5\" stroke-dasharray=\"2 2\"><title>{}</title></line>",
            H - BOTTOM,
            esc(text),
            x = f.px(*x)
        );
    }
}

/// At `x`, a dark line labelled with `text` (the capacity).
fn marker(svg: &mut String, f: &Frame, x: f64, text: &str) {
    // The label beside the line, on the side with room.
    let (dx, anchor) = if f.px(x) > W / 2.0 { (-4.0, "end") } else { (4.0, "start") };
    let _ = write!(
        svg,
        "<line class=\"capacity-marker\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{TOP}\" y2=\"{}\" stroke=\"{MARKER}\" \
         stroke-width=\"1.5\"><title>{t}</title></line>\
         <text x=\"{:.1}\" y=\"{}\" class=\"marker\" text-anchor=\"{anchor}\">{t}</text>",
        H - BOTTOM,
        f.px(x) + dx,
        TOP + 10.0,
        x = f.px(x),
        t = esc(text)
    );
}

/// A dot at every point of every series, drawn as `dot` says of the point's index.
fn dots(svg: &mut String, f: &Frame, series: &[Series], dot: &dyn Fn(usize) -> Dot) {
    for s in series {
        for (i, &(x, y)) in s.points.iter().enumerate() {
            let d = dot(i);
            let color = if d.failed { PALETTE[3] } else { &s.color };
            let class = match (d.hollow, d.failed) {
                (false, false) => "",
                (true, false) => " class=\"refine\"",
                (false, true) => " class=\"failed\"",
                (true, true) => " class=\"refine failed\"",
            };
            let _ = if d.hollow {
                write!(
                    svg,
                    "<circle{class} cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#fff\" stroke=\"{color}\" stroke-width=\"1.5\"/>",
                    f.px(x),
                    f.py(y)
                )
            } else {
                write!(svg, "<circle{class} cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>", f.px(x), f.py(y))
            };
        }
    }
}

/// A round upper bound for an axis: 1, 2 or 5 times a power of ten (at least 1).
pub(super) fn nice(v: f64) -> f64 {
    if v.is_nan() || v <= 1.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].into_iter().map(|m| m * p).find(|&c| c >= v).unwrap_or(10.0 * p)
}
