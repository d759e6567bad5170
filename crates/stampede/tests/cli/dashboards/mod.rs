//! The Grafana dashboards in `charts/stampede/dashboards/` are correct: well-formed JSON that
//! Grafana loads, every query valid PromQL over defined variables, and every metric, label and
//! variable they use present in what Stampede really exposes — the `stampede run` CLI's
//! `/metrics` scraped while it runs, and the operator's exposition.

mod exposition;
mod promql;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use exposition::Exposition;
use promql::{COUNTER_FUNCTIONS, Kind, Selector};
use regex::Regex;
use serde_json::Value;
use stampede_api::{LoadTest, LoadTestSpec, LoadTestStatus, Phase, Summary};
use stampede_model::report::LatencySummary;
use stampede_model::report::Verdict;

type Labels = BTreeMap<String, String>;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn load_dashboard(file: &str) -> Value {
    let path = repo_root().join("charts/stampede/dashboards").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: not JSON: {e}", path.display()))
}

const DASHBOARDS: &[(&str, &str, &str)] = &[
    ("loadtest.json", "stampede-loadtest", "Stampede / Load test"),
    ("operator.json", "stampede-operator", "Stampede / Operator"),
];

const DATASOURCE: &str = "${datasource}";

/// Grafana's own variables a dashboard may use without defining them.
const BUILTIN_VARIABLES: &[&str] = &[
    "__rate_interval",
    "__interval",
    "__interval_ms",
    "__range",
    "__range_s",
    "__range_ms",
    "__from",
    "__to",
    "__dashboard",
    "__org",
    "__user",
    "__timezone",
    "__all_variables",
    "__url_time_range",
    "__data",
    "__value",
    "__field",
    "__series",
    "__name",
];

// ---------------------------------------------------------------------------------------------
// Walking a dashboard

/// Every panel, rows and the panels inside collapsed rows included.
fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("`panels` is a list") {
        out.push(p);
        if let Some(inner) = p["panels"].as_array() {
            out.extend(inner);
        }
    }
    out
}

fn variables(d: &Value) -> &Vec<Value> {
    d["templating"]["list"].as_array().expect("`templating.list` is a list")
}

fn variable_names(d: &Value) -> BTreeSet<String> {
    variables(d).iter().map(|v| v["name"].as_str().expect("a variable has a name").to_string()).collect()
}

/// A query variable's query text (Grafana stores it as a string or as `{query: ...}`).
fn variable_query(v: &Value) -> &str {
    v["query"].as_str().or_else(|| v["query"]["query"].as_str()).expect("a query variable has a query")
}

/// A PromQL expression of the dashboard and where it is.
struct Expr {
    place: String,
    expr: String,
    legend: Option<String>,
}

/// Every PromQL expression: panel targets and annotations (variable queries are read by
/// [`VariableQuery`]).
fn exprs(d: &Value) -> Vec<Expr> {
    let mut out = Vec::new();
    for p in panels(d) {
        for t in p["targets"].as_array().into_iter().flatten() {
            out.push(Expr {
                place: format!("panel `{}` target {}", p["title"].as_str().unwrap_or("?"), t["refId"]),
                expr: t["expr"].as_str().unwrap_or_default().to_string(),
                legend: t["legendFormat"].as_str().map(str::to_string),
            });
        }
    }
    for a in annotations(d) {
        out.push(Expr {
            place: format!("annotation `{}`", a["name"].as_str().unwrap_or("?")),
            expr: a["expr"].as_str().unwrap_or_default().to_string(),
            legend: None,
        });
    }
    out
}

/// The dashboard's own annotations (not Grafana's built-in one).
fn annotations(d: &Value) -> Vec<&Value> {
    d["annotations"]["list"].as_array().into_iter().flatten().filter(|a| a["builtIn"].as_i64() != Some(1)).collect()
}

/// What a Prometheus query variable asks for.
#[derive(Debug)]
enum VariableQuery {
    /// `label_values(selector, label)` or `label_values(label)`.
    LabelValues { selector: Option<Selector>, label: String },
    /// `query_result(expr)`.
    QueryResult(promql::Query),
}

fn parse_variable_query(q: &str) -> Result<VariableQuery, String> {
    let q = q.trim();
    let call = |name: &str| q.strip_prefix(name).and_then(|r| r.trim_start().strip_prefix('(')?.strip_suffix(')'));
    if let Some(args) = call("label_values") {
        let (selector, label) = match args.rfind(',') {
            Some(comma) => (Some(promql::parse_series_selector(&args[..comma])?), args[comma + 1..].trim()),
            None => (None, args.trim()),
        };
        let ok = label.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(format!("bad label name `{label}`"));
        }
        return Ok(VariableQuery::LabelValues { selector, label: label.to_string() });
    }
    if let Some(expr) = call("query_result") {
        return Ok(VariableQuery::QueryResult(promql::parse(expr)?));
    }
    Err(format!("`{q}` is not label_values(...) or query_result(...)"))
}

/// Every variable referenced anywhere in the dashboard: `$name`, `${name}`, `${name:fmt}`,
/// `${__data.fields.x}`, `[[name]]`; with the JSON path of the string it is in.
fn variable_references(d: &Value) -> Vec<(String, String)> {
    let re = Regex::new(r"\$\{([A-Za-z0-9_]+)[^}]*\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)(?::[^\]]*)?\]\]").unwrap();
    let mut out = Vec::new();
    fn walk(v: &Value, path: String, re: &Regex, out: &mut Vec<(String, String)>) {
        match v {
            Value::String(s) => {
                for c in re.captures_iter(s) {
                    let name = c.get(1).or(c.get(2)).or(c.get(3)).unwrap().as_str();
                    out.push((name.to_string(), path.clone()));
                }
            }
            Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| walk(v, format!("{path}[{i}]"), re, out)),
            Value::Object(o) => o.iter().for_each(|(k, v)| walk(v, format!("{path}.{k}"), re, out)),
            _ => {}
        }
    }
    walk(d, String::new(), &re, &mut out);
    out
}

