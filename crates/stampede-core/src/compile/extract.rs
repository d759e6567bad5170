//! Extractors: values taken from a response for later steps of the same VU — a JSON path
//! (`$.headers.Host`, or the dotted `headers.Host`), a regex capture group, a header, a
//! cookie, or the status.

use std::fmt;

use stampede_model::scenario::ExtractSpec;

/// One segment of a JSON path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    /// An object's field by name (`a` in `$.a` or `$['a']`).
    Key(String),
    /// A list's element by position from 0 (`[0]` or `.0`); on an object, the field of that name.
    Index(usize),
    /// `*` or `[*]`: every element of a list or value of an object (extractors with `all: true`).
    All,
}

/// How a value is taken.
#[derive(Clone, Debug)]
pub enum Source {
    /// The one value at a JSON path of the body, kept as JSON (a string quoted; text reads it unquoted).
    Json(Vec<Segment>),
    /// Every value the path reaches (it has a `*`), as a list.
    JsonAll(Vec<Segment>),
    /// The first match of the regex in the body: this capture group (0: the whole match).
    Regex(regex::Regex, usize),
    /// Every match, as a list.
    RegexAll(regex::Regex, usize),
    /// The response's status, as decimal text.
    Status,
    /// A response header (lowercase name).
    Header(String),
    /// A cookie set by the response.
    Cookie(String),
}

/// The parts of a response that extractors and checks read.
#[derive(Clone, Copy, Debug)]
pub struct ResponseView<'a> {
    /// The status the answer is judged by: the HTTP status, a gRPC call's status code (0–16), or
    /// 101 for a WebSocket message.
    pub status: u16,
    /// Kept response headers, lowercase names.
    pub headers: &'a [(String, String)],
    /// The body as received (for a WebSocket `receive`, the message).
    pub body: &'a [u8],
}

impl ResponseView<'_> {
    /// The first header called `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The value of cookie `name` from the response's `Set-Cookie` headers.
    pub fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n == "set-cookie")
            .filter_map(|(_, v)| v.split(';').next()?.split_once('='))
            .find(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim())
    }
}

/// The value at `path` in `doc`.
pub fn lookup<'a>(doc: &'a serde_json::Value, path: &[Segment]) -> Option<&'a serde_json::Value> {
    let mut v = doc;
    for seg in path {
        v = match seg {
            Segment::Key(k) => v.get(k.as_str()),
            Segment::Index(i) => v.get(*i).or_else(|| v.get(i.to_string().as_str())),
            Segment::All => None,
        }?;
    }
    Some(v)
}

/// Every value `path` reaches in `doc`, `*` taking each element or field in turn.
fn lookup_all<'a>(doc: &'a serde_json::Value, path: &[Segment], out: &mut Vec<&'a serde_json::Value>) {
    let Some((seg, rest)) = path.split_first() else {
        out.push(doc);
        return;
    };
    match seg {
        Segment::All => match doc {
            serde_json::Value::Array(items) => items.iter().for_each(|v| lookup_all(v, rest, out)),
            serde_json::Value::Object(fields) => fields.values().for_each(|v| lookup_all(v, rest, out)),
            _ => {}
        },
        one => {
            if let Some(v) = lookup(doc, std::slice::from_ref(one)) {
                lookup_all(v, rest, out);
            }
        }
    }
}

/// A JSON value as text: strings without quotes, everything else as JSON.
pub fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A compiled extractor writing into a VU slot.
#[derive(Clone, Debug)]
pub struct Extractor {
    /// Its name under the step's `extract:`: the variable later steps read, and how its errors name it.
    pub name: String,
    /// Index of the VU slot its value is written to.
    pub slot: usize,
    /// What it takes from the response.
    pub source: Source,
}

impl fmt::Display for Extractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "extractor `{}`", self.name)
    }
}

/// Parses `$.a.b[0].c`, `a.b.0.c` or `$['a'].b`; `$` alone is the whole document (no segment).
pub fn parse_json_path(path: &str) -> Result<Vec<Segment>, String> {
    let p = path.trim();
    if p == "$" {
        return Ok(Vec::new());
    }
    let p = p.strip_prefix('$').unwrap_or(p);
    let mut segs = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            rest = r;
            continue;
        }
        if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']').ok_or_else(|| format!("`{path}`: missing `]`"))?;
            let inner = r[..end].trim();
            let quoted = inner
                .strip_prefix('\'')
                .and_then(|s| s.strip_suffix('\''))
                .or_else(|| inner.strip_prefix('"').and_then(|s| s.strip_suffix('"')));
            segs.push(match quoted {
                Some(key) => Segment::Key(key.to_string()),
                None if inner == "*" => Segment::All,
                None => Segment::Index(inner.parse().map_err(|_| format!("`{path}`: `[{inner}]` is not an index"))?),
            });
            rest = &r[end + 1..];
            continue;
        }
        let end = rest.find(['.', '[']).unwrap_or(rest.len());
        let key = &rest[..end];
        segs.push(match key.parse::<usize>() {
            Ok(i) => Segment::Index(i),
            Err(_) if key == "*" => Segment::All,
            Err(_) => Segment::Key(key.to_string()),
        });
        rest = &rest[end..];
    }
    if segs.is_empty() {
        return Err(format!("`{path}` names no field"));
    }
    Ok(segs)
}

