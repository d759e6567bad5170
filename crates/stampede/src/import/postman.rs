//! `stampede import postman`: a Postman collection (format v2.1): each request a step, in
//! order, folders flattened with their names before the request's; collection variables become
//! `vars` (`baseUrl` the scenario's), variables it does not define `{{env.NAME}}`; auth (bearer,
//! basic, API key) a header (or query key) from the environment, as is every credential the
//! collection records (headers, query keys, body fields: [`super::secrets`]); Postman's dynamic variables (`{{$guid}}`,
//! `{{$timestamp}}`, `{{$randomInt}}`) the expression language's functions. Scripts (pre-request
//! and tests) are listed as not converted.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::secrets::{Secrets, host_of, is_credential, strip_user_info};
use super::{Imported, Step, env_name, scalar, write_steps, write_top};

/// A request of the collection, flattened.
struct Request<'a> {
    /// `Folder / Request`.
    name: String,
    item: &'a Value,
    /// The nearest auth: the request's, a folder's, the collection's.
    auth: Option<&'a Value>,
}

fn flatten<'a>(
    items: &'a [Value],
    prefix: &str,
    auth: Option<&'a Value>,
    out: &mut Vec<Request<'a>>,
    warnings: &mut Vec<String>,
) {
    for item in items {
        let name = item["name"].as_str().unwrap_or("request");
        let full = if prefix.is_empty() { name.to_string() } else { format!("{prefix} / {name}") };
        let own_auth = item.get("auth").filter(|a| !a.is_null()).or(auth);
        for event in item["event"].as_array().into_iter().flatten() {
            let listen = event["listen"].as_str().unwrap_or("script");
            let lines = event["script"]["exec"].as_array().map_or(0, |l| l.len());
            if lines > 0 {
                warnings.push(format!("`{full}`: its {listen} script ({lines} line(s)) is not converted"));
            }
        }
        match item["item"].as_array() {
            Some(children) => flatten(children, &full, own_auth, out, warnings),
            None if item.get("request").is_some() => {
                let auth = item["request"].get("auth").filter(|a| !a.is_null()).or(own_auth);
                out.push(Request { name: full, item, auth });
            }
            None => warnings.push(format!("`{full}`: neither a request nor a folder; left out")),
        }
    }
}

/// Rewrites Postman's `{{name}}` references: collection variables stay (they are `vars`),
/// `baseUrl` stays, dynamic variables become functions, anything else `{{env.NAME}}` (recorded in
/// `env`).
fn templates(
    text: &str,
    vars: &BTreeSet<String>,
    at: &str,
    env: &mut BTreeMap<String, String>,
    warnings: &mut Vec<String>,
) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        let name = after[..close].trim();
        let replaced = match name {
            "$guid" | "$randomUUID" => "{{ uuid() }}".to_string(),
            "$timestamp" => "{{ unixMillis() / 1000 }}".to_string(),
            "$isoTimestamp" => "{{ now() }}".to_string(),
            "$randomInt" => "{{ randomInt(0, 1000) }}".to_string(),
            n if n.starts_with('$') => {
                warnings.push(format!("{at}: Postman's `{{{{{n}}}}}` has no equivalent; left as text"));
                format!("{{{{ '{n}' }}}}")
            }
            // Ours already (a secret this import moved to the environment).
            n if n == "baseUrl" || vars.contains(n) || n.starts_with("env.") => format!("{{{{{n}}}}}"),
            n => {
                let var = env_name(n);
                env.entry(var.clone()).or_insert_with(|| format!("{at}: variable {n} (from a Postman environment)"));
                format!("{{{{env.{var}}}}}")
            }
        };
        out.push_str(&replaced);
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// A request's URL: its `raw` text, or made of its parts when there is none; with `http://`
/// when it has no scheme (as Postman sends `localhost:3000/x`).
fn url_of(url: &Value) -> String {
    let text = match url {
        Value::String(u) => u.clone(),
        u => match u["raw"].as_str().filter(|r| !r.is_empty()) {
            Some(raw) => raw.to_string(),
            None => {
                let part = |v: &Value, sep: &str| match v {
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(sep),
                    Value::String(s) => s.clone(),
                    _ => String::new(),
                };
                let host = part(&u["host"], ".");
                if host.is_empty() {
                    return String::new();
                }
                let mut text = match u["protocol"].as_str() {
                    Some(p) => format!("{p}://{host}"),
                    None => host,
                };
                if let Some(port) = u["port"].as_str() {
                    text.push_str(&format!(":{port}"));
                }
                let path = part(&u["path"], "/");
                if !path.is_empty() {
                    text.push('/');
                    text.push_str(path.trim_start_matches('/'));
                }
                let query: Vec<String> = u["query"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|q| q["disabled"] != true)
                    .filter_map(|q| Some(format!("{}={}", q["key"].as_str()?, q["value"].as_str().unwrap_or_default())))
                    .collect();
                if !query.is_empty() {
                    text.push('?');
                    text.push_str(&query.join("&"));
                }
                text
            }
        },
    };
    let text = text.trim().to_string();
    if text.is_empty() || text.starts_with("{{") || text.contains("://") { text } else { format!("http://{text}") }
}

