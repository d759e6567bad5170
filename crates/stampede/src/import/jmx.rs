//! `stampede import jmx`: a JMeter plan. Each thread group becomes a scenario with its own load
//! (threads × loops iterations, or its duration), `setUp`/`tearDown` thread groups the test's
//! `setup`/`teardown`; HTTP samplers become steps (HTTP Request Defaults filling what a sampler
//! leaves out), with the header managers, timers, response assertions, JSON and regular
//! expression extractors in their scope; transaction controllers become `group` blocks, loop
//! controllers `repeat` blocks, simple controllers plain blocks; CSV Data Set Configs `data`;
//! user-defined variables `vars`; JMeter functions (`${__UUID()}`, `${__Random(a,b)}`,
//! `${__time()}`, `${__threadNum}`, `${__P(name)}`) the expression language's. What it cannot
//! convert (scripts, other samplers, an If Controller's condition…) is listed. Credentials a
//! header manager, a sampler's arguments, body or URL or a user-defined variable records become
//! `{{env.NAME}}` ([`super::secrets`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::Imported;
use super::secrets::{Secrets, host_of};
use super::xml::{self, Node};

/// What the walk knows of the whole plan.
#[derive(Default)]
struct Plan {
    warnings: Vec<String>,
    secrets: Secrets,
    /// CSV column → its data set's name.
    columns: BTreeMap<String, String>,
    data: serde_json::Map<String, Value>,
    vars: serde_json::Map<String, Value>,
    /// Names extracted by post-processors (they stay `{{name}}`).
    extracted: BTreeSet<String>,
    origins: Vec<String>,
    /// How deep the function whose argument is being converted is nested ([`FUNCTION_DEPTH`]).
    depth: usize,
}

/// How deep JMeter functions may nest in one another's arguments (`${__Random(1,${__P(max)})}`
/// is 2): deeper ones are kept as text and listed, not converted by a recursion nothing bounds.
const FUNCTION_DEPTH: usize = 16;

/// What applies to the samplers of a level and below.
#[derive(Clone, Default)]
struct Scope {
    headers: Vec<(String, String)>,
    /// HTTP Request Defaults: protocol, domain, port.
    defaults: (Option<String>, Option<String>, Option<String>),
    /// Timers in scope, added up as JMeter runs every one before a sampler: (least, most) ms.
    think: Option<(u64, u64)>,
    checks: serde_json::Map<String, Value>,
    extract: serde_json::Map<String, Value>,
}

/// `(element, its hashTree)` pairs of a hashTree.
fn pairs(tree: &Node) -> Vec<(&Node, Option<&Node>)> {
    let mut out = Vec::new();
    let mut it = tree.children.iter().peekable();
    while let Some(e) = it.next() {
        if e.name == "hashTree" {
            continue;
        }
        let sub = it.next_if(|n| n.name == "hashTree");
        out.push((e, sub));
    }
    out
}

/// Where the `}` closing a `${` (its text is `after`) is: nested `${…}` skipped, `\\x` escapes
/// too.
fn matching_close(after: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut chars = after.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '$' if chars.peek().map(|(_, c)| *c) == Some('{') => {
                chars.next();
                depth += 1;
            }
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// `name(args)` → the name and its arguments (split at commas outside nested `${…}` and
/// parentheses; `\\,` is a comma of the argument); a plain name has none.
fn split_call(inner: &str) -> (&str, Vec<String>) {
    let Some(open) = inner.find('(') else { return (inner.trim(), Vec::new()) };
    let name = inner[..open].trim();
    let body = inner[open + 1..].strip_suffix(')').unwrap_or(&inner[open + 1..]);
    let mut args = Vec::new();
    let mut arg = String::new();
    let (mut braces, mut parens) = (0usize, 0usize);
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&',') => {
                arg.push(',');
                chars.next();
            }
            '$' if chars.peek() == Some(&'{') => {
                braces += 1;
                arg.push('$');
            }
            '}' if braces > 0 => {
                braces -= 1;
                arg.push('}');
            }
            '(' => {
                parens += 1;
                arg.push('(');
            }
            ')' if parens > 0 => {
                parens -= 1;
                arg.push(')');
            }
            ',' if braces == 0 && parens == 0 => args.push(std::mem::take(&mut arg)),
            c => arg.push(c),
        }
    }
    if !body.is_empty() || !args.is_empty() {
        args.push(arg);
    }
    (name, args)
}

/// A property of `e`, trimmed; `None` when it is not there or blank.
fn prop(e: &Node, key: &str) -> Option<String> {
    e.prop_text(key).filter(|v| !v.trim().is_empty()).map(|v| v.trim().to_string())
}

fn enabled(e: &Node) -> bool {
    e.attr("enabled") != Some("false")
}

fn label(e: &Node) -> String {
    e.attr("testname").unwrap_or(&e.name).to_string()
}

