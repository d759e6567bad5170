//! Checks: named assertions on a response (status, headers, body, JSON paths). Each one is
//! counted by name; a request that fails any of them is an error of kind `check`.

use crate::compile::extract::{ResponseView, Segment, describe, lookup, parse_json_path, value_text};
use crate::compile::template::{Escape, Scope, Template};
use crate::error::Under;
use stampede_model::scenario::{CheckSpec, Expect};

/// What a check looks at.
#[derive(Debug)]
pub enum Subject {
    /// The status must be in one of the ranges (no `Expectation`).
    Status(StatusCheck),
    /// A response header (lowercase name).
    Header(String),
    /// The body as text (lossy UTF-8); an empty body counts as missing.
    Body,
    /// The value at a JSON path of the body: a string as its text, anything else as JSON.
    Json(Vec<Segment>),
}

/// What the looked-at value must be.
#[derive(Debug)]
pub enum Expectation {
    /// The value equals the rendered template, compared as text (`equals:`).
    Equals(Template),
    /// A JSON path's value equals one hole alone (`equals: "{{ qty }}"`) by value: a number
    /// equals a number (3 and 3.0 alike), a list a list whatever its spelling; the template
    /// renders JSON. A string either side compares as text, as [`Expectation::Equals`] does.
    EqualsTyped(Template),
    /// `exists: true`: the value is there; `exists: false`: it is absent.
    Exists(bool),
    /// The value contains the rendered template (`contains:`).
    Contains(Template),
    /// The regex (`matches:`) matches somewhere in the value (unanchored).
    Matches(regex::Regex),
}

/// One compiled, named check.
#[derive(Debug)]
pub struct CheckPlan {
    /// How reports name it, e.g. `json json.test equals "test"`.
    pub name: String,
    /// What it reads from the response.
    pub subject: Subject,
    /// What the value must be; `None` only for a [`Subject::Status`] check, whose ranges say it.
    pub expect: Option<Expectation>,
}

impl CheckPlan {
    /// Whether it reads the body.
    pub fn needs_body(&self) -> bool {
        matches!(self.subject, Subject::Body | Subject::Json(_))
    }

    /// Whether it reads a response header.
    pub fn needs_headers(&self) -> bool {
        matches!(self.subject, Subject::Header(_))
    }

