//! `stampede import har`: a browser's recording (HAR 1.2) becomes one step per request, in the
//! order they were sent, static assets (scripts, styles, images, fonts) left out by default.
//! **Correlation**: a value a request sends (a header, a query parameter, a path segment, a JSON
//! body field) that an earlier response returned in its JSON body becomes an extractor on that
//! earlier step and a `{{name}}` in the later ones — a token, an id, a CSRF value recorded once
//! works again on every run. Cookies stay with the VU's cookie jar; other credentials (headers,
//! query keys, body fields, a URL's user-info) become `{{env.NAME}}`, in the comments too.

use std::collections::BTreeMap;

use serde_json::Value;

use super::secrets::{Secrets, host_of, is_credential, strip_user_info};
use super::{Extract, Imported, Part, Step, unique_name, write_steps, write_top};

/// Headers a browser or the transport sets, which a step does not send as recorded.
const DROPPED_HEADERS: [&str; 10] = [
    "host",
    "connection",
    "content-length",
    "accept-encoding",
    "cookie",
    "origin",
    "referer",
    "upgrade-insecure-requests",
    "pragma",
    "cache-control",
];

/// A static asset, by its response's type or its path's extension.
fn is_static(entry: &Value) -> bool {
    let mime = entry["response"]["content"]["mimeType"].as_str().unwrap_or_default().to_ascii_lowercase();
    let url = entry["request"]["url"].as_str().unwrap_or_default();
    let path = url.split(['?', '#']).next().unwrap_or_default().to_ascii_lowercase();
    ["javascript", "text/css", "image/", "font/", "audio/", "video/"].iter().any(|m| mime.contains(m))
        || [".js", ".mjs", ".css", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".ico", ".woff", ".woff2", ".ttf", ".map"]
            .iter()
            .any(|e| path.ends_with(e))
}

/// Every string (and number) in a JSON value, with its path as `json:` extractors write it.
fn leaves(v: &Value, path: String, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                leaves(x, p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate().take(50) {
                leaves(x, format!("{path}[{i}]"), out);
            }
        }
        Value::String(s) => out.push((path, s.clone())),
        Value::Number(n) => out.push((path, n.to_string())),
        _ => {}
    }
}

/// A value worth correlating: long enough not to match by chance (a token, a uuid, an id of
/// some digits), not a word every response has.
fn distinctive(value: &str) -> bool {
    value.len() >= 8 && !matches!(value, "true" | "false" | "null") && !value.contains(char::is_whitespace)
}

/// A variable name from a JSON path: its last field (`data.token` → `token`), unique.
fn var_name(path: &str, taken: &mut BTreeMap<String, usize>) -> String {
    let last = path.rsplit('.').next().unwrap_or(path);
    let base: String = last
        .split('[')
        .next()
        .unwrap_or(last)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let base =
        if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) { format!("v{base}") } else { base };
    let n = taken.entry(base.clone()).or_insert(0);
    *n += 1;
    if *n == 1 { base } else { format!("{base}{n}") }
}

/// Conditional headers a browser adds from its cache (`If-None-Match` with an ETag it kept): a
/// VU has no cache, so they are not replayed, and a recorded 304 is expected as 200.
const CACHE_CONDITIONS: [&str; 3] = ["if-modified-since", "if-none-match", "if-range"];

/// A method token as HTTP allows one (RFC 9110 §9.1: tchar).
fn is_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// What earlier responses returned, for the correlation: each distinctive value once (the
/// first response that returned it), found in a later text by its first [`PREFIX`] bytes, so a
/// recording's import takes time linear in its size.
#[derive(Default)]
struct Returned {
    /// value → (the step that returned it, how to extract it).
    values: std::collections::HashMap<String, (usize, Extract)>,
    /// The first bytes of each distinctive value → the lengths of those values, longest first
    /// (a place in a text is looked up once per length, however many values share a prefix:
    /// `order-0000001`, `order-0000002`…).
    prefixes: std::collections::HashMap<[u8; PREFIX], Vec<usize>>,
}

/// The shortest value worth correlating anywhere in a text ([`distinctive`]).
const PREFIX: usize = 8;