/// The `{{label}}` names in a legend format.
fn legend_labels(legend: &str) -> BTreeSet<String> {
    let re = Regex::new(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}").unwrap();
    re.captures_iter(legend).map(|c| c[1].to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// The dashboards alone

#[test]
fn dashboards_have_the_structure_grafana_expects() {
    for (file, uid, title) in DASHBOARDS {
        let d = load_dashboard(file);
        let mut problems = Vec::new();
        let mut problem = |p: String| problems.push(p);
        if d["uid"] != *uid {
            problem(format!("uid is {} (stable uid {uid} expected: links and provisioning use it)", d["uid"]));
        }
        if d["title"] != *title {
            problem(format!("title is {}", d["title"]));
        }
        if d["schemaVersion"].as_u64() != Some(39) {
            problem(format!("schemaVersion is {}", d["schemaVersion"]));
        }
        if !d["tags"].as_array().is_some_and(|t| t.iter().any(|t| t == "stampede")) {
            problem("tags lack \"stampede\"".into());
        }
        if !d["id"].is_null() {
            problem("a provisioned dashboard has `id: null`".into());
        }

        // The data source is a variable of type datasource for Prometheus.
        let ds = variables(&d).iter().find(|v| v["name"] == "datasource");
        match ds {
            Some(ds) if ds["type"] == "datasource" && ds["query"] == "prometheus" => {}
            _ => problem("no `datasource` variable of type datasource with query prometheus".into()),
        }
        let expected_ds = serde_json::json!({"type": "prometheus", "uid": DATASOURCE});

        // Panels: unique ids, positions on the 24-column grid that do not overlap.
        let mut ids = BTreeSet::new();
        let mut boxes: Vec<(String, [u64; 4])> = Vec::new();
        let all = panels(&d);
        assert!(all.len() > 5, "{file}: only {} panels", all.len());
        for p in &all {
            let name = format!("panel {} `{}`", p["id"], p["title"].as_str().unwrap_or_default());
            match p["id"].as_u64() {
                Some(id) if ids.insert(id) => {}
                _ => problem(format!("{name}: id missing or not unique")),
            }
            if p["title"].as_str().is_none_or(str::is_empty) {
                problem(format!("{name}: no title"));
            }
            let g = &p["gridPos"];
            let pos = ["x", "y", "w", "h"].map(|k| g[k].as_u64());
            let [Some(x), Some(y), Some(w), Some(h)] = pos else {
                problem(format!("{name}: gridPos {g}"));
                continue;
            };
            if w == 0 || h == 0 || x + w > 24 {
                problem(format!("{name}: gridPos {g} is off the 24-column grid"));
            }
            for (other, [ox, oy, ow, oh]) in &boxes {
                if x < ox + ow && *ox < x + w && y < oy + oh && *oy < y + h {
                    problem(format!("{name} overlaps {other}"));
                }
            }
            boxes.push((name.clone(), [x, y, w, h]));

            if p["type"] == "row" {
                continue;
            }
            if p["datasource"] != expected_ds {
                problem(format!("{name}: datasource is {} (the `${{datasource}}` variable expected)", p["datasource"]));
            }
            let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or_default();
            if targets.is_empty() {
                problem(format!("{name}: no queries"));
            }
            let mut refs = BTreeSet::new();
            for t in targets {
                if t["datasource"] != expected_ds {
                    problem(format!("{name} target {}: datasource is {}", t["refId"], t["datasource"]));
                }
                if !t["refId"].as_str().is_some_and(|r| refs.insert(r.to_string())) {
                    problem(format!("{name}: refId {} missing or repeated", t["refId"]));
                }
                if t["expr"].as_str().is_none_or(|e| e.trim().is_empty()) {
                    problem(format!("{name} target {}: no expr", t["refId"]));
                }
            }
        }

        for a in annotations(&d) {
            if a["datasource"] != expected_ds {
                problem(format!("annotation {}: datasource is {}", a["name"], a["datasource"]));
            }
        }
        for v in variables(&d).iter().filter(|v| v["type"] == "query") {
            if v["datasource"] != expected_ds {
                problem(format!("variable {}: datasource is {}", v["name"], v["datasource"]));
            }
            if v["definition"].as_str() != Some(variable_query(v)) {
                problem(format!("variable {}: definition differs from the query", v["name"]));
            }
        }
        assert!(problems.is_empty(), "{file}:\n  {}", problems.join("\n  "));
    }
}

#[test]
fn every_query_parses_and_uses_only_defined_variables() {
    for (file, _, _) in DASHBOARDS {
        let d = load_dashboard(file);
        let mut problems = Vec::new();
        let defined = variable_names(&d);

        for (name, path) in variable_references(&d) {
            if !defined.contains(&name) && !BUILTIN_VARIABLES.contains(&name.as_str()) {
                problems.push(format!("{path}: `${name}` is not a variable of this dashboard"));
            }
        }

        for e in exprs(&d) {
            match promql::parse(&e.expr) {
                Err(err) => problems.push(format!("{}: {err}\n    in {}", e.place, e.expr)),
                Ok(q) => {
                    if !matches!(q.kind, Kind::Vector | Kind::Scalar) {
                        problems.push(format!("{}: evaluates to a {:?}, Grafana plots vectors", e.place, q.kind));
                    }
                    if q.metric_names().is_empty() {
                        problems.push(format!("{}: reads no metric", e.place));
                    }
                    // A legend can only name labels the result has.
                    if let (Some(legend), Some(labels)) = (&e.legend, &q.labels) {
                        for l in legend_labels(legend) {
                            if !labels.contains(&l) {
                                problems.push(format!(
                                    "{}: legend uses {{{{{l}}}}} but the result has only {labels:?}",
                                    e.place
                                ));
                            }
                        }
                    }
                }
            }
        }

        for v in variables(&d).iter().filter(|v| v["type"] == "query") {
            if let Err(err) = parse_variable_query(variable_query(v)) {
                problems.push(format!("variable {}: {err}", v["name"]));
            }
        }
        assert!(problems.is_empty(), "{file}:\n  {}", problems.join("\n  "));
    }
}

// ---------------------------------------------------------------------------------------------
// The PromQL reader and the exposition parser themselves

#[test]
fn promql_reader_finds_metric_names_and_skips_everything_else() {
    let q = promql::parse(
        r#"histogram_quantile(0.99, sum by (le) (rate(stampede_request_duration_seconds_bucket{namespace="$namespace",loadtest="$loadtest"}[$__rate_interval])))"#,
    )
    .unwrap();
    assert_eq!(q.metric_names(), names(&["stampede_request_duration_seconds_bucket"]));
    assert_eq!(q.kind, Kind::Vector);
    assert_eq!(q.labels, Some(BTreeSet::new()), "sum by (le) without le");
    let s = &q.selectors[0];
    assert_eq!(s.range_fn.as_deref(), Some("rate"));
    let matchers: Vec<_> = s.matchers.iter().map(|m| (m.label.as_str(), m.op, m.value.as_str())).collect();
    assert_eq!(matchers, [("namespace", "=", "$namespace"), ("loadtest", "=", "$loadtest")]);

    // Keywords, label names in by/on/group_left, strings and durations are not metric names.
    let q = promql::parse(
        r#"sum by (kind, on) (rate(errors_total{kind!~"check|by", job=~"rate.*"}[1h30m] offset -5m)) / ignoring (kind) group_left sum without (instance) (rate(requests_total[5m] @ end()))"#,
    )
    .unwrap();
    assert_eq!(q.metric_names(), names(&["errors_total", "requests_total"]));
    assert_eq!(q.labels, Some(names(&["kind", "on"])));

    let q = promql::parse(
        r#"(sum(a) or vector(0)) * on () group_right max_over_time(rate(b:recorded[1m])[10m:30s]) > bool 1e-3 and {__name__="c", job="x"} unless count_values("version", d) - -Inf ^ 2"#,
    )
    .unwrap();
    assert_eq!(q.metric_names(), names(&["a", "b:recorded", "c", "d"]));
    let b = q.selectors.iter().find(|s| s.metric() == Some("b:recorded")).unwrap();
    assert_eq!(b.range_fn.as_deref(), Some("rate"), "the subquery's inner range feeds rate");
    assert!(promql::parse("topk(3, sum by (runner) (x)) > 0").unwrap().labels == Some(names(&["runner"])));
    assert!(promql::parse("label_replace(up, \"dst\", \"$1\", \"src\", \"(.*)\")").is_ok());
    assert_eq!(promql::parse("time() - x_seconds * 1000").unwrap().metric_names(), names(&["x_seconds"]));
}

#[test]
fn promql_reader_rejects_invalid_queries_and_queries_that_match_nothing() {
    for bad in [
        "rate(x)",                    // rate needs a range
        "sum(rate(x[5m])",            // unbalanced
        "hisogram_quantile(0.9, x)",  // typo in a function name
        "x{job=foo}",                 // unquoted value
        "sum by job (x)",             // grouping needs parentheses
        "x[5]",                       // a duration needs a unit (Prometheus 2)
        "sum(x)[5m]",                 // a range applies to selectors only
        "x + on(job) group_left",     // missing right operand
        "x group_left y",             // group_left without on/ignoring
        "sum by (kind) (x) / sum(y)", // valid, but {kind} vs {}: nothing pairs up
        "histogram_quantile(x, 0.9)", // arguments swapped
        "{job=~\".*\"}",              // a selector without a name must match something
        "x{job=\"a\"",                // unterminated matchers
        "sum(x) by",                  // dangling by
        "1 > 2",                      // scalar comparison needs bool
    ] {
        assert!(promql::parse(bad).is_err(), "`{bad}` was accepted");
    }
    assert!(promql::parse_series_selector("x{a=\"b\"}").is_ok());
    assert!(promql::parse_series_selector("sum(x)").is_err());
    assert!(promql::parse_series_selector("x{a=\"b\"} + 1").is_err());
}

#[test]
fn exposition_parser_reads_families_labels_and_escapes() {
    let e = Exposition::parse(
        "# HELP lat_seconds Latency.\n# TYPE lat_seconds histogram\n\
         lat_seconds_bucket{step=\"a\",le=\"0.1\"} 3\nlat_seconds_bucket{step=\"a\",le=\"+Inf\"} 4\n\
         lat_seconds_sum{step=\"a\"} 0.5\nlat_seconds_count{step=\"a\"} 4\n\
         # TYPE odd_count counter\nodd_count 2 1700000000000\n\
         # TYPE up gauge\nup{msg=\"a \\\"q\\\" \\\\ b\\nc\",x=\"\"} NaN\n",
    )
    .unwrap();
    assert_eq!(e.samples.len(), 6);
    assert_eq!(e.samples[5].labels["msg"], "a \"q\" \\ b\nc");
    assert_eq!(e.samples[1].labels["le"], "+Inf");
    let r = e.resolve("lat_seconds_bucket").unwrap();
    assert_eq!((r.family.as_str(), r.family_type.as_str(), r.suffix), ("lat_seconds", "histogram", "_bucket"));
    let r = e.resolve("odd_count").unwrap();
    assert_eq!((r.family.as_str(), r.family_type.as_str(), r.suffix), ("odd_count", "counter", ""));
    assert!(e.resolve("lat_seconds_total").is_none());
    for bad in ["x{a=b} 1", "x{a=\"b\" 1", "x", "x 1 2 3", "1x 1", "# TYPE x fancy"] {
        assert!(Exposition::parse(bad).is_err(), "`{bad}` was accepted");
    }
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// Against real expositions

/// A query's selectors, checked against an exposition: the metric exists (a histogram's
/// `_bucket`/`_sum`/`_count` only where the family is a histogram), counters are read through
/// rate/increase and only counters are, every matcher's label exists on the metric, and the
/// selector with the variables' values selects at least one series.
fn check_selector(s: &Selector, e: &Exposition, values: &Labels) -> Result<(), String> {
    let name = s.metric().ok_or("a selector without a metric name")?;
    let resolved = e.resolve(name).ok_or_else(|| format!("`{name}` is not in the exposition (no such family)"))?;
    let series: Vec<_> = e.series(name).collect();
    if series.is_empty() {
        return Err(format!("`{name}` has a TYPE line but no samples"));
    }
    let counter_like = resolved.family_type == "counter" || !resolved.suffix.is_empty();
    match s.range_fn.as_deref() {
        Some(f) if COUNTER_FUNCTIONS.contains(&f) && !counter_like => {
            return Err(format!("`{f}({name}[...])` but `{}` is a {}", resolved.family, resolved.family_type));
        }
        None if counter_like => {
            let what = format!("{} {}{}", resolved.family_type, resolved.family, resolved.suffix);
            return Err(format!("`{name}` (of {what}) is read without rate()/increase()"));
        }
        _ => {}
    }
    let mut matching = series.clone();
    for m in &s.matchers {
        if m.label == "__name__" {
            continue;
        }
        if !series.iter().any(|x| x.labels.contains_key(&m.label)) {
            return Err(format!("`{name}` has no label `{}`", m.label));
        }
        let test = LabelTest::new(m, values)?;
        matching.retain(|x| test.matches(&x.labels));
    }
    if matching.is_empty() {
        return Err(format!("`{name}` with {:?} and {values:?} selects no series", s.matchers));
    }
    Ok(())
}

/// A label matcher with the variables' values in it, as Prometheus applies it (regexes are
/// anchored; a missing label matches as "").
struct LabelTest<'a> {
    label: &'a str,
    op: &'static str,
    value: String,
    regex: Regex,
}

impl<'a> LabelTest<'a> {
    fn new(m: &'a promql::Matcher, values: &Labels) -> Result<Self, String> {
        let value = substitute(&m.value, values)?;
        let regex = Regex::new(&format!("^(?:{value})$")).map_err(|err| err.to_string())?;
        Ok(LabelTest { label: &m.label, op: m.op, value, regex })
    }

    fn matches(&self, labels: &Labels) -> bool {
        let v = labels.get(self.label).map(String::as_str).unwrap_or_default();
        match self.op {
            "=" => v == self.value,
            "!=" => v != self.value,
            "=~" => self.regex.is_match(v),
            _ => !self.regex.is_match(v),
        }
    }
}

/// `$name` / `${name}` replaced by the variable's value.
fn substitute(text: &str, values: &Labels) -> Result<String, String> {
    let re = Regex::new(r"\$\{([A-Za-z0-9_]+)\}|\$([A-Za-z0-9_]+)").unwrap();
    let mut missing = None;
    let out = re.replace_all(text, |c: &regex::Captures<'_>| {
        let name = c.get(1).or(c.get(2)).unwrap().as_str();
        values.get(name).cloned().unwrap_or_else(|| {
            missing = Some(name.to_string());
            String::new()
        })
    });
    match missing {
        Some(name) => Err(format!("no value for `${name}`")),
        None => Ok(out.into_owned()),
    }
}

/// Each query variable's values as Grafana would compute them from this exposition, in the
/// dashboard's order (a variable may use earlier ones); the value used for the later ones is
/// the first value, or the "All" value where the variable has one.
fn evaluate_variables(d: &Value, e: &Exposition) -> Result<BTreeMap<String, BTreeSet<String>>, String> {
    let mut out = BTreeMap::new();
    let mut chosen = BTreeMap::new();
    for v in variables(d).iter().filter(|v| v["type"] == "query") {
        let name = v["name"].as_str().unwrap();
        let (selector, label) = match parse_variable_query(variable_query(v))? {
            VariableQuery::LabelValues { selector, label } => (selector, label),
            VariableQuery::QueryResult(_) => {
                return Err(format!("variable {name}: query_result() needs a Prometheus to evaluate"));
            }
        };
        let mut values = BTreeSet::new();
        for sample in &e.samples {
            if let Some(s) = &selector {
                if s.metric() != Some(sample.name.as_str()) {
                    continue;
                }
                let mut ok = true;
                for m in s.matchers.iter().filter(|m| m.label != "__name__") {
                    let test = LabelTest::new(m, &chosen).map_err(|err| format!("variable {name}: {err}"))?;
                    ok &= test.matches(&sample.labels);
                }
                if !ok {
                    continue;
                }
            }
            if let Some(v) = sample.labels.get(&label) {
                values.insert(v.clone());
            }
        }
        let first = values
            .iter()
            .next()
            .cloned()
            .ok_or_else(|| format!("variable {name} ({}) has no values in the exposition", variable_query(v)))?;
        let pick = match (v["includeAll"].as_bool(), v["allValue"].as_str()) {
            (Some(true), Some(all)) => all.to_string(),
            _ => first,
        };
        chosen.insert(name.to_string(), pick);
        out.insert(name.to_string(), values);
    }
    Ok(out)
}

/// Checks every selector of `d` whose metric `belongs` to this exposition. Returns the metric
/// names checked.
fn check_dashboard_against(
    file: &str,
    d: &Value,
    e: &Exposition,
    values: &Labels,
    belongs: impl Fn(&str) -> bool,
) -> BTreeSet<String> {
    let mut problems = Vec::new();
    let mut checked = BTreeSet::new();
    let mut places: Vec<(String, Vec<Selector>)> =
        exprs(d).into_iter().map(|x| (x.place, promql::parse(&x.expr).expect("parses").selectors)).collect();
    for v in variables(d).iter().filter(|v| v["type"] == "query") {
        let place = format!("variable {}", v["name"]);
        match parse_variable_query(variable_query(v)) {
            Ok(VariableQuery::LabelValues { selector: Some(s), .. }) => {
                places.push((place, vec![series_selector(&s, e)]))
            }
            Ok(VariableQuery::QueryResult(q)) => places.push((place, q.selectors)),
            _ => {}
        }
    }
    for (place, selectors) in places {
        for s in selectors.iter().filter(|s| s.metric().is_some_and(&belongs)) {
            checked.insert(s.metric().unwrap().to_string());
            if let Err(err) = check_selector(s, e, values) {
                problems.push(format!("{place}: {err}"));
            }
        }
    }
    assert!(problems.is_empty(), "{file}:\n  {}", problems.join("\n  "));
    checked
}

/// A variable's series selector: it reads the series, not their values, so a counter is fine
/// there; checked like a `rate()` argument.
fn series_selector(s: &Selector, e: &Exposition) -> Selector {
    let counter_like =
        s.metric().and_then(|n| e.resolve(n)).is_some_and(|r| r.family_type == "counter" || !r.suffix.is_empty());
    Selector { range_fn: counter_like.then(|| "rate".to_string()), ..s.clone() }
}

// ---------------------------------------------------------------------------------------------
// The CLI's exposition, scraped while it runs

const SCENARIO_NAME: &str = "dashboards";

/// Two VUs against the built-in target; one step always fails its check, so errors of kind
/// `check` and status 500 responses are in the exposition too. Both steps are a `group` (a
/// transaction that always fails). The run is long and the timeout wide so that no busy machine
/// ends it or times a request out (a new connection) before the scrape; it is killed then.
const SCENARIO: &str = r#"
name: dashboards
baseUrl: builtin
load:
  executor: constant-vus
  vus: 2
  duration: 60s
http:
  timeout: 30s
scenarios:
  - name: browse
    steps:
      - group: visit
        steps:
          - name: home
            request: {url: "{{baseUrl}}/"}
            check: {status: 200}
          - name: broken
            request: {url: "{{baseUrl}}/status/500"}
            check: {status: 200}
            think: 5ms
"#;

struct CliScrape {
    exposition: Exposition,
    text: String,
}

/// Runs `stampede run --metrics-addr` once per test binary and scrapes `/metrics` during the
/// run, until every runner metric the load-test dashboard uses is there (or the run ends).
fn cli_scrape() -> &'static CliScrape {
    static SCRAPE: OnceLock<CliScrape> = OnceLock::new();
    SCRAPE.get_or_init(|| {
        let wanted = runner_metrics_of(&load_dashboard("loadtest.json"));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("scenario.yaml");
        std::fs::write(&file, SCENARIO).unwrap();
        let stderr_path = dir.path().join("stderr.txt");
        // Port 0: the CLI binds a free port and names it on stderr.
        let mut child = Command::new(env!("CARGO_BIN_EXE_stampede"))
            .args(["run", file.to_str().unwrap(), "--quiet", "--threads", "1", "--metrics-addr", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .expect("stampede starts");
        let deadline = Instant::now() + Duration::from_secs(30);
        let announced = Regex::new(r"metrics at http://([^/\s]+)/metrics").unwrap();
        let mut addr: Option<SocketAddr> = None;
        let mut last: Option<(String, Vec<String>)> = None;
        let outcome = loop {
            std::thread::sleep(Duration::from_millis(250));
            if addr.is_none() {
                let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
                addr = announced.captures(&stderr).map(|c| c[1].parse().expect("a socket address"));
            }
            if let Some(Ok(text)) = addr.map(|addr| http_get(addr, "/metrics")) {
                let e = Exposition::parse(&text)
                    .unwrap_or_else(|err| panic!("the CLI's /metrics is not valid exposition text: {err}\n{text}"));
                let present = e.names();
                let missing: Vec<String> = wanted.iter().filter(|n| !present.contains(n.as_str())).cloned().collect();
                let running = e.series("stampede_active_vus").any(|s| s.value > 0.0);
                if missing.is_empty() && running {
                    break Ok(CliScrape { exposition: e, text });
                }
                last = Some((text, missing));
            }
            if let Ok(Some(status)) = child.try_wait() {
                break Err(format!("the run ended ({status}) before a complete scrape"));
            }
            if Instant::now() > deadline {
                break Err("no complete scrape in 30 s".to_string());
            }
        };
        let _ = child.kill();
        let _ = child.wait();
        let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        match outcome {
            Ok(scrape) => scrape,
            Err(why) => match last {
                Some((text, missing)) => {
                    panic!("{why}; missing {missing:?} in the last scrape:\n{text}\nstderr:\n{stderr}")
                }
                None => panic!("{why}; /metrics on {addr:?} never answered\nstderr:\n{stderr}"),
            },
        }
    })
}

/// The non-operator metric names the dashboard reads (from its queries, annotations and
/// variables).
fn runner_metrics_of(d: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for e in exprs(d) {
        out.extend(promql::parse(&e.expr).expect("parses").metric_names());
    }
    for v in variables(d).iter().filter(|v| v["type"] == "query") {
        match parse_variable_query(variable_query(v)) {
            Ok(VariableQuery::LabelValues { selector: Some(s), .. }) => out.extend(s.metric().map(str::to_string)),
            Ok(VariableQuery::QueryResult(q)) => out.extend(q.metric_names()),
            _ => {}
        }
    }
    out.retain(|n| !is_operator_metric(n));
    out
}

fn is_operator_metric(name: &str) -> bool {
    name.starts_with("stampede_operator_")
}

/// A plain HTTP/1.1 GET; the body as text.
fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").ok_or_else(|| std::io::Error::other("no end of headers"))?;
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        return Err(std::io::Error::other(format!("answered {}", head.lines().next().unwrap_or_default())));
    }
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    if !chunked {
        return Ok(body.to_string());
    }
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size, after) = rest.split_once("\r\n").ok_or_else(|| std::io::Error::other("bad chunk"))?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or_default().trim(), 16)
            .map_err(|_| std::io::Error::other("bad chunk size"))?;
        if size == 0 {
            return Ok(out);
        }
        out.push_str(after.get(..size).ok_or_else(|| std::io::Error::other("short chunk"))?);
        rest = after.get(size + 2..).ok_or_else(|| std::io::Error::other("short chunk"))?;
    }
}

