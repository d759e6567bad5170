//! How the page writes figures and text: short axis labels, milliseconds, percentages, sizes,
//! and HTML escaping.

/// An axis label: `1.5M`, `25k`, `150`, `0.25`.
pub(super) fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 100.0 || v == v.trunc() {
        format!("{v:.0}")
    } else {
        // Up to two decimals, so that a quarter of an axis of 1 reads 0.25, not 0.2.
        format!("{v:.2}").trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Milliseconds: whole from 100 up, else with two decimals.
pub(super) fn ms(v: f64) -> String {
    if v >= 100.0 { format!("{v:.0}") } else { format!("{v:.2}") }
}

/// A rate (0 to 1) as a percentage with two decimals.
pub(super) fn pct(rate: f64) -> String {
    format!("{:.2} %", rate * 100.0)
}

/// A size in MiB with one decimal.
pub(super) fn bytes(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0))
}

/// HTML text and attribute escaping.
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