/// The `name`/`value` pairs of an Arguments-like collection (`Arguments.arguments`).
fn arguments(e: &Node) -> Vec<(String, String)> {
    let collection = e
        .children
        .iter()
        .find(|c| c.name == "collectionProp" && c.attr("name") == Some("Arguments.arguments"))
        .or_else(|| {
            e.children.iter().find_map(|c| {
                (c.name == "elementProp").then(|| c.children.iter().find(|d| d.name == "collectionProp")).flatten()
            })
        });
    collection
        .into_iter()
        .flat_map(|c| c.children.iter())
        .filter(|a| a.name == "elementProp")
        .map(|a| {
            (
                a.prop_text("Argument.name").unwrap_or_default().to_string(),
                a.prop_text("Argument.value").unwrap_or_default().to_string(),
            )
        })
        .collect()
}

impl Plan {
    /// A user-defined variable: a credential's value from the environment.
    fn variable(&mut self, name: String, value: &str, at: &str) {
        let value = self.templates(value, at);
        let value = self.secrets.field(None, &name, &value, || format!("{at}: variable {name}"));
        self.vars.insert(name, value.into());
    }

    /// JMeter's `${…}` in `text` as Stampede templates (nested ones too: `${__Random(1,${max})}`);
    /// the text around them kept as text.
    fn templates(&mut self, text: &str, at: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(open) = rest.find("${") {
            out.push_str(&super::literal(&rest[..open]));
            let after = &rest[open + 2..];
            let Some(close) = matching_close(after) else {
                out.push_str(&super::literal(&rest[open..]));
                return out;
            };
            let inner = after[..close].trim();
            let converted = self.reference(inner, at);
            out.push_str(&converted);
            rest = &after[close + 1..];
        }
        out.push_str(&super::literal(rest));
        out
    }

    /// One `${inner}`: a function call or a variable, as a template.
    fn reference(&mut self, inner: &str, at: &str) -> String {
        let (func, args) = split_call(inner);
        match (func, args.as_slice()) {
            ("__UUID", _) => "{{ uuid() }}".to_string(),
            ("__Random", [a, b, ..]) => {
                let (a, b) = (self.int_expr(a, at), self.int_expr(b, at));
                format!("{{{{ randomInt({a}, {b}) }}}}")
            }
            ("__RandomString", [n, ..]) => {
                if args.len() > 1 {
                    self.warnings.push(format!(
                        "{at}: `${{{inner}}}`: the characters to draw from are not converted (letters and digits)"
                    ));
                }
                format!("{{{{ randomString({}) }}}}", self.int_expr(n, at))
            }
            ("__time", []) => "{{ unixMillis() }}".to_string(),
            ("__time", [f, ..]) if f.trim().is_empty() => "{{ unixMillis() }}".to_string(),
            ("__time", [f, ..]) if f.trim() == "/1000" => "{{ unixMillis() / 1000 }}".to_string(),
            ("__threadNum", _) => "{{ vu.id }}".to_string(),
            ("__urlencode", [v]) => format!("{{{{ urlEncode({}) }}}}", self.text_expr(v, at)),
            ("__P" | "__property", [name, rest @ ..]) => {
                let var = super::env_name(name.trim());
                self.secrets.env.entry(var.clone()).or_insert_with(|| {
                    format!(
                        "{at}: JMeter property {}{}",
                        name.trim(),
                        match rest.first() {
                            Some(d) => format!(" (JMeter's default: {})", d.trim()),
                            None => String::new(),
                        }
                    )
                });
                match rest.first() {
                    Some(d) => format!("{{{{env.{var}:-{}}}}}", d.trim().replace('}', "")),
                    None => format!("{{{{env.{var}}}}}"),
                }
            }
            (f, _) if f.starts_with("__") => {
                self.warnings.push(format!("{at}: JMeter function `${{{inner}}}` is not converted; left as text"));
                super::literal(&format!("${{{inner}}}"))
            }
            _ => {
                let name = inner;
                match self.columns.get(name) {
                    Some(set) => format!("{{{{{set}.{name}}}}}"),
                    None if self.vars.contains_key(name) || self.extracted.contains(name) => format!("{{{{{name}}}}}"),
                    // Defined nowhere in the plan (a `-J` property, an element not converted).
                    None => {
                        let var = super::env_name(name);
                        self.secrets
                            .env
                            .entry(var.clone())
                            .or_insert_with(|| format!("{at}: `${{{name}}}`, defined nowhere in the plan"));
                        format!("{{{{env.{var}}}}}")
                    }
                }
            }
        }
    }

    /// A function's argument as an expression of an integer: a number as it is, a variable or
    /// function through `int(…)`.
    fn int_expr(&mut self, arg: &str, at: &str) -> String {
        let arg = arg.trim();
        if arg.parse::<i64>().is_ok() {
            return arg.to_string();
        }
        format!("int({})", self.text_expr(arg, at))
    }