impl Returned {
    fn add(&mut self, step: usize, value: String, how: Extract) {
        if value.len() < 2 || self.values.contains_key(&value) {
            return;
        }
        if distinctive(&value) {
            let key: [u8; PREFIX] = value.as_bytes()[..PREFIX].try_into().expect("distinctive values are long");
            let lengths = self.prefixes.entry(key).or_default();
            if let Err(at) = lengths.binary_search_by(|l| value.len().cmp(l)) {
                lengths.insert(at, value.len());
            }
        }
        self.values.insert(value, (step, how));
    }

    /// What a response returns, for the requests after it (its step is `step`): its Location
    /// and ETag headers, the leaves of a JSON body, the distinctive hidden fields of an HTML one.
    fn record(&mut self, step: usize, response: &Value) {
        for h in response["headers"].as_array().into_iter().flatten() {
            let (Some(n), Some(v)) = (h["name"].as_str(), h["value"].as_str()) else { continue };
            if n.eq_ignore_ascii_case("location") || n.eq_ignore_ascii_case("etag") {
                self.add(step, v.to_string(), Extract::Header(n.to_string()));
            }
        }
        let content = &response["content"];
        let mime = content["mimeType"].as_str().unwrap_or_default();
        let Some(text) = content["text"].as_str() else { return };
        let decoded;
        let text = if content["encoding"] == "base64" {
            decoded = base64_decode(text);
            decoded.as_str()
        } else {
            text
        };
        if mime.contains("json")
            && let Ok(v) = serde_json::from_str::<Value>(text)
        {
            let mut found = Vec::new();
            leaves(&v, String::new(), &mut found);
            for (p, value) in found {
                self.add(step, value, Extract::Json(if p.is_empty() { "$".into() } else { p }));
            }
        } else if mime.contains("html") {
            for (field, value) in form_fields(text) {
                if distinctive(&value) {
                    let regex = format!("name=\"{}\"[^>]*value=\"([^\"]*)\"", regex_literal(&field));
                    self.add(step, value, Extract::Regex(regex, field));
                }
            }
        }
    }

    /// `text` with each distinctive value an earlier response returned (the longest where
    /// several start at one place) as `{{var}}`, or — `credential` — a credential whose whole
    /// value (`Bearer <value>`) one returned; `var` names the extractor on its step.
    fn correlate(&self, text: &mut String, credential: bool, mut var: impl FnMut(usize, &Extract) -> String) {
        if credential {
            let value = text.rsplit(' ').next().unwrap_or(text.as_str()).to_string();
            if let Some((step, how)) = self.values.get(&value) {
                let name = var(*step, how);
                let cut = text.len() - value.len();
                text.replace_range(cut.., &format!("{{{{{name}}}}}"));
                return;
            }
        }
        if self.prefixes.is_empty() || text.len() < PREFIX {
            return;
        }
        let bytes = text.as_bytes();
        let mut out = String::new();
        let (mut i, mut last) = (0, 0);
        while i + PREFIX <= bytes.len() {
            let key: [u8; PREFIX] = bytes[i..i + PREFIX].try_into().expect("PREFIX bytes");
            let found = self.prefixes.get(&key).and_then(|lengths| {
                lengths.iter().find_map(|l| {
                    let candidate = text.get(i..i + l)?;
                    self.values.get_key_value(candidate).map(|(v, _)| v)
                })
            });
            match found {
                Some(value) => {
                    let (step, how) = &self.values[value];
                    out.push_str(&text[last..i]);
                    out.push_str(&format!("{{{{{}}}}}", var(*step, how)));
                    i += value.len();
                    last = i;
                }
                None => i += 1,
            }
        }
        if last > 0 {
            out.push_str(&text[last..]);
            *text = out;
        }
    }
}

/// The hidden form fields of an HTML page (`<input type="hidden" name="csrf" value="…">`), as
/// (name, value): a CSRF token a later form post sends.
fn form_fields(html: &str) -> Vec<(String, String)> {
    let attr = |tag: &str, name: &str| {
        let lower = tag.to_ascii_lowercase();
        let at = lower.find(&format!(" {name}="))? + name.len() + 2;
        let rest = &tag[at..];
        let quote = rest.chars().next().filter(|q| *q == '"' || *q == '\'')?;
        rest[1..].find(quote).map(|end| rest[1..1 + end].to_string())
    };
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find("<input") {
        let tag_end = rest[at..].find('>').map_or(rest.len(), |e| at + e);
        let tag = &rest[at..tag_end];
        if let (Some(name), Some(value)) = (attr(tag, "name"), attr(tag, "value"))
            && attr(tag, "type").is_some_and(|t| t.eq_ignore_ascii_case("hidden"))
        {
            out.push((name, value));
        }
        rest = &rest[tag_end..];
    }
    out
}