/// The value of the auth `key` (`[{key, value}]` as v2.1 writes them).
fn auth_value<'a>(auth: &'a Value, kind: &str, key: &str) -> Option<&'a str> {
    auth[kind].as_array()?.iter().find(|e| e["key"] == key)?["value"].as_str()
}

/// The `(key, value)` pairs of a Postman environment file (`values`, disabled ones left out),
/// or of a collection's `variable` list.
fn variables(list: &Value) -> Vec<(String, String)> {
    list.as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["enabled"] != false && v["disabled"] != true)
        .filter_map(|v| {
            let key = v["key"].as_str()?;
            let value = match &v["value"] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            Some((key.to_string(), value))
        })
        .collect()
}

/// Imports a Postman collection (v2.0 or v2.1 JSON) from `source`, with the environment `env`
/// (its text and where it came from) when one is given: its variables win over the
/// collection's, as in Postman.
pub(crate) fn postman(text: &str, source: &str, env: Option<(&str, &str)>) -> Result<Imported, String> {
    let collection: Value =
        serde_json::from_str(text).map_err(|e| format!("{source}: not a Postman collection (JSON): {e}"))?;
    let schema = collection["info"]["schema"].as_str().unwrap_or_default();
    if !schema.contains("v2.1") && !schema.contains("v2.0") {
        return Err(format!("{source}: info.schema `{schema}` is not a Postman collection v2.1 (export it as v2.1)"));
    }
    let defined = defined_variables(&collection, env)?;
    let mut c = Collection::default();
    let vars = c.vars(&defined);
    c.names = vars.keys().cloned().collect();
    let mut requests = Vec::new();
    let items = collection["item"].as_array().ok_or_else(|| format!("{source}: the collection has no `item` list"))?;
    flatten(items, "", collection.get("auth").filter(|a| !a.is_null()), &mut requests, &mut c.warnings);
    let steps: Vec<Step> = requests.iter().filter_map(|r| c.step(r)).collect();
    if steps.is_empty() {
        return Err(format!("{source}: no request with a URL to import"));
    }
    // Requests that go to `{{baseUrl}}` when the collection defines none (an environment did):
    // the origin comes from BASE_URL (or `--base-url`).
    if c.base_url.is_none() && steps.iter().any(|s| s.url.contains("{{baseUrl}}")) {
        let var = super::BASE_URL;
        c.secrets.env.insert(var.into(), "the collection's `{{baseUrl}}`, defined in no variable it has".into());
        c.base_url = Some(format!("{{{{env.{var}}}}}"));
    }
    let mut imported =
        Imported { env: c.secrets.env.clone(), warnings: c.warnings, urls: c.urls, ..Imported::default() };
    let mut yaml = imported.head(source, "postman", steps.len());
    let name = collection["info"]["name"].as_str().unwrap_or("imported");
    write_top(&mut yaml, name, c.base_url.as_deref());
    if !vars.is_empty() {
        yaml.push_str("vars:  # the collection's variables\n");
        for (k, v) in &vars {
            yaml.push_str(&format!("  {}: {}\n", scalar(k), scalar(v)));
        }
    }
    write_steps(&mut yaml, "imported", &steps);
    imported.yaml = yaml;
    Ok(imported.scrubbed(&c.secrets))
}

/// The variables a collection defines, in order, the environment's (`env`: its text and where
/// it came from) replacing the collection's of the same name.
fn defined_variables(collection: &Value, env: Option<(&str, &str)>) -> Result<Vec<(String, String)>, String> {
    let mut defined = variables(&collection["variable"]);
    if let Some((env_text, env_source)) = env {
        let environment: Value = serde_json::from_str(env_text)
            .map_err(|e| format!("{env_source}: not a Postman environment (JSON): {e}"))?;
        if !environment["values"].is_array() {
            return Err(format!("{env_source}: not a Postman environment: no `values` list"));
        }
        for (key, value) in variables(&environment["values"]) {
            defined.retain(|(k, _)| *k != key);
            defined.push((key, value));
        }
    }
    Ok(defined)
}