    /// A function's argument as an expression of its text: `'text'`, a variable's name, or a
    /// nested function's expression.
    fn text_expr(&mut self, arg: &str, at: &str) -> String {
        if self.depth >= FUNCTION_DEPTH {
            self.warnings.push(format!("{at}: functions nested deeper than {FUNCTION_DEPTH}: the argument is text"));
            return format!(
                "'{}'",
                arg.replace('\\', "\\\\").replace('\'', "\\'").replace("{{", "{ {").replace("}}", "} }")
            );
        }
        self.depth += 1;
        let t = self.templates(arg, at);
        self.depth -= 1;
        // One hole alone: its inside is the expression (`{{max}}` → `max`).
        if let Some(inner) = t.strip_prefix("{{").and_then(|r| r.strip_suffix("}}"))
            && !inner.contains("{{")
            && !inner.trim().starts_with("env.")
        {
            return inner.trim().to_string();
        }
        if let Some(inner) = t.strip_prefix("{{env.").and_then(|r| r.strip_suffix("}}"))
            && let Some((_, default)) = inner.split_once(":-")
        {
            return format!("'{}'", default.replace('\\', "\\\\").replace('\'', "\\'"));
        }
        format!("'{}'", arg.replace('\\', "\\\\").replace('\'', "\\'"))
    }

    /// A number of a thread group (threads, loops, seconds) as JMeter would read it: a number,
    /// `${__P(name,default)}` (its default: no property is set here), or a variable of the plan.
    fn number(&mut self, text: Option<&str>, at: &str, what: &str) -> Option<i64> {
        let text = text?.trim();
        if text.is_empty() {
            return None;
        }
        if let Ok(n) = text.parse() {
            return Some(n);
        }
        let inner = text.strip_prefix("${").and_then(|r| r.strip_suffix('}'));
        let value = inner.and_then(|inner| match split_call(inner) {
            ("__P" | "__property", args) => args.get(1).map(|d| d.trim().to_string()),
            (name, args) if args.is_empty() => self.vars.get(name).and_then(|v| v.as_str()).map(str::to_string),
            _ => None,
        });
        match value.as_deref().and_then(|v| v.trim().parse().ok()) {
            Some(n) => {
                self.warnings.push(format!("{at}: {what} `{text}` is {n} here (JMeter's default): edit it to change"));
                Some(n)
            }
            None => {
                self.warnings.push(format!("{at}: {what} `{text}` is not a number here; left at its default"));
                None
            }
        }
    }