/// `text` as a regular expression matching it literally.
fn regex_literal(text: &str) -> String {
    text.chars().map(|c| if "\\.+*?()|[]{}^$".contains(c) { format!("\\{c}") } else { c.to_string() }).collect()
}

/// A recorded body from its `params` (a form or multipart post whose `text` the browser left
/// out): a form's fields encoded in order, a multipart body's parts (files by name, to put beside
/// the scenario).
fn params_body(post: &Value, at: &str, warnings: &mut Vec<String>) -> (Option<String>, Vec<Part>) {
    let params = post["params"].as_array().map(Vec::as_slice).unwrap_or_default();
    if params.is_empty() {
        return (None, Vec::new());
    }
    let mime = post["mimeType"].as_str().unwrap_or_default().to_ascii_lowercase();
    let field = |p: &Value, k: &str| p[k].as_str().map(str::to_string);
    if mime.contains("multipart") {
        let parts = params
            .iter()
            .map(|p| {
                let name = field(p, "name").unwrap_or_default();
                match field(p, "fileName").filter(|f| !f.is_empty()) {
                    Some(file) => {
                        warnings.push(format!("{at}: the file `{file}` of part `{name}` is not in the recording: put it beside the scenario"));
                        Part {
                            name,
                            file: Some(file.clone()),
                            filename: Some(file),
                            content_type: field(p, "contentType"),
                            ..Part::default()
                        }
                    }
                    None => Part { name, value: Some(field(p, "value").unwrap_or_default()), ..Part::default() },
                }
            })
            .collect();
        return (None, parts);
    }
    let pairs: Vec<(String, String)> =
        params.iter().map(|p| (field(p, "name").unwrap_or_default(), field(p, "value").unwrap_or_default())).collect();
    (Some(form_encoded(&pairs)), Vec::new())
}

/// `pairs` as a browser encodes a form (`application/x-www-form-urlencoded`): letters, digits
/// and `*-._` as they are, a space as `+`, every other byte `%XX`; `&` between the pairs.
fn form_encoded(pairs: &[(String, String)]) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => (b as char).to_string(),
                b' ' => "+".to_string(),
                b => format!("%{b:02X}"),
            })
            .collect()
    };
    pairs.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect::<Vec<_>>().join("&")
}

/// Imports a HAR recording from `source`; `keep_static` keeps scripts, styles and images.
pub(crate) fn har(text: &str, source: &str, keep_static: bool) -> Result<Imported, String> {
    let har: Value = serde_json::from_str(text).map_err(|e| format!("{source}: not a HAR recording (JSON): {e}"))?;
    let entries =
        har["log"]["entries"].as_array().ok_or_else(|| format!("{source}: no `log.entries` (not a HAR file)"))?;
    let mut warnings = Vec::new();
    let kept = kept_entries(entries, keep_static, &mut warnings);
    if kept.is_empty() {
        return Err(format!("{source}: no request to import"));
    }
    // Each request's URL without its user-info (a credential, sent as a header).
    let urls: Vec<(String, Option<String>)> =
        kept.iter().map(|e| strip_user_info(e["request"]["url"].as_str().unwrap_or_default())).collect();
    let origin = |url: &str| {
        url.split_once("://").map(|(s, r)| format!("{s}://{}", r.split(['/', '?', '#']).next().unwrap_or(r)))
    };
    let first = origin(&urls[0].0);
    let base = urls.iter().all(|(u, _)| origin(u) == first).then(|| first.clone()).flatten();
    let mut recording = Recording { base, warnings, ..Recording::default() };
    for (i, (e, (url, user_info))) in kept.iter().zip(urls).enumerate() {
        recording.step(i, e, url, user_info);
    }
    Ok(recording.imported(source, &kept))
}

