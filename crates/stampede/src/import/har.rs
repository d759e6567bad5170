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
use super::{Imported, Step, unique_name, write_steps, write_top};

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

/// Imports a HAR recording from `source`; `keep_static` keeps scripts, styles and images.
pub(crate) fn har(text: &str, source: &str, keep_static: bool) -> Result<Imported, String> {
    let har: Value = serde_json::from_str(text).map_err(|e| format!("{source}: not a HAR recording (JSON): {e}"))?;
    let entries =
        har["log"]["entries"].as_array().ok_or_else(|| format!("{source}: no `log.entries` (not a HAR file)"))?;
    let mut warnings = Vec::new();
    let mut secrets = Secrets::default();
    let mut skipped = 0;
    let mut kept: Vec<&Value> = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let url = e["request"]["url"].as_str().unwrap_or_default();
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
        if !keep_static && is_static(e) {
            skipped += 1;
            continue;
        }
        kept.push(e);
    }
    if skipped > 0 {
        warnings.push(format!(
            "{skipped} static asset request(s) (scripts, styles, images, fonts) left out (--keep-static keeps them)"
        ));
    }
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
    // What each response returned, for the correlation: (entry index, JSON path, value).
    let mut returned: Vec<(usize, String, String)> = Vec::new();
    let mut taken = BTreeMap::new();
    let mut steps: Vec<Step> = Vec::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut generated = Vec::new();
    for (i, e) in kept.iter().enumerate() {
        let req = &e["request"];
        let method = req["method"].as_str().unwrap_or("GET").to_ascii_uppercase();
        let (url, user_info) = urls[i].clone();
        let host = host_of(&url);
        let at = format!("request {}", i + 1);
        let mut url = match &base {
            Some(b) => format!("{{{{baseUrl}}}}{}", &url[b.len()..]),
            None => url,
        };
        if url == "{{baseUrl}}" || url.starts_with("{{baseUrl}}?") {
            url.insert(11, '/');
        }
        let mut headers: Vec<(String, String)> = Vec::new();
        for h in req["headers"].as_array().into_iter().flatten() {
            let (Some(n), Some(v)) = (h["name"].as_str(), h["value"].as_str()) else { continue };
            let lower = n.to_ascii_lowercase();
            if n.starts_with(':') || lower.starts_with("sec-") || DROPPED_HEADERS.contains(&lower.as_str()) {
                continue;
            }
            headers.push((n.to_string(), v.to_string()));
        }
        let mut body = req["postData"]["text"].as_str().map(str::to_string).filter(|b| !b.is_empty());
        // Correlation: a value an earlier response returned — anywhere when it is distinctive,
        // or as the whole credential of a credential header (`Bearer <token>`) however short.
        let mut correlate = |text: &mut String, credential: bool, steps: &mut Vec<Step>| {
            for (at, path, value) in returned.iter() {
                let whole_credential = credential
                    && value.len() >= 2
                    && (text.as_str() == value.as_str() || text.ends_with(&format!(" {value}")));
                if !(whole_credential || distinctive(value) && text.contains(value.as_str())) {
                    continue;
                }
                let owner = &mut steps[*at];
                let var = match owner.extract.iter().find(|(_, p)| p == path) {
                    Some((v, _)) => v.clone(),
                    None => {
                        let v = var_name(path, &mut taken);
                        owner.extract.push((v.clone(), path.clone()));
                        v
                    }
                };
                *text = text.replace(value.as_str(), &format!("{{{{{var}}}}}"));
            }
        };
        correlate(&mut url, false, &mut steps);
        for (n, v) in headers.iter_mut() {
            correlate(v, is_credential(n), &mut steps);
        }
        if let Some(b) = body.as_mut() {
            correlate(b, false, &mut steps);
            // A UUID the page made itself (no response returned it): a new one on every run, as
            // the page would make (an order id recorded once is a duplicate the second time).
            let fresh = fresh_uuids(b);
            if fresh > 0 {
                generated.push(format!("request {}: {fresh} UUID(s) the client made are `uuid()`", i + 1));
            }
        }
        // What is still a credential after the correlation comes from the environment.
        for (n, v) in headers.iter_mut() {
            *v = secrets.header(host.as_deref(), n, v, &at);
        }
        if let Some(user) = user_info {
            let (name, value) = secrets.user_info(host.as_deref(), &user, &at);
            if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
                headers.push((name, value));
            }
        }
        let url = secrets.query(&url, host.as_deref(), &at);
        let body = body.map(|b| secrets.body(&b, host.as_deref(), &at));
        // The comment quotes the URL as sent, its credentials as the step sends them.
        let shown = match &base {
            Some(b) => url.replacen("{{baseUrl}}", b, 1),
            None => url.clone(),
        };
        let path = url.trim_start_matches("{{baseUrl}}").split('?').next().unwrap_or("/").to_string();
        let name = unique_name(&mut names, format!("{method} {path}"));
        let status = e["response"]["status"].as_u64().unwrap_or(0) as u16;
        let started = e["startedDateTime"].as_str().unwrap_or_default();
        steps.push(Step {
            comment: format!("recorded {started}: {method} {shown} → {status}"),
            name,
            method,
            url,
            headers,
            body,
            status: (100..600).contains(&status).then_some(status),
            ..Step::default()
        });
        let content = &e["response"]["content"];
        if content["mimeType"].as_str().is_some_and(|m| m.contains("json"))
            && let Some(text) = content["text"].as_str()
        {
            let decoded;
            let text = if content["encoding"] == "base64" {
                decoded = base64_decode(text);
                decoded.as_str()
            } else {
                text
            };
            if let Ok(v) = serde_json::from_str::<Value>(text) {
                let mut found = Vec::new();
                leaves(&v, String::new(), &mut found);
                returned
                    .extend(found.into_iter().map(|(p, value)| (i, if p.is_empty() { "$".into() } else { p }, value)));
            }
        }
    }
    if kept.iter().any(|e| {
        e["request"]["headers"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|h| h["name"].as_str().is_some_and(|n| n.eq_ignore_ascii_case("cookie")))
    }) {
        warnings.push("recorded Cookie headers left out: the VU's cookie jar keeps what the responses set".into());
    }
    let mut imported = Imported { env: secrets.env.clone(), warnings, ..Imported::default() };
    let mut yaml = imported.head(source, "har", steps.len());
    for g in &generated {
        yaml.push_str(&format!("# generated: {}\n", super::one_line(g)));
    }
    let name = base.as_deref().and_then(|b| b.split_once("://")).map_or("recorded", |(_, h)| h);
    write_top(&mut yaml, name, base.as_deref());
    write_steps(&mut yaml, "recorded", &steps);
    imported.yaml = yaml;
    Ok(imported.scrubbed(&secrets))
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
}