    /// Folds a level's configuration into `scope`; registers data sets and variables.
    fn configure(&mut self, level: &[(&Node, Option<&Node>)], scope: &mut Scope) {
        for (e, _) in level.iter().filter(|(e, _)| enabled(e)) {
            let at = format!("`{}`", label(e));
            match e.name.as_str() {
                "HeaderManager" => {
                    let headers =
                        e.children.iter().find(|c| c.name == "collectionProp").into_iter().flat_map(|c| &c.children);
                    for h in headers {
                        let name = h.prop_text("Header.name").unwrap_or_default().to_string();
                        let value = h.prop_text("Header.value").unwrap_or_default().to_string();
                        let value = self.templates(&value, &at);
                        scope.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(&name));
                        scope.headers.push((name, value));
                    }
                }
                "ConfigTestElement" if e.attr("guiclass") == Some("HttpDefaultsGui") => {
                    let p = |k: &str| e.prop_text(k).filter(|v| !v.is_empty()).map(str::to_string);
                    scope.defaults = (p("HTTPSampler.protocol"), p("HTTPSampler.domain"), p("HTTPSampler.port"));
                }
                "CookieManager" => {}
                "CSVDataSet" => {
                    let file = e.prop_text("filename").unwrap_or_default();
                    let set: String = std::path::Path::new(file)
                        .file_stem()
                        .and_then(|s| s.to_str())
                        .unwrap_or("data")
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                        .collect();
                    let names = e.prop_text("variableNames").unwrap_or_default();
                    let skips_header = e.prop_text("ignoreFirstLine") == Some("true");
                    if names.is_empty() {
                        self.warnings.push(format!("{at}: the CSV's columns are its header row; their `${{name}}`s stay `{{{{name}}}}`: write them `{{{{{set}.name}}}}`"));
                    } else if !skips_header {
                        self.warnings.push(format!("{at}: Stampede reads a CSV's column names from its first row: add the header `{names}` to {file}"));
                    }
                    for n in
                        names.split(e.prop_text("delimiter").unwrap_or(",")).map(str::trim).filter(|n| !n.is_empty())
                    {
                        self.columns.insert(n.to_string(), set.clone());
                    }
                    if e.prop_text("shareMode").is_some_and(|m| !m.contains("all")) {
                        self.warnings.push(format!(
                            "{at}: share mode `{}` is not converted: every VU shares the rows",
                            e.prop_text("shareMode").unwrap_or_default()
                        ));
                    }
                    self.data.insert(set, json!({"csv": file}));
                }
                "Arguments" => {
                    for (k, v) in arguments(e) {
                        self.variable(k, &v, &at);
                    }
                }
                "ConstantTimer" | "UniformRandomTimer" => {
                    let delay: u64 =
                        e.prop_text("ConstantTimer.delay").and_then(|d| d.trim().parse().ok()).unwrap_or(0);
                    let range: f64 =
                        e.prop_text("RandomTimer.range").and_then(|d| d.trim().parse().ok()).unwrap_or(0.0);
                    let extra = if e.name == "ConstantTimer" { 0 } else { range.max(0.0) as u64 };
                    let (least, most) = scope.think.unwrap_or((0, 0));
                    scope.think = Some((least + delay, most + delay + extra));
                }
                "ResponseAssertion" => self.assertion(e, &at, scope),
                "JSONPostProcessor" => {
                    let names: Vec<&str> =
                        e.prop_text("JSONPostProcessor.referenceNames").unwrap_or_default().split(';').collect();
                    let paths: Vec<&str> =
                        e.prop_text("JSONPostProcessor.jsonPathExprs").unwrap_or_default().split(';').collect();
                    let numbers: Vec<&str> =
                        e.prop_text("JSONPostProcessor.match_numbers").unwrap_or_default().split(';').collect();
                    for (i, (n, p)) in names.iter().zip(&paths).enumerate() {
                        let mut spec = json!({"json": p.trim()});
                        match numbers.get(i).map(|m| m.trim()) {
                            Some("-1") => spec["all"] = true.into(),
                            Some("0") => self.warnings.push(format!("{at}: a random match of `{n}` is its first here")),
                            _ => {}
                        }
                        self.extracted.insert(n.trim().to_string());
                        scope.extract.insert(n.trim().to_string(), spec);
                    }
                }
                "RegexExtractor" => {
                    let n = e.prop_text("RegexExtractor.refname").unwrap_or_default().trim().to_string();
                    let regex = e.prop_text("RegexExtractor.regex").unwrap_or_default();
                    let template = e.prop_text("RegexExtractor.template").unwrap_or("$1$");
                    let group: usize = template.trim_matches('$').parse().unwrap_or(1);
                    if e.prop_text("RegexExtractor.useHeaders").is_some_and(|h| h != "false") {
                        self.warnings.push(format!("{at}: a regular expression over headers is applied to the body"));
                    }
                    self.extracted.insert(n.clone());
                    scope.extract.insert(n, json!({"regex": regex, "group": group}));
                }
                _ => {}
            }
        }
    }

    fn assertion(&mut self, e: &Node, at: &str, scope: &mut Scope) {
        let field = e.prop_text("Assertion.test_field").unwrap_or("Assertion.response_data");
        let kind: u32 = e.prop_text("Assertion.test_type").and_then(|t| t.parse().ok()).unwrap_or(16);
        let strings: Vec<String> = e
            .children
            .iter()
            .find(|c| c.name == "collectionProp")
            .into_iter()
            .flat_map(|c| &c.children)
            .map(|s| s.text.clone())
            .collect();
        if kind & 4 != 0 || strings.is_empty() {
            self.warnings.push(format!("{at}: a negated or empty response assertion is not converted"));
            return;
        }
        let op = match kind & !4 {
            1 => "matches",
            8 => "equals",
            _ => "contains",
        };
        match field {
            "Assertion.response_code" => match strings[0].trim().parse::<u16>() {
                Ok(code) => {
                    scope.checks.insert("status".into(), code.into());
                }
                Err(_) => self.warnings.push(format!("{at}: response code `{}` is not converted", strings[0])),
            },
            "Assertion.response_data" => {
                let value = self.templates(&strings[0], at);
                scope.checks.insert("body".into(), json!({ op: value }));
                if strings.len() > 1 {
                    self.warnings.push(format!("{at}: only the first of {} patterns is checked", strings.len()));
                }
            }
            other => self.warnings.push(format!("{at}: an assertion on `{other}` is not converted")),
        }
    }

    /// The steps of a hashTree, with what `outer` applies.
    fn steps(&mut self, tree: Option<&Node>, outer: &Scope) -> Vec<Value> {
        let Some(tree) = tree else { return Vec::new() };
        let level = pairs(tree);
        let mut scope = outer.clone();
        self.configure(&level, &mut scope);
        let mut out = Vec::new();
        for (e, sub) in level.iter().filter(|(e, _)| enabled(e)) {
            let at = format!("`{}`", label(e));
            match e.name.as_str() {
                "HTTPSamplerProxy" | "HTTPSampler" | "HTTPSampler2" => out.push(self.sampler(e, *sub, &scope)),
                "TransactionController" => {
                    let steps = self.steps(*sub, &scope);
                    self.block(&mut out, &at, json!({"name": label(e), "group": label(e), "steps": steps}));
                }
                "LoopController" => {
                    let loops = e.prop_text("LoopController.loops").unwrap_or("1").trim().to_string();
                    let steps = self.steps(*sub, &scope);
                    match self.number(Some(&loops), &at, "its loop count") {
                        Some(n) if n >= 0 => {
                            self.block(&mut out, &at, json!({"name": label(e), "repeat": {"count": n}, "steps": steps}))
                        }
                        _ => {
                            self.warnings.push(format!("{at}: a loop of `{loops}` runs once"));
                            self.block(&mut out, &at, json!({"name": label(e), "steps": steps}));
                        }
                    }
                }
                "GenericController"
                | "RecordingController"
                | "OnceOnlyController"
                | "InterleaveControl"
                | "RandomController"
                | "RandomOrderController"
                | "ThroughputController"
                | "RunTime"
                | "WhileController"
                | "ForeachController"
                | "SwitchController"
                | "CriticalSectionController" => {
                    if e.name != "GenericController" && e.name != "RecordingController" {
                        self.warnings.push(format!(
                            "{at}: a `{}` is not converted: its samplers run in order, every pass",
                            e.name
                        ));
                    }
                    let steps = self.steps(*sub, &scope);
                    self.block(&mut out, &at, json!({"name": label(e), "steps": steps}));
                }
                "IfController" => {
                    self.warnings.push(format!(
                        "{at}: its condition `{}` is not converted; the block always runs",
                        e.prop_text("IfController.condition").unwrap_or_default()
                    ));
                    let steps = self.steps(*sub, &scope);
                    self.block(&mut out, &at, json!({"name": label(e), "steps": steps}));
                }
                "HeaderManager" | "ConfigTestElement" | "CookieManager" | "CSVDataSet" | "Arguments"
                | "ConstantTimer" | "UniformRandomTimer" | "ResponseAssertion" | "JSONPostProcessor"
                | "RegexExtractor" => {}
                "ResultCollector" | "Summariser" => {}
                other => self.warnings.push(format!("{at}: element `{other}` is not converted")),
            }
        }
        out
    }

    /// A logic controller as a block, or (holding no step Stampede converts) left out and listed.
    fn block(&mut self, out: &mut Vec<Value>, at: &str, block: Value) {
        if block["steps"].as_array().is_none_or(Vec::is_empty) {
            self.warnings.push(format!("{at}: holds no sampler Stampede converts; left out"));
        } else {
            out.push(block);
        }
    }

    /// A sampler as a step: its request, with what `outer` applies and what is attached to it
    /// (`sub`, its hashTree).
    fn sampler(&mut self, e: &Node, sub: Option<&Node>, outer: &Scope) -> Value {
        let at = format!("`{}`", label(e));
        let mut scope = self.own_scope(sub, outer, &at);
        let method = self.sampler_method(e, &at);
        let url = self.sampler_url(e, &at, &mut scope);
        let host = host_of(&url);
        let host = host.as_deref();
        let url = self.secrets.query(&url, host, &at);
        let mut request = json!({"method": method, "url": url});
        self.sampler_arguments(e, &method, host, &at, &mut request);
        if !scope.headers.is_empty() {
            let headers: serde_json::Map<String, Value> =
                scope.headers.iter().map(|(k, v)| (k.clone(), self.secrets.header(host, k, v, &at).into())).collect();
            request["headers"] = Value::Object(headers);
        }
        let mut step = json!({"name": label(e), "request": request});
        if !scope.checks.is_empty() {
            step["check"] = Value::Object(scope.checks.clone());
        }
        if !scope.extract.is_empty() {
            step["extract"] = Value::Object(scope.extract.clone());
        }
        match scope.think {
            Some((least, most)) if least == most => step["think"] = format!("{least}ms").into(),
            Some((least, most)) => step["think"] = json!({"min": format!("{least}ms"), "max": format!("{most}ms")}),
            None => {}
        }
        step
    }

    /// A sampler's scope: `outer` with what is attached to the sampler (`sub`), which applies
    /// to it alone; an attached element that is no configuration listed as not converted.
    fn own_scope(&mut self, sub: Option<&Node>, outer: &Scope, at: &str) -> Scope {
        let mut scope = outer.clone();
        if let Some(sub) = sub {
            let own = pairs(sub);
            self.configure(&own, &mut scope);
            for (c, _) in own.iter().filter(|(c, _)| enabled(c)) {
                if !matches!(
                    c.name.as_str(),
                    "HeaderManager"
                        | "ConfigTestElement"
                        | "CookieManager"
                        | "CSVDataSet"
                        | "Arguments"
                        | "ConstantTimer"
                        | "UniformRandomTimer"
                        | "ResponseAssertion"
                        | "JSONPostProcessor"
                        | "RegexExtractor"
                ) {
                    self.warnings.push(format!("`{}` in {at}: element `{}` is not converted", label(c), c.name));
                }
            }
        }
        scope
    }

    /// A sampler's method, in capitals: a `${variable}` of the plan holding a constant method
    /// is that method, another `${…}` is GET (listed).
    fn sampler_method(&mut self, e: &Node, at: &str) -> String {
        let method = prop(e, "HTTPSampler.method").unwrap_or_else(|| "GET".into()).to_ascii_uppercase();
        if !method.contains("${") {
            return method;
        }
        // A variable of the plan with a constant method, or GET.
        let resolved = method
            .strip_prefix("${")
            .and_then(|m| m.strip_suffix('}'))
            .and_then(|name| self.vars.get(name).or_else(|| self.vars.get(&name.to_ascii_lowercase())))
            .and_then(Value::as_str)
            .map(str::to_ascii_uppercase)
            .filter(|m| !m.is_empty() && m.chars().all(|c| c.is_ascii_alphabetic()));
        match resolved {
            Some(m) => m,
            None => {
                self.warnings.push(format!("{at}: method `{method}` is not a constant method: GET here"));
                "GET".into()
            }
        }
    }

    /// A sampler's URL, templated: its path when that is a whole URL (its user-info a header of
    /// `scope` unless one is there), else its path after the origin its protocol, domain and port
    /// (or HTTP Request Defaults') make; no domain anywhere is `{{env.BASE_URL}}`.
    fn sampler_url(&mut self, e: &Node, at: &str, scope: &mut Scope) -> String {
        let (dp, dd, dport) = scope.defaults.clone();
        let path = prop(e, "HTTPSampler.path").unwrap_or_else(|| "/".into());
        if path.starts_with("http://") || path.starts_with("https://") {
            let templated = self.templates(&path, at);
            let (url, user) = self.secrets.url(&templated, at);
            if let Some((name, value)) = user
                && !scope.headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name))
            {
                scope.headers.push((name, value));
            }
            return url;
        }
        let protocol = prop(e, "HTTPSampler.protocol").or(dp).unwrap_or_else(|| "http".into());
        let domain = prop(e, "HTTPSampler.domain").or(dd).unwrap_or_default();
        let port = prop(e, "HTTPSampler.port").or(dport);
        let origin = match (domain.is_empty(), port) {
            // No server name anywhere (a template plan): the origin comes from BASE_URL.
            (true, _) => {
                let var = super::BASE_URL;
                self.secrets
                    .env
                    .entry(var.into())
                    .or_insert_with(|| format!("{at}: no server name, here or in HTTP Request Defaults"));
                format!("{{{{env.{var}}}}}")
            }
            (false, Some(port)) => self.templates(&format!("{protocol}://{domain}:{port}"), at),
            (false, None) => self.templates(&format!("{protocol}://{domain}"), at),
        };
        self.origins.push(origin.clone());
        let path = if path.starts_with('/') { path } else { format!("/{path}") };
        format!("{origin}{}", self.templates(&path, at))
    }

    /// A sampler's arguments into `request`: its raw body, or its parameters as the query (GET,
    /// HEAD, DELETE) or a form; templated, credentials from the environment.
    fn sampler_arguments(&mut self, e: &Node, method: &str, host: Option<&str>, at: &str, request: &mut Value) {
        let args = e
            .children
            .iter()
            .find(|c| c.name == "elementProp" && c.attr("name") == Some("HTTPsampler.Arguments"))
            .map(arguments)
            .unwrap_or_default();
        if e.prop_text("HTTPSampler.postBodyRaw") == Some("true") {
            let body = args.first().map(|(_, v)| v.clone()).unwrap_or_default();
            let body = self.templates(&body, at);
            request["body"] = self.secrets.body(&body, host, at).into();
        } else if !args.is_empty() {
            let mut map = serde_json::Map::new();
            let key = if matches!(method, "GET" | "HEAD" | "DELETE") { "query" } else { "form" };
            for (k, v) in &args {
                let v = self.templates(v, at);
                let v = self.secrets.field(host, k, &v, || format!("{at}: {key} {k}"));
                map.insert(k.clone(), v.into());
            }
            request[key] = Value::Object(map);
        }
    }

    /// A thread group's load: threads × loops iterations, or threads for its duration; a ramp-up
    /// with a duration ramps the VUs up (ramping-vus), as JMeter starts its threads.
    fn load(&mut self, g: &Node) -> Value {
        let at = format!("`{}`", label(g));
        let threads = self.number(g.prop_text("ThreadGroup.num_threads"), &at, "its thread count").unwrap_or(1).max(1);
        let main = g.children.iter().find(|c| c.attr("name") == Some("ThreadGroup.main_controller"));
        let loops =
            self.number(main.and_then(|m| m.prop_text("LoopController.loops")), &at, "its loop count").unwrap_or(1);
        let scheduled = g.prop_text("ThreadGroup.scheduler") == Some("true");
        let duration =
            if scheduled { self.number(g.prop_text("ThreadGroup.duration"), &at, "its duration") } else { None };
        let ramp = self.number(g.prop_text("ThreadGroup.ramp_time"), &at, "its ramp-up").unwrap_or(0).max(0);
        match (duration, loops) {
            (Some(d), _) if ramp > 0 && ramp < d => json!({
                "executor": "ramping-vus",
                "stages": [
                    {"duration": format!("{ramp}s"), "target": threads},
                    {"duration": format!("{}s", d - ramp), "target": threads}
                ]
            }),
            (Some(d), _) => json!({"executor": "constant-vus", "vus": threads, "duration": format!("{}s", d.max(1))}),
            (None, l) if l >= 0 => {
                if ramp > 0 {
                    self.warnings.push(format!(
                        "{at}: its ramp-up ({ramp} s) over a loop count is not converted: every VU starts at once"
                    ));
                }
                json!({"executor": "constant-vus", "vus": threads, "iterations": (threads * l).max(1)})
            }
            (None, _) => {
                self.warnings.push(format!("{at}: it loops forever without a duration: one iteration per thread here"));
                json!({"executor": "constant-vus", "vus": threads, "iterations": threads})
            }
        }
    }
}