/// What the import knows of the whole collection: its origin (`baseUrl`) and that origin's
/// user-info, its variables' names, the secrets found, what is not converted, and the
/// environment variables that stand for an origin.
#[derive(Default)]
struct Collection {
    base_url: Option<String>,
    base_user: Option<String>,
    names: BTreeSet<String>,
    secrets: Secrets,
    warnings: Vec<String>,
    urls: BTreeSet<String>,
}

impl Collection {
    /// The `vars` of the collection's variables (`defined`), a credential's value from the
    /// environment; `baseUrl` is the origin instead, its user-info a credential.
    fn vars(&mut self, defined: &[(String, String)]) -> BTreeMap<String, String> {
        let mut vars = BTreeMap::new();
        for (key, value) in defined {
            let (key, value) = (key.as_str(), value.as_str());
            if key == "baseUrl" {
                // Its user-info is a credential: every request to it sends it as a header.
                let (url, user) = strip_user_info(value);
                self.base_url = Some(url);
                self.base_user = user;
            } else if is_credential(key) && !value.contains("{{") {
                vars.insert(key.to_string(), self.secrets.take(None, key, value, format!("collection variable {key}")));
            } else {
                vars.insert(key.to_string(), value.to_string());
            }
        }
        vars
    }

    /// `text` with Postman's `{{name}}` references rewritten ([`templates`]).
    fn templated(&mut self, text: &str, at: &str) -> String {
        templates(text, &self.names, at, &mut self.secrets.env, &mut self.warnings)
    }

    /// The step of one request: its URL, headers, auth and body, templated, credentials from
    /// the environment; `None` (listed) when it has no URL.
    fn step(&mut self, r: &Request<'_>) -> Option<Step> {
        let before = self.warnings.len();
        let at = format!("request `{}`", r.name);
        let req = &r.item["request"];
        // A request may be a bare URL string.
        let (method, url) = match req {
            Value::String(url) => ("GET".to_string(), url.clone()),
            _ => (req["method"].as_str().unwrap_or("GET").to_ascii_uppercase(), url_of(&req["url"])),
        };
        if url.is_empty() {
            self.warnings.push(format!("{at}: no URL; left out"));
            return None;
        }
        // The host the request goes to: its URL's, or the collection's baseUrl's.
        let host = host_of(&match &self.base_url {
            Some(b) => url.replace("{{baseUrl}}", b),
            None => url.clone(),
        });
        let host = host.as_deref();
        let (url, user) = strip_user_info(&url);
        let user = user.or_else(|| self.base_user.clone().filter(|_| url.contains("{{baseUrl}}")));
        let user_info = user.map(|u| self.secrets.user_info(host, &u, &at));
        let url = self.secrets.query(&url, host, &at);
        let url = self.templated(&url, &at);
        if let Some(var) = url.strip_prefix("{{env.").and_then(|r| r.split_once("}}")).map(|(v, _)| v) {
            self.urls.insert(var.to_string());
        }
        let mut headers = self.headers(req, host, &at);
        let has_auth =
            |headers: &[(String, String)]| headers.iter().any(|(h, _)| h.eq_ignore_ascii_case("authorization"));
        if let Some(auth) = user_info.filter(|_| !has_auth(&headers)) {
            headers.push(auth);
        }
        let mut query: Vec<(String, String)> = Vec::new();
        if let Some(auth) = r.auth {
            self.auth(auth, host, &at, &mut headers, &mut query);
        }
        let (body, form) = self.body(&req["body"], host, &at, &mut headers);
        Some(Step {
            notes: self.warnings[before..].to_vec(),
            comment: format!("from Postman: {}", r.name),
            name: r.name.clone(),
            method,
            url,
            query,
            headers,
            body,
            form,
            ..Step::default()
        })
    }

    /// A request's headers, disabled ones left out; templated, credentials from the environment.
    fn headers(&mut self, req: &Value, host: Option<&str>, at: &str) -> Vec<(String, String)> {
        let mut headers: Vec<(String, String)> = Vec::new();
        for h in req["header"].as_array().into_iter().flatten() {
            if h["disabled"] == true {
                continue;
            }
            let (Some(k), v) = (h["key"].as_str(), h["value"].as_str().unwrap_or_default()) else { continue };
            let value = self.secrets.header(host, k, v, at);
            headers.push((k.to_string(), self.templated(&value, at)));
        }
        headers
    }