/// The entries to import, in order: http(s) requests with a method, static assets left out
/// unless `keep_static` (or unless they are all there is); what is left out listed.
fn kept_entries<'a>(entries: &'a [Value], keep_static: bool, warnings: &mut Vec<String>) -> Vec<&'a Value> {
    let mut kept: Vec<&Value> = Vec::new();
    let mut assets: Vec<&Value> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let url = e["request"]["url"].as_str().unwrap_or_default();
        let method = e["request"]["method"].as_str().unwrap_or("GET");
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            if !url.is_empty() {
                warnings.push(format!(
                    "entry {}: `{}` is not http(s); left out",
                    i + 1,
                    url.chars().take(60).collect::<String>()
                ));
            }
            continue;
        }
        if !is_token(method) {
            warnings.push(format!("entry {}: `{method}` is not an HTTP method; left out", i + 1));
            continue;
        }
        if !keep_static && is_static(e) {
            assets.push(e);
            continue;
        }
        kept.push(e);
    }
    if kept.is_empty() && !assets.is_empty() {
        warnings.push(format!(
            "the recording holds only static assets (scripts, styles, images, fonts): their {} request(s) are kept",
            assets.len()
        ));
        kept = std::mem::take(&mut assets);
    }
    if !assets.is_empty() {
        warnings.push(format!(
            "{} static asset request(s) (scripts, styles, images, fonts) left out (--keep-static keeps them)",
            assets.len()
        ));
    }
    kept
}

/// A recording's import under way: the steps made so far, what their responses returned, and
/// what the file's head will say.
#[derive(Default)]
struct Recording {
    /// The origin every request has, when they have one (`{{baseUrl}}`).
    base: Option<String>,
    warnings: Vec<String>,
    secrets: Secrets,
    steps: Vec<Step>,
    returned: Returned,
    /// The extractors' variable names taken.
    taken: BTreeMap<String, usize>,
    /// The step names taken.
    names: BTreeMap<String, usize>,
    /// Which requests' UUIDs the client made are `uuid()`.
    generated: Vec<String>,
    /// How many requests sent conditions from the browser's cache.
    conditional: usize,
}