/// Imports a JMeter plan (`.jmx`) from `source`.
pub(crate) fn jmx(text: &str, source: &str) -> Result<Imported, String> {
    let root = xml::parse(text).map_err(|e| format!("{source}: not a JMeter plan (XML): {e}"))?;
    if root.name != "jmeterTestPlan" {
        return Err(format!("{source}: the root element is `<{}>`, not `<jmeterTestPlan>`", root.name));
    }
    let top = root.children.iter().find(|c| c.name == "hashTree").ok_or_else(|| format!("{source}: no test plan"))?;
    let level = pairs(top);
    let (plan_node, plan_tree) =
        level.iter().find(|(e, _)| e.name == "TestPlan").ok_or_else(|| format!("{source}: no `<TestPlan>`"))?;
    let mut plan = Plan::default();
    // The plan's user-defined variables.
    if let Some(udv) = plan_node.children.iter().find(|c| c.attr("name") == Some("TestPlan.user_defined_variables")) {
        for (k, v) in arguments(udv) {
            plan.variable(k, &v, "the test plan");
        }
    }
    let groups = plan_tree.map(pairs).unwrap_or_default();
    let mut scope = Scope::default();
    plan.configure(&groups, &mut scope);
    let mut scenarios = Vec::new();
    let (mut setup, mut teardown) = (Vec::new(), Vec::new());
    for (g, sub) in groups.iter().filter(|(g, _)| enabled(g)) {
        match g.name.as_str() {
            "ThreadGroup" => {
                let load = plan.load(g);
                let steps = plan.steps(*sub, &scope);
                scenarios.push(json!({"name": label(g), "load": load, "steps": steps}));
            }
            "SetupThreadGroup" => setup.extend(plan.steps(*sub, &scope)),
            "PostThreadGroup" => teardown.extend(plan.steps(*sub, &scope)),
            "HeaderManager" | "ConfigTestElement" | "CookieManager" | "CSVDataSet" | "Arguments" | "ConstantTimer"
            | "UniformRandomTimer" | "ResponseAssertion" | "JSONPostProcessor" | "RegexExtractor"
            | "ResultCollector" => {}
            other => plan.warnings.push(format!("`{}`: element `{other}` is not converted", label(g))),
        }
    }
    // A thread group without a sampler Stampede converts is no scenario (listed).
    scenarios.retain(|s| {
        let empty = s["steps"].as_array().is_none_or(Vec::is_empty);
        if empty {
            plan.warnings
                .push(format!("`{}`: holds no HTTP sampler; left out", s["name"].as_str().unwrap_or_default()));
        }
        !empty
    });
    if scenarios.is_empty() {
        return Err(format!("{source}: no thread group with an HTTP sampler to import"));
    }
    // JMeter's default names ("Thread Group", "HTTP Request") repeat; Stampede's may not.
    let mut taken = BTreeMap::new();
    for s in &mut scenarios {
        s["name"] = super::unique_name(&mut taken, s["name"].as_str().unwrap_or("Thread Group").to_string()).into();
        let mut steps_taken = BTreeMap::new();
        unique_step_names(&mut s["steps"], &mut steps_taken);
    }
    let mut once_taken = BTreeMap::new();
    for steps in [&mut setup, &mut teardown] {
        for step in steps.iter_mut() {
            rename(step, &mut once_taken);
        }
    }
    // One origin for every sampler: the scenario's baseUrl.
    let base = plan.origins.first().filter(|o| plan.origins.iter().all(|x| x == *o)).cloned();
    let mut file = json!({"name": label(plan_node), "scenarios": scenarios});
    if let Some(b) = &base {
        file["baseUrl"] = b.clone().into();
        let text = serde_json::to_string(&file).unwrap_or_default().replace(&format!("\"{b}/"), "\"{{baseUrl}}/");
        file = serde_json::from_str(&text).unwrap_or(file);
    }
    for (key, value) in [("setup", setup), ("teardown", teardown)] {
        if !value.is_empty() {
            file[key] = value.into();
        }
    }
    if !plan.data.is_empty() {
        file["data"] = Value::Object(plan.data.clone());
    }
    if !plan.vars.is_empty() {
        file["vars"] = Value::Object(plan.vars.clone());
    }
    let scenario: stampede_model::scenario::ScenarioFile =
        serde_json::from_value(file).map_err(|e| format!("{source}: the plan does not make a scenario: {e}"))?;
    let requests = count_requests(&scenario);
    let mut data: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (set, spec) in &plan.data {
        let columns = plan.columns.iter().filter(|(_, s)| *s == set).map(|(c, _)| c.clone()).collect();
        data.insert(spec["csv"].as_str().unwrap_or_default().to_string(), columns);
    }
    let mut imported = Imported { env: plan.secrets.env.clone(), warnings: plan.warnings, data, ..Imported::default() };
    let mut yaml = imported.head(source, "jmx", requests);
    yaml.push_str(&crate::quick::scenario_yaml(&scenario)?);
    imported.yaml = yaml;
    Ok(imported.scrubbed(&plan.secrets))
}

