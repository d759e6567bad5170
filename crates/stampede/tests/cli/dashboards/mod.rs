//! The Grafana dashboards in `charts/stampede/dashboards/` are correct: well-formed JSON that
//! Grafana loads, every query valid PromQL over defined variables, and every metric, label and
//! variable they use present in what Stampede really exposes — the `stampede run` CLI's
//! `/metrics` scraped while it runs, and the operator's exposition.

mod cli;
mod exposition;
mod operator;
mod promql;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use exposition::Exposition;
use promql::{COUNTER_FUNCTIONS, Kind, Selector};
use regex::Regex;
use serde_json::Value;

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

/// Whether a metric is the operator's (`stampede_operator_…`), not a runner's.
fn is_operator_metric(name: &str) -> bool {
    name.starts_with("stampede_operator_")
}