#[test]
fn cli_exposition_has_every_runner_metric_the_loadtest_dashboard_uses() {
    let d = load_dashboard("loadtest.json");
    let scrape = cli_scrape();
    let e = &scrape.exposition;
    // The CLI labels its series namespace="local", loadtest=<scenario name>; "All" steps.
    let values: Labels =
        [("namespace", "local".to_string()), ("loadtest", SCENARIO_NAME.to_string()), ("step", ".*".to_string())]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
    let checked = check_dashboard_against("loadtest.json", &d, e, &values, |n| !is_operator_metric(n));
    assert_eq!(checked, runner_metrics_of(&d));
    assert!(checked.len() >= 15, "{checked:?}");

    // Every runner series carries namespace, loadtest and runner: the dashboard filters and
    // groups on them.
    for s in e.samples.iter().filter(|s| s.name.starts_with("stampede_")) {
        for label in ["namespace", "loadtest", "runner"] {
            assert!(s.labels.contains_key(label), "{} {:?} lacks `{label}`\n{}", s.name, s.labels, scrape.text);
        }
    }
}

#[test]
fn cli_exposition_has_latency_phases_per_step() {
    let scrape = cli_scrape();
    let e = &scrape.exposition;
    assert_eq!(e.types.get("stampede_request_phase_duration_seconds").map(String::as_str), Some("histogram"));
    let count = |name: &str, step: &str, phase: Option<&str>| -> f64 {
        e.samples
            .iter()
            .filter(|s| s.name == name && s.labels.get("step").map(String::as_str) == Some(step))
            .filter(|s| phase.is_none_or(|p| s.labels.get("phase").map(String::as_str) == Some(p)))
            .map(|s| s.value)
            .sum()
    };
    for step in ["home", "broken"] {
        // One scrape is one snapshot: every answer has its time to first byte and receive.
        let responses = count("stampede_responses_total", step, None);
        assert!(responses > 0.0, "{step}: no responses in\n{}", scrape.text);
        for phase in ["ttfb", "receive"] {
            let n = count("stampede_request_phase_duration_seconds_count", step, Some(phase));
            assert_eq!(n, responses, "{step}/{phase}\n{}", scrape.text);
        }
        // Plain HTTP on an IP: no DNS or TLS series; no more connects than the 2 VUs' first
        // ones (keep-alive), the first request of each VU being `home`.
        for phase in ["dns", "tls"] {
            assert_eq!(count("stampede_request_phase_duration_seconds_count", step, Some(phase)), 0.0, "{phase}");
        }
    }
    assert_eq!(count("stampede_request_phase_duration_seconds_count", "home", Some("connect")), 2.0, "{}", scrape.text);
}