    /// Passes, or says why not. `json` is the body parsed once per response.
    pub fn evaluate(
        &self,
        resp: &ResponseView<'_>,
        slots: &[String],
        json: &mut Option<Option<serde_json::Value>>,
    ) -> Result<(), String> {
        if let (Subject::Json(path), Some(Expectation::EqualsTyped(t))) = (&self.subject, &self.expect) {
            let doc = json.get_or_insert_with(|| serde_json::from_slice(resp.body).ok());
            let Some(doc) = doc.as_ref() else { return Err("the body is not JSON".into()) };
            let Some(got) = lookup(doc, path) else { return Err("it is missing".into()) };
            let want: serde_json::Value = serde_json::from_str(&t.render(slots)).unwrap_or_default();
            // A string compares as text either side (a gRPC answer writes 64-bit numbers as strings).
            let same = match (&want, got) {
                (serde_json::Value::String(w), got) => value_text(got) == *w,
                (w, serde_json::Value::String(g)) => value_text(w) == *g,
                (w, got) => json_equal(got, w),
            };
            return if same { Ok(()) } else { Err(format!("got {got}, not {want}")) };
        }
        let owned;
        let value: Option<&str> = match &self.subject {
            Subject::Status(s) => {
                return if s.passes(resp.status) { Ok(()) } else { Err(format!("got status {}", resp.status)) };
            }
            Subject::Header(name) => resp.header(name),
            Subject::Body => {
                owned = String::from_utf8_lossy(resp.body).into_owned();
                (!owned.is_empty()).then_some(owned.as_str())
            }
            Subject::Json(path) => {
                let doc = json.get_or_insert_with(|| serde_json::from_slice(resp.body).ok());
                match doc.as_ref() {
                    None => return Err("the body is not JSON".into()),
                    Some(doc) => {
                        owned = lookup(doc, path).map(value_text).unwrap_or_default();
                        lookup(doc, path).map(|_| owned.as_str())
                    }
                }
            }
        };
        let shown = |v: &str| {
            let mut v = v.to_string();
            if v.len() > 80 {
                let cut = (0..=80).rev().find(|i| v.is_char_boundary(*i)).unwrap_or(0);
                v.truncate(cut);
                v.push('…');
            }
            format!("{v:?}")
        };
        match (self.expect.as_ref(), value) {
            (Some(Expectation::Exists(true)) | None, Some(_)) | (Some(Expectation::Exists(false)), None) => Ok(()),
            (Some(Expectation::Exists(true)) | None, None) => Err("it is missing".into()),
            (Some(Expectation::Exists(false)), Some(v)) => Err(format!("it is there: {}", shown(v))),
            (Some(_), None) => Err("it is missing".into()),
            (Some(Expectation::EqualsTyped(t)), Some(v)) => {
                let want = crate::compile::template::slot_text(&t.render(slots)).into_owned();
                if v == want { Ok(()) } else { Err(format!("got {}", shown(v))) }
            }
            (Some(Expectation::Equals(t)), Some(v)) => {
                let want = t.render(slots);
                if v == want { Ok(()) } else { Err(format!("got {}", shown(v))) }
            }
            (Some(Expectation::Contains(t)), Some(v)) => {
                if v.contains(t.render(slots).as_str()) {
                    Ok(())
                } else {
                    Err(format!("got {}", shown(v)))
                }
            }
            (Some(Expectation::Matches(re)), Some(v)) => {
                if re.is_match(v) {
                    Ok(())
                } else {
                    Err(format!("got {}", shown(v)))
                }
            }
        }
    }
}

/// Whether two JSON values are equal, numbers by their value (3 equals 3.0).
fn json_equal(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (J::Array(x), J::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b)),
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        (a, b) => a == b,
    }
}

/// Compiles the checks of a step; problems go under the step's location (`check.…`).
pub fn compile(
    spec: &CheckSpec,
    status: Option<StatusCheck>,
    scope: &Scope,
    problems: &mut Under<'_>,
) -> Vec<CheckPlan> {
    let mut checks = Vec::new();
    if let (Some(s), Some(src)) = (status, &spec.status) {
        let text = match serde_json::to_value(src) {
            Ok(serde_json::Value::Array(items)) => {
                format!("in [{}]", items.iter().map(value_text).collect::<Vec<_>>().join(", "))
            }
            Ok(v) => format!("is {}", value_text(&v)),
            Err(_) => String::new(),
        };
        checks.push(CheckPlan { name: format!("status {text}"), subject: Subject::Status(s), expect: None });
    }
    for (name, e) in &spec.headers {
        let field = format!("check.headers.{name}");
        if name.trim().is_empty() {
            problems.add(&field, "names no header");
            continue;
        }
        let header = name.trim().to_ascii_lowercase();
        if let Some(expect) = expectation(e, scope, &field, problems) {
            let name = format!("header {header} {}", describe_expect(e));
            checks.push(CheckPlan { name, subject: Subject::Header(header), expect: Some(expect) });
        }
    }
    if let Some(e) = &spec.body
        && let Some(expect) = expectation(e, scope, "check.body", problems)
    {
        let name = format!("body {}", describe_expect(e));
        checks.push(CheckPlan { name, subject: Subject::Body, expect: Some(expect) });
    }
    for (path, e) in &spec.json {
        let field = format!("check.json.{path}");
        let segments = match parse_json_path(path) {
            Ok(s) if s.contains(&Segment::All) => {
                problems.add(&field, "`*` reaches several values: a check reads one (an extractor keeps them all)");
                continue;
            }
            Ok(s) => s,
            Err(msg) => {
                problems.add(&field, format!("invalid JSON path: {msg}"));
                continue;
            }
        };
        let typed = e.equals.as_ref().map(|v| v.as_text()).filter(|v| crate::compile::template::lone_hole(v).is_some());
        let expect = match typed {
            Some(src) if e.exists.is_none() && e.contains.is_none() && e.matches.is_none() => {
                match Template::json(&serde_json::Value::String(src), scope) {
                    Ok(t) => Some(Expectation::EqualsTyped(t)),
                    Err(err) => {
                        problems.add(&field, err);
                        None
                    }
                }
            }
            _ => expectation(e, scope, &field, problems),
        };
        if let Some(expect) = expect {
            let name = format!("json {} {}", describe(&segments), describe_expect(e));
            checks.push(CheckPlan { name, subject: Subject::Json(segments), expect: Some(expect) });
        }
    }
    checks
}