    /// A request's auth (bearer, basic, API key) as a header, or an API key as a query
    /// parameter; its credential from the environment unless it is a `{{variable}}`; another
    /// kind listed.
    fn auth(
        &mut self,
        auth: &Value,
        host: Option<&str>,
        at: &str,
        headers: &mut Vec<(String, String)>,
        query: &mut Vec<(String, String)>,
    ) {
        match auth["type"].as_str().unwrap_or_default() {
            "bearer" => {
                let token = auth_value(auth, "bearer", "token").unwrap_or_default();
                let token = if token.contains("{{") {
                    self.templated(token, at)
                } else {
                    self.secrets.take(host, "Authorization", token, format!("{at}: bearer auth (the token)"))
                };
                headers.push(("Authorization".into(), format!("Bearer {token}")));
            }
            "basic" => {
                let user = auth_value(auth, "basic", "username").unwrap_or_default();
                let password = auth_value(auth, "basic", "password").unwrap_or_default();
                let from = format!("{at}: basic auth (set it to user:password, base64)");
                let value = self.secrets.take(host, "Authorization", &format!("{user}:{password}"), from);
                headers.push(("Authorization".into(), format!("Basic {value}")));
            }
            "apikey" => {
                let key = auth_value(auth, "apikey", "key").unwrap_or("X-Api-Key");
                let value = auth_value(auth, "apikey", "value").unwrap_or_default();
                let value = if value.contains("{{") {
                    self.templated(value, at)
                } else {
                    self.secrets.take(host, key, value, format!("{at}: API key {key}"))
                };
                if auth_value(auth, "apikey", "in") == Some("query") {
                    query.push((key.to_string(), value));
                } else {
                    headers.push((key.to_string(), value));
                }
            }
            "noauth" | "" => {}
            other => self.warnings.push(format!("{at}: auth `{other}` is not converted")),
        }
    }

    /// A request's body: raw text (a JSON one's Content-Type added to `headers` unless there),
    /// or a URL-encoded form's enabled fields; templated, credentials from the environment.
    /// Another mode is listed.
    fn body(
        &mut self,
        body: &Value,
        host: Option<&str>,
        at: &str,
        headers: &mut Vec<(String, String)>,
    ) -> (Option<String>, Vec<(String, String)>) {
        let mut body_text = None;
        let mut form = Vec::new();
        match body["mode"].as_str() {
            Some("raw") => {
                let raw = body["raw"].as_str().unwrap_or_default();
                let raw = self.secrets.body(raw, host, at);
                body_text = Some(self.templated(&raw, at));
                if body["options"]["raw"]["language"] == "json"
                    && !headers.iter().any(|(h, _)| h.eq_ignore_ascii_case("content-type"))
                {
                    headers.push(("Content-Type".into(), "application/json".into()));
                }
            }
            Some("urlencoded") => {
                for f in body["urlencoded"].as_array().into_iter().flatten().filter(|f| f["disabled"] != true) {
                    let (Some(k), v) = (f["key"].as_str(), f["value"].as_str().unwrap_or_default()) else { continue };
                    let v = self.secrets.field(host, k, v, || format!("{at}: form field {k}"));
                    let v = self.templated(&v, at);
                    form.push((k.to_string(), v));
                }
            }
            Some(mode @ ("formdata" | "file" | "graphql")) => {
                self.warnings.push(format!("{at}: a `{mode}` body is not converted"));
            }
            _ => {}
        }
        (body_text, form)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_become_vars_env_or_functions() {
        let (mut env, mut warnings) = (BTreeMap::new(), Vec::new());
        let vars: BTreeSet<String> = ["productId".to_string()].into();
        let out = templates(
            "{{baseUrl}}/p/{{productId}}?id={{$guid}}&t={{$timestamp}}&k={{apiHost}}&x={{$randomColor}}",
            &vars,
            "r",
            &mut env,
            &mut warnings,
        );
        assert_eq!(
            out,
            "{{baseUrl}}/p/{{productId}}?id={{ uuid() }}&t={{ unixMillis() / 1000 }}&k={{env.APIHOST}}&x={{ '$randomColor' }}"
        );
        assert_eq!(env.keys().collect::<Vec<_>>(), ["APIHOST"]);
        assert!(warnings[0].contains("`{{$randomColor}}` has no equivalent"), "{warnings:?}");
    }

    #[test]
    fn not_a_collection_is_said() {
        assert!(postman("[]", "x.json", None).unwrap_err().contains("is not a Postman collection v2.1"));
        assert!(postman("{", "x.json", None).unwrap_err().contains("not a Postman collection (JSON)"));
        let empty = r#"{"info": {"schema": "https://schema.getpostman.com/json/collection/v2.1.0/collection.json"}, "item": []}"#;
        assert!(postman(empty, "x.json", None).unwrap_err().contains("no request with a URL"));
    }
}