#[test]
fn cli_exposition_has_the_units_the_loadtest_dashboard_assumes() {
    let e = &cli_scrape().exposition;
    let sum = |name: &str| e.series(name).map(|s| s.value).sum::<f64>();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64();

    // Seconds since the epoch (the annotation multiplies by 1000 for Grafana's milliseconds).
    let start = e.series("stampede_run_start_timestamp_seconds").next().expect("a start timestamp").value;
    assert!((now - 120.0..=now + 5.0).contains(&start), "start {start} is not unix seconds near {now}");

    assert!(sum("stampede_requests_total") > 0.0);
    let vus = sum("stampede_active_vus");
    assert!(vus > 0.0 && vus <= sum("stampede_max_vus") && sum("stampede_max_vus") == 2.0, "active {vus}");
    assert!(sum("stampede_generator_cpu_seconds_total") > 0.0);
    let rss = sum("stampede_generator_resident_memory_bytes");
    assert!((1e6..8e9).contains(&rss), "RSS {rss} is not bytes");

    // The failing step shows up where the error panels look.
    let check_errors: f64 = e
        .series("stampede_errors_total")
        .filter(|s| s.labels.get("kind").map(String::as_str) == Some("check"))
        .map(|s| s.value)
        .sum();
    assert!(check_errors > 0.0, "no errors of kind check");
    assert!(e.series("stampede_responses_total").any(|s| s.labels.get("status").map(String::as_str) == Some("500")));

    // Latency histograms in seconds, cumulative, +Inf bucket = count: histogram_quantile and
    // the mean panel rely on it.
    // #23: the group's transactions, each failed (its `broken` step), by kind.
    let of_group = |name: &str| {
        e.series(name)
            .filter(|s| s.labels.get("group").map(String::as_str) == Some("visit"))
            .map(|s| s.value)
            .sum::<f64>()
    };
    let transactions = of_group("stampede_group_transactions_total");
    assert!(transactions > 0.0, "no transactions of group visit");
    assert_eq!(of_group("stampede_group_failures_total"), transactions, "every transaction failed");
    assert_eq!(of_group("stampede_group_duration_seconds_count"), transactions);
    for family in
        ["stampede_request_duration_seconds", "stampede_schedule_lag_seconds", "stampede_group_duration_seconds"]
    {
        // Series labels without `le` → (le, cumulative count) of each bucket.
        let mut by_series: BTreeMap<Labels, Vec<(f64, f64)>> = BTreeMap::new();
        for s in e.series(&format!("{family}_bucket")) {
            let le = s.labels.get("le").expect("a bucket has le");
            let le: f64 = if le == "+Inf" { f64::INFINITY } else { le.parse().expect("le is a number") };
            let mut key = s.labels.clone();
            key.remove("le");
            by_series.entry(key).or_default().push((le, s.value));
        }
        assert!(!by_series.is_empty(), "{family} has no buckets");
        for (labels, mut buckets) in by_series {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "{family} {labels:?} buckets not cumulative");
            let of = |suffix: &str| {
                e.series(&format!("{family}{suffix}"))
                    .find(|s| s.labels == labels)
                    .map(|s| s.value)
                    .expect("sum and count")
            };
            let last = buckets.last().unwrap();
            assert!(last.0.is_infinite() && last.1 == of("_count"), "{family} {labels:?}: +Inf bucket != count");
            if family != "stampede_schedule_lag_seconds" && of("_count") > 0.0 {
                let mean = of("_sum") / of("_count");
                assert!(mean > 0.0 && mean < 1.0, "{family} {labels:?}: mean {mean} is not seconds");
            }
        }
    }
}