fn expectation(e: &Expect, scope: &Scope, field: &str, problems: &mut Under<'_>) -> Option<Expectation> {
    let set = [e.equals.is_some(), e.exists.is_some(), e.contains.is_some(), e.matches.is_some()];
    if set.iter().filter(|b| **b).count() != 1 {
        problems.add(field, "set exactly one of `equals`, `exists`, `contains` or `matches`");
        return None;
    }
    let mut template = |src: &str| match Template::compile(src, scope, Escape::None) {
        Ok(t) => Some(t),
        Err(err) => {
            problems.add(field, err);
            None
        }
    };
    if let Some(v) = &e.equals {
        return template(&v.as_text()).map(Expectation::Equals);
    }
    if let Some(v) = &e.contains {
        return template(v).map(Expectation::Contains);
    }
    if let Some(re) = &e.matches {
        return match regex::Regex::new(re) {
            Ok(re) => Some(Expectation::Matches(re)),
            Err(err) => {
                problems.add(&format!("{field}.matches"), format!("invalid regex: {err}"));
                None
            }
        };
    }
    e.exists.map(Expectation::Exists)
}

fn describe_expect(e: &Expect) -> String {
    if let Some(v) = &e.equals {
        format!("equals {:?}", v.as_text())
    } else if let Some(v) = &e.contains {
        format!("contains {v:?}")
    } else if let Some(v) = &e.matches {
        format!("matches /{v}/")
    } else if e.exists == Some(false) {
        "is absent".into()
    } else {
        "exists".into()
    }
}

/// Accepted status ranges (inclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusCheck {
    /// `(low, high)` pairs, both ends inclusive (`200` is `(200, 200)`): HTTP statuses (100–599),
    /// or gRPC status codes (0–16) for a gRPC step.
    pub ranges: Vec<(u16, u16)>,
}