/// Compiles an extractor spec.
pub fn compile(name: &str, spec: &ExtractSpec, slot: usize) -> Result<Extractor, String> {
    let set = [
        spec.json.is_some(),
        spec.regex.is_some(),
        spec.status == Some(true),
        spec.header.is_some(),
        spec.cookie.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if set != 1 {
        return Err("set exactly one of `json`, `regex`, `header`, `cookie` or `status: true`".into());
    }
    if spec.group.is_some() && spec.regex.is_none() {
        return Err("`group` goes with `regex`".into());
    }
    let all = spec.all == Some(true);
    if all && spec.json.is_none() && spec.regex.is_none() {
        return Err("`all: true` goes with `json` or `regex`".into());
    }
    let source = if let Some(name) = &spec.header {
        if name.trim().is_empty() {
            return Err("`header` names no header".into());
        }
        Source::Header(name.trim().to_ascii_lowercase())
    } else if let Some(name) = &spec.cookie {
        if name.trim().is_empty() {
            return Err("`cookie` names no cookie".into());
        }
        Source::Cookie(name.trim().to_string())
    } else if let Some(path) = &spec.json {
        let segments = parse_json_path(path).map_err(|e| format!("invalid JSON path: {e}"))?;
        match (all, segments.contains(&Segment::All)) {
            (true, _) => Source::JsonAll(segments),
            (false, true) => return Err("a JSON path with `*` reaches several values: add `all: true`".into()),
            (false, false) => Source::Json(segments),
        }
    } else if let Some(re) = &spec.regex {
        let re = regex::Regex::new(re).map_err(|e| format!("invalid regex: {e}"))?;
        let group = spec.group.unwrap_or(if re.captures_len() > 1 { 1 } else { 0 });
        if group >= re.captures_len() {
            return Err(format!("the regex has no group {group}"));
        }
        if all { Source::RegexAll(re, group) } else { Source::Regex(re, group) }
    } else {
        Source::Status
    };
    Ok(Extractor { name: name.to_string(), slot, source })
}

impl Extractor {
    /// Whether the response body is needed.
    pub fn needs_body(&self) -> bool {
        matches!(self.source, Source::Json(_) | Source::JsonAll(_) | Source::Regex(..) | Source::RegexAll(..))
    }

    /// Whether its value is JSON (a list, a number…) that expressions read typed.
    pub fn gives_json(&self) -> bool {
        matches!(self.source, Source::Json(_) | Source::JsonAll(_) | Source::RegexAll(..))
    }

    /// Whether response headers other than `set-cookie` are needed.
    pub fn needs_headers(&self) -> bool {
        matches!(self.source, Source::Header(_))
    }

    /// The value, or why it could not be taken. `json` is the body parsed once per response.
    pub fn apply(
        &self,
        resp: &ResponseView<'_>,
        json: &mut Option<Option<serde_json::Value>>,
    ) -> Result<String, String> {
        match &self.source {
            Source::Status => Ok(resp.status.to_string()),
            Source::Header(name) => {
                resp.header(name).map(str::to_string).ok_or_else(|| format!("{self}: no `{name}` header"))
            }
            Source::Cookie(name) => resp
                .cookie(name)
                .map(str::to_string)
                .ok_or_else(|| format!("{self}: the response sets no `{name}` cookie")),
            Source::Regex(re, group) => {
                let text = String::from_utf8_lossy(resp.body);
                re.captures(&text)
                    .and_then(|c| c.get(*group))
                    .map(|m| m.as_str().to_string())
                    .ok_or_else(|| format!("{self}: `{}` does not match the body", re.as_str()))
            }
            Source::RegexAll(re, group) => {
                let text = String::from_utf8_lossy(resp.body);
                let all: Vec<&str> =
                    re.captures_iter(&text).filter_map(|c| c.get(*group)).map(|m| m.as_str()).collect();
                Ok(serde_json::to_string(&all).unwrap_or_default())
            }
            Source::Json(path) => {
                let doc = json.get_or_insert_with(|| serde_json::from_slice(resp.body).ok());
                let Some(doc) = doc.as_ref() else { return Err(format!("{self}: the body is not JSON")) };
                // As JSON: a number stays a number and a string is quoted, which text reads
                // unquoted ([`crate::compile::template::slot_text`]).
                lookup(doc, path)
                    .map(serde_json::Value::to_string)
                    .ok_or_else(|| format!("{self}: no `{}` in the body", describe(path)))
            }
            Source::JsonAll(path) => {
                let doc = json.get_or_insert_with(|| serde_json::from_slice(resp.body).ok());
                let Some(doc) = doc.as_ref() else { return Err(format!("{self}: the body is not JSON")) };
                let mut all = Vec::new();
                lookup_all(doc, path, &mut all);
                Ok(serde_json::to_string(&all).unwrap_or_default())
            }
        }
    }
}

/// A JSON path as written in messages (`a.b.0`).
pub fn describe(path: &[Segment]) -> String {
    if path.is_empty() {
        return "$".into();
    }
    path.iter()
        .map(|s| match s {
            Segment::Key(k) => k.clone(),
            Segment::Index(i) => i.to_string(),
            Segment::All => "*".to_string(),
        })
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: Option<&str>, regex: Option<&str>) -> ExtractSpec {
        ExtractSpec { json: json.map(Into::into), regex: regex.map(Into::into), ..ExtractSpec::default() }
    }

    fn view(status: u16, body: &[u8]) -> ResponseView<'_> {
        ResponseView { status, headers: &[], body }
    }

    #[test]
    fn headers_and_cookies() {
        let headers = vec![
            ("x-request-id".to_string(), "r-17".to_string()),
            ("set-cookie".to_string(), "theme=dark; Path=/".to_string()),
            ("set-cookie".to_string(), "session=abc123; HttpOnly".to_string()),
        ];
        let resp = ResponseView { status: 200, headers: &headers, body: b"" };
        let h =
            compile("rid", &ExtractSpec { header: Some("X-Request-ID".into()), ..ExtractSpec::default() }, 0).unwrap();
        assert_eq!(h.apply(&resp, &mut None).unwrap(), "r-17");
        let c = compile("sid", &ExtractSpec { cookie: Some("session".into()), ..ExtractSpec::default() }, 0).unwrap();
        assert_eq!(c.apply(&resp, &mut None).unwrap(), "abc123");
        let missing = compile("x", &ExtractSpec { cookie: Some("nope".into()), ..ExtractSpec::default() }, 0).unwrap();
        assert!(missing.apply(&resp, &mut None).unwrap_err().contains("sets no `nope` cookie"));
        assert!(
            compile("g", &ExtractSpec { group: Some(1), json: Some("a".into()), ..ExtractSpec::default() }, 0).is_err()
        );
    }

    #[test]
    fn json_paths_in_both_forms() {
        assert_eq!(parse_json_path("$.headers.Host").unwrap(), parse_json_path("headers.Host").unwrap());
        assert_eq!(
            parse_json_path("$.items[1]['id']").unwrap(),
            vec![Segment::Key("items".into()), Segment::Index(1), Segment::Key("id".into())]
        );
        let body =
            br#"{"headers": {"Host": "127.0.0.1:9"}, "items": [{"id": 1}, {"id": 42}], "form": {"key23": "Paris"}}"#;
        let mut json = None;
        let e = compile("host", &spec(Some("headers.Host"), None), 0).unwrap();
        assert_eq!(e.apply(&view(200, body), &mut json).unwrap(), r#""127.0.0.1:9""#, "a string, as JSON");
        let e = compile("id", &spec(Some("$.items[1].id"), None), 0).unwrap();
        assert_eq!(e.apply(&view(200, body), &mut json).unwrap(), "42");
        let e = compile("item", &spec(Some("items.0"), None), 0).unwrap();
        assert_eq!(e.apply(&view(200, body), &mut json).unwrap(), r#"{"id":1}"#);
        let e = compile("x", &spec(Some("$.form.missing"), None), 0).unwrap();
        assert!(e.apply(&view(200, body), &mut json).unwrap_err().contains("no `form.missing`"));
    }

    #[test]
    fn the_root_path_keeps_the_whole_body_with_its_type() {
        let e = compile("doc", &spec(Some("$"), None), 0).unwrap();
        let body = br#"{"b": [1, "x"], "a": null}"#;
        assert_eq!(e.apply(&view(200, body), &mut None).unwrap(), r#"{"a":null,"b":[1,"x"]}"#);
        assert_eq!(e.apply(&view(200, b" 7 "), &mut None).unwrap(), "7");
        assert_eq!(e.apply(&view(200, br#""hi""#), &mut None).unwrap(), r#""hi""#);
        assert!(e.apply(&view(200, b"<html>"), &mut None).unwrap_err().contains("not JSON"));
        assert!(e.gives_json());
        // `$` with `all: true` is the list of the one document.
        let all = compile("docs", &ExtractSpec { all: Some(true), ..spec(Some("$"), None) }, 0).unwrap();
        assert_eq!(all.apply(&view(200, b"[1,2]"), &mut None).unwrap(), "[[1,2]]");
        assert!(parse_json_path("").is_err() && parse_json_path("$.").is_err(), "no field named");
    }

    #[test]
    fn regex_groups_and_status() {
        let e = compile("token", &spec(None, Some(r"token=(\w+)")), 0).unwrap();
        assert_eq!(e.apply(&view(200, b"ok token=abc123;"), &mut None).unwrap(), "abc123");
        assert!(e.apply(&view(200, b"nothing"), &mut None).is_err());
        let s = compile("code", &ExtractSpec { status: Some(true), ..spec(None, None) }, 0).unwrap();
        assert_eq!(s.apply(&view(201, b""), &mut None).unwrap(), "201");
        assert!(compile("two", &spec(Some("a"), Some("b")), 0).is_err());
        assert!(compile("bad", &spec(None, Some("(")), 0).unwrap_err().contains("invalid regex"));
    }
}