#[test]
fn loadtest_dashboard_variables_resolve_against_the_cli_exposition() {
    let d = load_dashboard("loadtest.json");
    let e = &cli_scrape().exposition;
    let vars = evaluate_variables(&d, e).unwrap_or_else(|err| panic!("loadtest.json: {err}"));
    assert_eq!(vars["namespace"], names(&["local"]));
    assert_eq!(vars["loadtest"], names(&[SCENARIO_NAME]));
    assert_eq!(vars["step"], names(&["broken", "home"]));
}

// ---------------------------------------------------------------------------------------------
// The operator's exposition, rendered by the operator's own code for a set of LoadTests

const PHASE_NAMES: [&str; 6] = ["Pending", "Initializing", "Running", "Succeeded", "Failed", "Aborted"];

/// A LoadTest in `phase`; finished ones carry a final summary (p50 20 ms ... p99 120 ms) and one
/// failed threshold when Failed.
fn loadtest(namespace: &str, name: &str, phase: Phase) -> Arc<LoadTest> {
    let spec: LoadTestSpec = serde_json::from_value(serde_json::json!({
        "runners": 2,
        "scenario": {"name": name, "baseUrl": "http://target", "load": {"executor": "constant-vus", "vus": 4, "duration": "10s"},
                     "scenarios": [{"name": "s", "steps": [{"name": "home", "request": {"url": "{{baseUrl}}/"}}]}]}
    }))
    .expect("a LoadTest spec");
    let mut lt = LoadTest::new(name, spec);
    lt.metadata.namespace = Some(namespace.to_string());
    if phase == Phase::Pending {
        return Arc::new(lt);
    }
    let finished = phase.is_finished();
    lt.status = Some(LoadTestStatus {
        phase,
        start_time: Some("2025-01-02T03:04:05Z".into()),
        completion_time: finished.then(|| "2025-01-02T03:04:15Z".into()),
        summary: Some(Summary {
            is_final: finished,
            requests: 5000,
            rps: 500.0,
            error_rate: 0.01,
            duration_seconds: 10.0,
            latency_ms: LatencySummary { p50: 20.0, p90: 80.0, p95: 100.0, p99: 120.0, ..Default::default() },
            ..Default::default()
        }),
        thresholds: if phase == Phase::Failed {
            vec![Verdict {
                threshold: "latency.p99 < 100ms".into(),
                passed: false,
                actual: 120.0,
                actual_text: "120ms".into(),
                baseline: None,
                ratio: None,
                message: None,
            }]
        } else {
            Vec::new()
        },
        ..Default::default()
    });
    Arc::new(lt)
}