/// Every step of `steps` (blocks' too) named uniquely within `taken`.
fn unique_step_names(steps: &mut Value, taken: &mut BTreeMap<String, usize>) {
    for step in steps.as_array_mut().into_iter().flatten() {
        rename(step, taken);
    }
}

fn rename(step: &mut Value, taken: &mut BTreeMap<String, usize>) {
    let name = step["name"].as_str().unwrap_or("step").to_string();
    step["name"] = super::unique_name(taken, name).into();
    if step.get("group").is_some() {
        step["group"] = step["name"].clone();
    }
    if step.get("steps").is_some() {
        unique_step_names(&mut step["steps"], taken);
    }
}

fn count_requests(file: &stampede_model::scenario::ScenarioFile) -> usize {
    fn count(steps: &[stampede_model::scenario::Step]) -> usize {
        steps.iter().map(|s| usize::from(s.request.is_some()) + count(&s.steps)).sum()
    }
    file.scenarios.iter().map(|s| count(&s.steps)).sum::<usize>() + count(&file.setup) + count(&file.teardown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_and_variables_become_templates() {
        let mut plan = Plan::default();
        plan.columns.insert("user".into(), "users".into());
        plan.extracted.insert("token".into());
        let out = plan.templates(
            "${user}-${token}-${__UUID()}-${__Random(1,5)}-${__threadNum}-${__P(host)}-${__jexl3(1)}-${nowhere}",
            "s",
        );
        assert_eq!(
            out,
            "{{users.user}}-{{token}}-{{ uuid() }}-{{ randomInt(1, 5) }}-{{ vu.id }}-{{env.HOST}}-{{ '$' }}{__jexl3(1)}-{{env.NOWHERE}}"
        );
        assert!(plan.secrets.env["NOWHERE"].contains("defined nowhere in the plan"));
        assert!(plan.warnings[0].contains("`${__jexl3(1)}` is not converted"), "{:?}", plan.warnings);
    }

    /// A hostile plan nests functions 100,000 deep in one argument: a warning and text past
    /// [`FUNCTION_DEPTH`], not a stack overflow; two levels convert as before.
    #[test]
    fn functions_nested_past_the_budget_are_text_not_a_stack_overflow() {
        let mut plan = Plan::default();
        let n = 100_000;
        let deep = format!("{}1{}", "${__Random(1,".repeat(n), ")}".repeat(n));
        let out = plan.templates(&deep, "s");
        assert!(out.starts_with("{{ randomInt(1, int("), "{}", &out[..60]);
        assert!(plan.warnings.iter().any(|w| w.contains("nested deeper than 16")), "{:?}", plan.warnings);
        let mut plan = Plan::default();
        plan.vars.insert("max".into(), "9".into());
        assert_eq!(plan.templates("${__Random(1,${max})}", "s"), "{{ randomInt(1, int(max)) }}");
    }

    #[test]
    fn malformed_plans_are_named() {
        assert!(jmx("<jmeterTestPlan><hashTree>", "p.jmx").unwrap_err().contains("p.jmx: not a JMeter plan (XML)"));
        assert!(jmx("<project/>", "p.jmx").unwrap_err().contains("not `<jmeterTestPlan>`"));
        let empty = "<jmeterTestPlan><hashTree><TestPlan testname=\"t\"/><hashTree/></hashTree></jmeterTestPlan>";
        assert!(jmx(empty, "p.jmx").unwrap_err().contains("no thread group with an HTTP sampler"));
    }
}
