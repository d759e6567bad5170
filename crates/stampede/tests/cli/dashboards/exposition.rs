//! The Prometheus text exposition format (version 0.0.4), read strictly enough to catch a
//! malformed line: `# HELP`, `# TYPE`, and samples `name{label="value",...} value [timestamp]`.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Exposition {
    /// Family name → type (`counter`, `gauge`, `histogram`, `summary`, `untyped`).
    pub types: BTreeMap<String, String>,
    pub samples: Vec<Sample>,
}

/// Where a metric name used in a query comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub family: String,
    pub family_type: String,
    /// `_bucket`, `_sum` or `_count` of a histogram or summary, or "".
    pub suffix: &'static str,
}

impl Exposition {
    pub(crate) fn parse(text: &str) -> Result<Exposition, String> {
        let mut e = Exposition::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end();
            let at = |msg: String| format!("line {}: {msg}: `{line}`", n + 1);
            if line.is_empty() {
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, ty) = rest.split_once(' ').ok_or_else(|| at("TYPE without a type".into()))?;
                if !matches!(ty, "counter" | "gauge" | "histogram" | "summary" | "untyped") {
                    return Err(at(format!("unknown type `{ty}`")));
                }
                if e.types.insert(name.to_string(), ty.to_string()).is_some() {
                    return Err(at(format!("a second TYPE for `{name}`")));
                }
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            e.samples.push(parse_sample(line).map_err(at)?);
        }
        Ok(e)
    }

    /// Every sample name.
    pub(crate) fn names(&self) -> BTreeSet<&str> {
        self.samples.iter().map(|s| s.name.as_str()).collect()
    }

    /// The family a sample name belongs to: `x_bucket` is family `x` only where `x` is a
    /// histogram (and `x_sum`/`x_count` where `x` is a histogram or summary); any other name
    /// is its own family. `None` when no TYPE line declares it.
    pub(crate) fn resolve(&self, name: &str) -> Option<Resolved> {
        for suffix in ["_bucket", "_sum", "_count"] {
            if let Some(base) = name.strip_suffix(suffix)
                && let Some(ty) = self.types.get(base)
                && (ty == "histogram" || (ty == "summary" && suffix != "_bucket"))
            {
                return Some(Resolved { family: base.to_string(), family_type: ty.clone(), suffix });
            }
        }
        let ty = self.types.get(name)?;
        Some(Resolved { family: name.to_string(), family_type: ty.clone(), suffix: "" })
    }

    /// Samples of one name.
    pub(crate) fn series<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |s| s.name == name)
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err(format!("bad metric name `{name}`"));
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(after) = rest.strip_prefix('{') {
        let mut chars = after.char_indices().peekable();
        loop {
            // label name
            while chars.peek().is_some_and(|(_, c)| *c == ' ' || *c == ',') {
                chars.next();
            }
            let Some(&(start, c)) = chars.peek() else { return Err("unterminated `{`".into()) };
            if c == '}' {
                rest = &after[start + 1..];
                break;
            }
            let eq = after[start..].find('=').ok_or("a label without `=`")? + start;
            let label = after[start..eq].trim();
            if !valid_name(label) || label.contains(':') {
                return Err(format!("bad label name `{label}`"));
            }
            while chars.peek().is_some_and(|(i, _)| *i <= eq) {
                chars.next();
            }
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err(format!("the value of label `{label}` is not quoted"));
            }
            let mut value = String::new();
            loop {
                match chars.next() {
                    None => return Err("unterminated label value".into()),
                    Some((_, '"')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, '\\')) => value.push('\\'),
                        Some((_, '"')) => value.push('"'),
                        other => return Err(format!("bad escape {other:?} in a label value")),
                    },
                    Some((_, c)) => value.push(c),
                }
            }
            if labels.insert(label.to_string(), value).is_some() {
                return Err(format!("label `{label}` twice"));
            }
        }
    }
    let mut fields = rest.split_whitespace();
    let value = fields.next().ok_or("a sample without a value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().map_err(|_| format!("bad value `{v}`"))?,
    };
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| format!("bad timestamp `{ts}`"))?;
    }
    if fields.next().is_some() {
        return Err("more than a value and a timestamp".into());
    }
    Ok(Sample { name: name.to_string(), labels, value })
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}