/// The operator's `/metrics` text after one reconcile, as leader, with LoadTests in every
/// phase in namespace `shop`.
fn operator_exposition() -> (Exposition, String) {
    let metrics = stampede_operator::metrics::Metrics::default();
    metrics.reconciles.inc();
    metrics.duration.observe(0.004);
    metrics.leader.set(1);
    let loadtests = [
        loadtest("shop", "queued", Phase::Pending),
        loadtest("shop", "starting", Phase::Initializing),
        loadtest("shop", "live", Phase::Running),
        loadtest("shop", "checkout", Phase::Succeeded),
        loadtest("shop", "search", Phase::Failed),
        loadtest("shop", "stopped", Phase::Aborted),
    ];
    let text = metrics.render_with(&loadtests);
    let e =
        Exposition::parse(&text).unwrap_or_else(|err| panic!("the operator's /metrics is not valid: {err}\n{text}"));
    (e, text)
}

#[test]
fn operator_exposition_has_every_operator_metric_the_dashboards_use() {
    let (e, text) = operator_exposition();
    let d = load_dashboard("operator.json");
    let all: Labels = [("namespace".to_string(), ".*".to_string())].into();
    let checked = check_dashboard_against("operator.json", &d, &e, &all, |_| true);
    assert!(checked.iter().all(|n| is_operator_metric(n)), "operator.json reads runner metrics: {checked:?}");
    assert!(checked.len() >= 13, "{checked:?}");

    // The load-test dashboard's annotations and past-runs table, for one finished run.
    let d = load_dashboard("loadtest.json");
    let one: Labels = [("namespace", "shop"), ("loadtest", "checkout"), ("step", ".*")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let checked = check_dashboard_against("loadtest.json", &d, &e, &one, is_operator_metric);
    assert!(checked.len() >= 9, "{checked:?}\n{text}");
}

#[test]
fn dashboards_name_only_real_phases() {
    let (e, _) = operator_exposition();
    let exported: BTreeSet<String> =
        e.series("stampede_operator_loadtests").filter_map(|s| s.labels.get("phase").cloned()).collect();
    assert_eq!(exported, PHASE_NAMES.iter().map(|p| p.to_string()).collect(), "phases exported");
    for (file, _, _) in DASHBOARDS {
        let d = load_dashboard(file);
        let mut used = BTreeSet::new();
        for x in exprs(&d) {
            for s in promql::parse(&x.expr).unwrap().selectors {
                for m in s.matchers.iter().filter(|m| m.label == "phase") {
                    used.extend(m.value.split('|').map(str::to_string));
                }
            }
        }
        // Value mappings that colour phases in tables.
        let text = d.to_string();
        for word in ["Pending", "Initializing", "Starting", "Running", "Succeeded", "Failed", "Aborted", "Completed"] {
            if text.contains(&format!("\"{word}\":{{")) {
                used.insert(word.to_string());
            }
        }
        let unknown: Vec<_> = used.iter().filter(|p| !exported.contains(*p)).collect();
        assert!(unknown.is_empty(), "{file} names phases the operator never exports: {unknown:?}");
    }
}

#[test]
fn operator_exposition_has_the_units_the_dashboards_assume() {
    let (e, text) = operator_exposition();
    let value = |name: &str, lt: &str, extra: Option<(&str, &str)>| {
        e.series(name)
            .find(|s| {
                s.labels.get("loadtest").map(String::as_str) == Some(lt)
                    && extra.is_none_or(|(k, v)| s.labels.get(k).map(String::as_str) == Some(v))
            })
            .map(|s| s.value)
            .unwrap_or_else(|| panic!("no {name} for {lt}\n{text}"))
    };
    // Seconds, like every `_seconds` metric: the table shows them with unit "s".
    assert_eq!(value("stampede_operator_loadtest_latency_seconds", "checkout", Some(("quantile", "0.99"))), 0.12);
    assert_eq!(value("stampede_operator_loadtest_latency_seconds", "checkout", Some(("quantile", "0.5"))), 0.02);
    // Unix seconds (the table and the annotation multiply by 1000).
    assert_eq!(value("stampede_operator_loadtest_start_timestamp_seconds", "checkout", None), 1_735_787_045.0);
    assert_eq!(value("stampede_operator_loadtest_completion_timestamp_seconds", "checkout", None), 1_735_787_055.0);
    // A ratio 0-1 (the table's unit is percentunit).
    assert_eq!(value("stampede_operator_loadtest_error_ratio", "checkout", None), 0.01);
    assert_eq!(value("stampede_operator_loadtest_thresholds_failed", "search", None), 1.0);
    // Only finished runs are in the past-runs table.
    assert!(
        e.series("stampede_operator_loadtest_requests_per_second")
            .all(|s| { ["checkout", "search", "stopped"].contains(&s.labels["loadtest"].as_str()) })
    );
}

#[test]
fn operator_dashboard_variables_resolve_against_the_operator_exposition() {
    let (e, _) = operator_exposition();
    let vars =
        evaluate_variables(&load_dashboard("operator.json"), &e).unwrap_or_else(|err| panic!("operator.json: {err}"));
    assert_eq!(vars["namespace"], names(&["shop"]));
}