impl Recording {
    /// The step of request `i` (entry `e`, its URL without the user-info, and that user-info):
    /// its values correlated with what earlier responses returned, credentials from the
    /// environment; then what its response returns, for the requests after it.
    fn step(&mut self, i: usize, e: &Value, url: String, user_info: Option<String>) {
        let before = self.warnings.len();
        let req = &e["request"];
        let method = req["method"].as_str().unwrap_or("GET").to_ascii_uppercase();
        let host = host_of(&url);
        let at = format!("request {}", i + 1);
        let mut url = match &self.base {
            Some(b) => format!("{{{{baseUrl}}}}{}", &url[b.len()..]),
            None => url,
        };
        if url == "{{baseUrl}}" || url.starts_with("{{baseUrl}}?") {
            url.insert(11, '/');
        }
        let (mut headers, was_conditional) = request_headers(req, &at, &mut self.warnings);
        self.conditional += usize::from(was_conditional);
        let post = &req["postData"];
        let (mut body, mut multipart) = match post["text"].as_str().filter(|b| !b.is_empty()) {
            Some(text) => (Some(text.to_string()), Vec::new()),
            None => params_body(post, &at, &mut self.warnings),
        };
        if !multipart.is_empty() {
            // The engine draws its own boundary.
            headers.retain(|(n, _)| !n.eq_ignore_ascii_case("content-type"));
        }
        self.correlate(&mut url, &mut headers, body.as_mut(), &mut multipart);
        // A UUID the page made itself (no response returned it): a new one on every run, as
        // the page would make (an order id recorded once is a duplicate the second time).
        let mut fresh = body.as_mut().map_or(0, fresh_uuids);
        for (n, v) in headers.iter_mut() {
            if !is_credential(n) {
                fresh += fresh_uuids(v);
            }
        }
        if fresh > 0 {
            self.generated.push(format!("request {}: {fresh} UUID(s) the client made are `uuid()`", i + 1));
        }
        // What is still a credential after the correlation comes from the environment.
        for (n, v) in headers.iter_mut() {
            *v = self.secrets.header(host.as_deref(), n, v, &at);
        }
        if let Some(user) = user_info {
            let (name, value) = self.secrets.user_info(host.as_deref(), &user, &at);
            if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                headers.push((name, value));
            }
        }
        let url = self.secrets.query(&url, host.as_deref(), &at);
        let body = body.map(|b| self.secrets.body(&b, host.as_deref(), &at));
        // The comment quotes the URL as sent, its credentials as the step sends them.
        let shown = match &self.base {
            Some(b) => url.replacen("{{baseUrl}}", b, 1),
            None => url.clone(),
        };
        let path = url.trim_start_matches("{{baseUrl}}").split('?').next().unwrap_or("/").to_string();
        let name = unique_name(&mut self.names, format!("{method} {path}"));
        let recorded = e["response"]["status"].as_u64().unwrap_or(0) as u16;
        let status = if recorded == 304 && was_conditional { 200 } else { recorded };
        let started = e["startedDateTime"].as_str().unwrap_or_default();
        self.steps.push(Step {
            notes: self.warnings[before..].to_vec(),
            comment: format!("recorded {started}: {method} {shown} → {recorded}"),
            name,
            method,
            url,
            headers,
            body,
            multipart: std::mem::take(&mut multipart),
            status: (100..600).contains(&status).then_some(status),
            ..Step::default()
        });
        self.returned.record(i, &e["response"]);
    }

    /// Correlation: each value of a request (URL, headers, body, parts) an earlier response
    /// returned — anywhere when it is distinctive, or as the whole credential of a credential
    /// header (`Bearer <token>`) however short — as `{{var}}`, extracted on that response's step.
    fn correlate(
        &mut self,
        url: &mut String,
        headers: &mut [(String, String)],
        body: Option<&mut String>,
        multipart: &mut [Part],
    ) {
        let Self { returned, steps, taken, .. } = self;
        let mut var = |owner: usize, how: &Extract| {
            let step = &mut steps[owner];
            match step.extract.iter().find(|(_, h)| h == how) {
                Some((v, _)) => v.clone(),
                None => {
                    let v = var_name(how.hint(), taken);
                    step.extract.push((v.clone(), how.clone()));
                    v
                }
            }
        };
        returned.correlate(url, false, &mut var);
        for (n, v) in headers.iter_mut() {
            returned.correlate(v, is_credential(n), &mut var);
        }
        if let Some(b) = body {
            returned.correlate(b, false, &mut var);
        }
        for p in multipart.iter_mut() {
            if let Some(v) = p.value.as_mut() {
                returned.correlate(v, false, &mut var);
            }
        }
    }

    /// The import: the file's head (its warnings, the recorded cache conditions and cookies
    /// left out, the generated UUIDs), its top and its steps, credentials scrubbed.
    fn imported(mut self, source: &str, kept: &[&Value]) -> Imported {
        if self.conditional > 0 {
            self.warnings.push(format!(
                "{} request(s) sent If-None-Match / If-Modified-Since from the browser's cache: left out (a VU has no cache), a recorded 304 expected as 200",
                self.conditional
            ));
        }
        if kept.iter().any(|e| {
            e["request"]["headers"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|h| h["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case("cookie")))
        }) {
            self.warnings
                .push("recorded Cookie headers left out: the VU's cookie jar keeps what the responses set".into());
        }
        let mut imported = Imported { env: self.secrets.env.clone(), warnings: self.warnings, ..Imported::default() };
        let mut yaml = imported.head(source, "har", self.steps.len());
        for g in &self.generated {
            yaml.push_str(&format!("# generated: {}\n", super::one_line(g)));
        }
        let name = self.base.as_deref().and_then(|b| b.split_once("://")).map_or("recorded", |(_, h)| h);
        write_top(&mut yaml, name, self.base.as_deref());
        write_steps(&mut yaml, "recorded", &self.steps);
        imported.yaml = yaml;
        imported.scrubbed(&self.secrets)
    }
}

/// The headers a request sends as recorded, and whether it sent conditions from the
/// browser's cache: pseudo-headers, `sec-` ones, those of [`DROPPED_HEADERS`] and
/// [`CACHE_CONDITIONS`] left out, a name that is no header name listed and left out.
fn request_headers(req: &Value, at: &str, warnings: &mut Vec<String>) -> (Vec<(String, String)>, bool) {
    let mut headers: Vec<(String, String)> = Vec::new();
    let mut was_conditional = false;
    for h in req["headers"].as_array().into_iter().flatten() {
        let (Some(n), Some(v)) = (h["name"].as_str(), h["value"].as_str()) else { continue };
        let lower = n.to_ascii_lowercase();
        if n.starts_with(':') || lower.starts_with("sec-") || DROPPED_HEADERS.contains(&lower.as_str()) {
            continue;
        }
        if CACHE_CONDITIONS.contains(&lower.as_str()) {
            was_conditional = true;
            continue;
        }
        if !is_token(n) {
            warnings.push(format!("{at}: `{n}` is not a header name; left out"));
            continue;
        }
        headers.push((n.to_string(), v.to_string()));
    }
    (headers, was_conditional)
}

/// Replaces each UUID in `text` (8-4-4-4-12 hex digits) by `{{ uuid() }}`; how many.
fn fresh_uuids(text: &mut String) -> usize {
    let is_uuid = |w: &[u8]| {
        w.len() == 36
            && w.iter()
                .enumerate()
                .all(|(i, c)| if [8, 13, 18, 23].contains(&i) { *c == b'-' } else { c.is_ascii_hexdigit() })
    };
    let bytes = text.as_bytes();
    let mut out = String::new();
    let (mut i, mut last, mut n) = (0, 0, 0);
    while i + 36 <= bytes.len() {
        let boundary = |j: usize| j >= bytes.len() || !bytes[j].is_ascii_alphanumeric();
        if (i == 0 || boundary(i - 1)) && boundary(i + 36) && is_uuid(&bytes[i..i + 36]) {
            out.push_str(&text[last..i]);
            out.push_str("{{ uuid() }}");
            i += 36;
            last = i;
            n += 1;
        } else {
            i += 1;
        }
    }
    if n > 0 {
        out.push_str(&text[last..]);
        *text = out;
    }
    n
}

/// Standard base64 (HAR bodies a browser recorded as binary), lossy.
fn base64_decode(text: &str) -> String {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let mut bits = 0u32;
    let mut n = 0;
    let mut out = Vec::new();
    for v in text.bytes().filter_map(value) {
        bits = bits << 6 | u32::from(v);
        n += 6;
        if n >= 8 {
            n -= 8;
            out.push((bits >> n) as u8);
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_an_earlier_response_returned_is_extracted_and_sent_as_a_variable() {
        let recording = serde_json::json!({"log": {"entries": [
            {"startedDateTime": "t1", "request": {"method": "GET", "url": "http://127.0.0.1:8080/app.js", "headers": []},
             "response": {"status": 200, "content": {"mimeType": "application/javascript", "text": ""}}},
            {"startedDateTime": "t2", "request": {"method": "POST", "url": "http://127.0.0.1:8080/shop/login",
              "headers": [{"name": ":authority", "value": "x"}, {"name": "Content-Type", "value": "application/json"}, {"name": "Cookie", "value": "a=b"}],
              "postData": {"mimeType": "application/json", "text": "{\"user\":\"ann\",\"password\":\"pw\"}"}},
             "response": {"status": 200, "content": {"mimeType": "application/json", "text": "{\"token\":\"tok-0123456789abcdef\"}"}}},
            {"startedDateTime": "t3", "request": {"method": "POST", "url": "http://127.0.0.1:8080/shop/cart",
              "headers": [{"name": "Authorization", "value": "Bearer tok-0123456789abcdef"}],
              "postData": {"text": "{\"productId\":3}"}},
             "response": {"status": 201, "content": {"mimeType": "application/json", "encoding": "base64", "text": "eyJpdGVtcyI6MX0="}}},
            {"startedDateTime": "t4", "request": {"method": "GET", "url": "data:image/png;base64,xx", "headers": []}, "response": {"status": 200, "content": {}}}
        ]}});
        let out = har(&recording.to_string(), "r.har", false).unwrap();
        let file: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&out.yaml).unwrap();
        let steps = &file.scenarios[0].steps;
        assert_eq!(steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["POST /shop/login", "POST /shop/cart"]);
        assert_eq!(steps[0].extract.keys().collect::<Vec<_>>(), ["token"]);
        let cart = steps[1].request.as_ref().unwrap();
        assert_eq!(cart.headers["Authorization"], "Bearer {{token}}");
        assert!(!out.yaml.contains("tok-0123"), "{}", out.yaml);
        let login = steps[0].request.as_ref().unwrap();
        assert!(!login.headers.contains_key(":authority") && !login.headers.contains_key("Cookie"));
        assert!(out.warnings.iter().any(|w| w.contains("1 static asset")), "{:?}", out.warnings);
        assert!(out.warnings.iter().any(|w| w.contains("data:image/png")), "{:?}", out.warnings);
        assert_eq!(base64_decode("eyJpdGVtcyI6MX0="), "{\"items\":1}");
        assert!(har("{\"log\": {}}", "x.har", false).unwrap_err().contains("no `log.entries`"));
        assert!(har("{\"log\": {\"entr", "x.har", false).unwrap_err().contains("not a HAR recording"));
    }

    /// #33: what a browser records beyond `postData.text` and JSON bodies: a form in `params`,
    /// a multipart one, the cache's conditions, a `Location` and a CSRF field to correlate.
    #[test]
    fn params_bodies_cache_conditions_and_header_and_form_correlation() {
        let recording = r#"{"log": {"entries": [
            {"startedDateTime": "t1", "request": {"method": "GET", "url": "http://127.0.0.1:8080/form", "headers": []},
             "response": {"status": 200, "headers": [], "content": {"mimeType": "text/html",
               "text": "<form><input type=\"hidden\" name=\"csrf\" value=\"tok-7f3a9c2e1b\"></form>"}}},
            {"startedDateTime": "t2", "request": {"method": "POST", "url": "http://127.0.0.1:8080/orders",
               "headers": [{"name": "Content-Type", "value": "application/x-www-form-urlencoded"}],
               "postData": {"mimeType": "application/x-www-form-urlencoded",
                 "params": [{"name": "csrf", "value": "tok-7f3a9c2e1b"}, {"name": "note", "value": "a b&c"}]}},
             "response": {"status": 201, "headers": [{"name": "Location", "value": "/orders/ord-000123456"}], "content": {}}},
            {"startedDateTime": "t3", "request": {"method": "GET", "url": "http://127.0.0.1:8080/orders/ord-000123456",
               "headers": [{"name": "If-None-Match", "value": "\"e1\""}, {"name": "X-Trace", "value": "0b7a4c52-3f7e-4d1a-9c33-2a1f6d5e8b90"}]},
             "response": {"status": 304, "headers": [], "content": {}}},
            {"startedDateTime": "t4", "request": {"method": "POST", "url": "http://127.0.0.1:8080/upload",
               "headers": [{"name": "Content-Type", "value": "multipart/form-data; boundary=xyz"}],
               "postData": {"mimeType": "multipart/form-data; boundary=xyz",
                 "params": [{"name": "title", "value": "cat"}, {"name": "img", "fileName": "cat.png", "contentType": "image/png"}]}},
             "response": {"status": 200, "headers": [], "content": {}}}
        ]}}"#;
        let out = har(recording, "h.har", false).unwrap();
        let file = stampede_engine::parse_str(&out.yaml, std::path::Path::new("h.yaml")).unwrap();
        let steps = &file.scenarios[0].steps;
        let req = |i: usize| steps[i].request.as_ref().unwrap();
        assert_eq!(
            steps[0].extract["csrf"].regex.as_deref(),
            Some("name=\"csrf\"[^>]*value=\"([^\"]*)\""),
            "{}",
            out.yaml
        );
        assert_eq!(req(1).body.as_deref(), Some("csrf={{csrf}}&note=a+b%26c"));
        assert_eq!(steps[1].extract["Location"].header.as_deref(), Some("Location"));
        assert_eq!(req(2).url, "{{baseUrl}}{{Location}}");
        assert!(!req(2).headers.contains_key("If-None-Match"), "the cache's condition is not replayed");
        assert_eq!(req(2).headers["X-Trace"], "{{ uuid() }}", "a client-made id in a header is fresh");
        assert_eq!(
            steps[2].check.as_ref().and_then(|c| c.status.as_ref()).map(|s| format!("{s:?}")),
            Some("One(Code(200))".into())
        );
        let parts = req(3).multipart.as_ref().unwrap();
        assert_eq!((parts[0].value.as_deref(), parts[1].file.as_deref()), (Some("cat"), Some("cat.png")));
        assert!(!req(3).headers.contains_key("Content-Type"), "the engine draws its own boundary");
        assert!(out.warnings.iter().any(|w| w.contains("`cat.png`")), "{:?}", out.warnings);
    }
}