impl StatusCheck {
    /// Whether `status` falls in one of the ranges.
    pub fn passes(&self, status: u16) -> bool {
        self.ranges.iter().any(|&(lo, hi)| status >= lo && status <= hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Problems;
    use stampede_model::scenario::Scalar;

    fn compile_one(spec: CheckSpec) -> CheckPlan {
        let mut problems = Problems::default();
        let mut checks = compile(&spec, None, &Scope::default(), &mut problems.under(""));
        assert!(problems.is_empty(), "{problems:?}");
        checks.remove(0)
    }

    #[test]
    fn headers_body_and_json_checks() {
        let headers = vec![("content-type".to_string(), "application/json".to_string())];
        let body = br#"{"json": {"test": "test", "n": 3}, "form": {}}"#;
        let resp = ResponseView { status: 200, headers: &headers, body };
        let expect = |f: fn(&mut Expect)| {
            let mut e = Expect::default();
            f(&mut e);
            e
        };
        let header = compile_one(CheckSpec {
            headers: [("Content-Type".to_string(), expect(|e| e.contains = Some("json".into())))].into(),
            ..CheckSpec::default()
        });
        assert_eq!(header.name, r#"header content-type contains "json""#);
        assert!(header.evaluate(&resp, &[], &mut None).is_ok());
        let eq = compile_one(CheckSpec {
            json: [("$.json.n".to_string(), expect(|e| e.equals = Some(Scalar::Number(3.into()))))].into(),
            ..CheckSpec::default()
        });
        assert_eq!(eq.name, r#"json json.n equals "3""#);
        assert!(eq.evaluate(&resp, &[], &mut None).is_ok());
        let absent = compile_one(CheckSpec {
            json: [("form.key1".to_string(), expect(|e| e.exists = Some(true)))].into(),
            ..CheckSpec::default()
        });
        assert_eq!(absent.evaluate(&resp, &[], &mut None).unwrap_err(), "it is missing");
        let re = compile_one(CheckSpec {
            body: Some(expect(|e| e.matches = Some(r#""n":\s*\d"#.into()))),
            ..CheckSpec::default()
        });
        assert!(re.evaluate(&resp, &[], &mut None).is_ok());
        let not_json = ResponseView { status: 200, headers: &[], body: b"<html>" };
        assert_eq!(eq.evaluate(&not_json, &[], &mut None).unwrap_err(), "the body is not JSON");
    }

    #[test]
    fn a_json_value_equals_one_hole_alone_with_its_type() {
        let mut scope = Scope::default();
        for (name, value) in [("three", serde_json::json!(3)), ("list", serde_json::json!([1, {"a": 2.0, "b": "x"}]))] {
            scope.consts.insert(name.into(), crate::compile::extract::value_text(&value));
            scope.typed.insert(name.into(), value);
        }
        scope.consts.insert("text".into(), "3".into());
        let check = |path: &str, want: &str| {
            let spec = CheckSpec {
                json: [(path.to_string(), Expect { equals: Some(Scalar::Text(want.into())), ..Expect::default() })]
                    .into(),
                ..CheckSpec::default()
            };
            let mut problems = Problems::default();
            let mut checks = compile(&spec, None, &scope, &mut problems.under(""));
            assert!(problems.is_empty(), "{problems:?}");
            checks.remove(0)
        };
        let body = br#"{"n": 3.0, "s": "3", "l": [1.0, {"b": "x", "a": 2}]}"#;
        let resp = ResponseView { status: 200, headers: &[], body };
        assert!(check("n", "{{ three }}").evaluate(&resp, &[], &mut None).is_ok(), "3.0 is the number 3");
        assert!(check("s", "{{three}}").evaluate(&resp, &[], &mut None).is_ok(), "a string compares as text");
        assert_eq!(
            check("n", "{{list}}").evaluate(&resp, &[], &mut None).unwrap_err(),
            r#"got 3.0, not [1,{"a":2.0,"b":"x"}]"#
        );
        assert!(check("l", "{{list}}").evaluate(&resp, &[], &mut None).is_ok(), "a list, whatever its spelling");
        assert!(check("l", "{{ list[0] + 1 }}").evaluate(&resp, &[], &mut None).is_err());
        // A text var compares as text, as before: "3" equals both 3 and "3".
        assert!(check("n", "{{text}}").evaluate(&resp, &[], &mut None).is_err(), "3.0 is not the text 3");
        assert!(check("s", "{{text}}").evaluate(&resp, &[], &mut None).is_ok());
        assert!(check("$.missing", "{{three}}").evaluate(&resp, &[], &mut None).unwrap_err().contains("missing"));
    }

    #[test]
    fn an_expectation_needs_exactly_one_test() {
        let mut problems = Problems::default();
        let spec = CheckSpec {
            body: Some(Expect { contains: Some("a".into()), matches: Some("b".into()), ..Expect::default() }),
            json: [("$.[".to_string(), Expect { exists: Some(true), ..Expect::default() })].into(),
            ..CheckSpec::default()
        };
        compile(&spec, None, &Scope::default(), &mut problems.under("step: "));
        let problems = problems.into_vec();
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(problems[0].message.contains("exactly one"));
        assert!(problems[1].location == "step: check.json.$.[" && problems[1].message.contains("invalid JSON path"));
    }
}
