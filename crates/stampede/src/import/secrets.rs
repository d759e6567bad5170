//! The one rule every importer follows for credentials: what is one ([`is_credential`]), and the
//! environment variable it becomes ([`var_name`], [`Secrets`]). A credential is a header
//! (`Authorization`, `Proxy-Authorization`, `Cookie`, `X-Api-Key`, `*-Token`, `*-Secret`…), a
//! query key, a JSON or form body field or a variable (`password`, `api_key`, `access_token`,
//! `session_id`, `client_secret`, `sig`…), a URL's user-info, or an option's value (curl's `-u`,
//! `--oauth2-bearer`, `-b`). Its value is never written, in a step or in a comment: the step
//! sends `{{env.NAME}}`, one variable per host and credential (`API_EXAMPLE_COM_AUTHORIZATION`,
//! `OTHER_HOST_AUTHORIZATION`), the same one wherever the same value goes to the same host.

use std::collections::BTreeMap;

pub(crate) use stampede_model::secrets::{is_credential, words};

/// The environment variable of `credential` sent to `host`: their words upper-case, joined by
/// `_` (`api.example.com` and `X-Api-Key` → `API_EXAMPLE_COM_X_API_KEY`; `127.0.0.1` and
/// `Authorization` → `HOST_127_0_0_1_AUTHORIZATION`, as a name may not start with a digit).
/// Without a host (a variable of the whole file), the credential's words alone.
pub(crate) fn var_name(host: Option<&str>, credential: &str) -> String {
    let upper = |s: &str| words(s).join("_").to_ascii_uppercase();
    let credential = match upper(credential) {
        c if c.is_empty() => "SECRET".to_string(),
        c => c,
    };
    let host = host.map(|h| upper(&h.to_ascii_lowercase())).filter(|h| !h.is_empty());
    let name = match host {
        Some(h) if h.starts_with(|c: char| c.is_ascii_digit()) => format!("HOST_{h}_{credential}"),
        Some(h) => format!("{h}_{credential}"),
        None => credential,
    };
    if name.starts_with(|c: char| c.is_ascii_digit()) { format!("_{name}") } else { name }
}

/// The host of an absolute URL, lower-case, without user-info or port
/// (`https://u:p@Api.Example.com:8443/x` → `api.example.com`); `None` for a relative or
/// templated one.
pub(crate) fn host_of(url: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(v6),
        None => authority.split(':').next().unwrap_or(authority),
    };
    (!host.is_empty() && !host.contains(['{', '}', '$'])).then(|| host.to_ascii_lowercase())
}

/// A URL without its user-info (`https://ann:pw@host/x` → `https://host/x`), and the user-info.
pub(crate) fn strip_user_info(url: &str) -> (String, Option<String>) {
    let Some((scheme, rest)) = url.split_once("://") else { return (url.to_string(), None) };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rsplit_once('@') {
        Some((user, host)) => (format!("{scheme}://{host}{}", &rest[end..]), Some(user.to_string())),
        None => (url.to_string(), None),
    }
}

/// The credentials one import met: the variables they became and where each was met.
#[derive(Debug, Default)]
pub(crate) struct Secrets {
    /// `NAME` → where it was met (`request 2: header Authorization`); never the value. Importers
    /// add the other variables their output reads (a Postman environment's) here too.
    pub(crate) env: BTreeMap<String, String>,
    /// (host, credential lower-case, value) → `NAME`.
    names: BTreeMap<(String, String, String), String>,
    /// Each value taken → its `NAME`, to keep it out of comments and warnings.
    values: BTreeMap<String, String>,
}

impl Secrets {
    /// The variable for `credential` sent to `host` with `value`: one per host, credential and
    /// value (another value, or the same name coming from another host's credential, gets `_2`,
    /// `_3`…), deterministic in the order they are met. `from` says where (kept from the first).
    pub(crate) fn var(&mut self, host: Option<&str>, credential: &str, value: &str, from: String) -> String {
        let key = (host.unwrap_or_default().to_string(), credential.to_ascii_lowercase(), value.to_string());
        let name = match self.names.get(&key) {
            Some(name) => name.clone(),
            None => {
                let base = var_name(host, credential);
                let name = (1..)
                    .map(|n| if n == 1 { base.clone() } else { format!("{base}_{n}") })
                    .find(|n| !self.env.contains_key(n))
                    .unwrap_or(base);
                self.names.insert(key, name.clone());
                name
            }
        };
        self.env.entry(name.clone()).or_insert(from);
        if !value.is_empty() {
            self.values.insert(value.to_string(), name.clone());
        }
        name
    }

    /// `{{env.NAME}}` for a credential the input names but does not hold (an OpenAPI security
    /// scheme): `which` tells one from another, and is no secret to keep out of comments.
    pub(crate) fn take_unheld(&mut self, host: Option<&str>, credential: &str, which: &str, from: String) -> String {
        let name = self.var(host, credential, which, from);
        self.values.remove(which);
        format!("{{{{env.{name}}}}}")
    }

    /// `{{env.NAME}}` for [`Secrets::var`].
    pub(crate) fn take(&mut self, host: Option<&str>, credential: &str, value: &str, from: String) -> String {
        format!("{{{{env.{}}}}}", self.var(host, credential, value, from))
    }

    /// A header's value as a step sends it: a credential header's from the environment (an
    /// `Authorization`'s scheme kept: `Bearer {{env.NAME}}`), any other header's, or one a
    /// template already makes (`Bearer {{token}}`), as given.
    pub(crate) fn header(&mut self, host: Option<&str>, name: &str, value: &str, at: &str) -> String {
        if !is_credential(name) || value.contains("{{") || value.is_empty() {
            return value.to_string();
        }
        let from = format!("{at}: header {name}");
        let lower = name.to_ascii_lowercase();
        if lower == "authorization" || lower == "proxy-authorization" {
            let scheme = value.split_once(' ').filter(|(scheme, credential)| {
                !scheme.is_empty()
                    && scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                    && !credential.trim().is_empty()
                    && !credential.trim().contains(char::is_whitespace)
            });
            if let Some((scheme, credential)) = scheme {
                return format!("{scheme} {}", self.take(host, name, credential.trim(), format!("{from} ({scheme})")));
            }
        }
        self.take(host, name, value, from)
    }

    /// The `Authorization` header a URL's user-info (`user:password`) becomes.
    pub(crate) fn user_info(&mut self, host: Option<&str>, user_info: &str, at: &str) -> (String, String) {
        let from = format!("{at}: the URL's user-info (set it to user:password, base64)");
        ("Authorization".to_string(), format!("Basic {}", self.take(host, "Authorization", user_info, from)))
    }

    /// `a=1&api_key=…` with each credential's value from the environment (one a template makes
    /// kept); `what` names the pairs (`query`, `form field`).
    pub(crate) fn pairs(&mut self, text: &str, host: Option<&str>, at: &str, what: &str) -> String {
        text.split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) if is_credential(k) && !v.is_empty() && !v.contains("{{") => {
                    format!("{k}={}", self.take(host, k, v, format!("{at}: {what} {k}")))
                }
                _ => pair.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&")
    }

    /// A URL (absolute or `{{baseUrl}}/…`) with its query's credentials from the environment.
    pub(crate) fn query(&mut self, url: &str, host: Option<&str>, at: &str) -> String {
        let (url, fragment) = match url.split_once('#') {
            Some((u, f)) => (u, Some(f)),
            None => (url, None),
        };
        let mut out = match url.split_once('?') {
            Some((path, query)) => format!("{path}?{}", self.pairs(query, host, at, "query")),
            None => url.to_string(),
        };
        if let Some(f) = fragment {
            out.push('#');
            out.push_str(f);
        }
        out
    }

    /// An absolute URL without its user-info and with its query's credentials from the
    /// environment, and the `Authorization` header its user-info became.
    pub(crate) fn url(&mut self, url: &str, at: &str) -> (String, Option<(String, String)>) {
        let host = host_of(url);
        let (url, user) = strip_user_info(url);
        let auth = user.map(|u| self.user_info(host.as_deref(), &u, at));
        (self.query(&url, host.as_deref(), at), auth)
    }

    /// A value a key holds (a query parameter, a form field, a variable): from the environment
    /// when the key is a credential's and the value is not a template already.
    pub(crate) fn field(
        &mut self,
        host: Option<&str>,
        key: &str,
        value: &str,
        from: impl FnOnce() -> String,
    ) -> String {
        if is_credential(key) && !value.is_empty() && !value.contains("{{") {
            self.take(host, key, value, from())
        } else {
            value.to_string()
        }
    }

    /// A JSON value's credential fields (strings and numbers, at any depth) from the environment.
    pub(crate) fn json(&mut self, value: &mut serde_json::Value, host: Option<&str>, at: &str) {
        match value {
            serde_json::Value::Object(fields) => {
                for (k, v) in fields.iter_mut() {
                    let raw = match v {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Number(n) => n.to_string(),
                        other => {
                            self.json(other, host, at);
                            continue;
                        }
                    };
                    if is_credential(k) && !raw.is_empty() && !raw.contains("{{") {
                        *v = self.take(host, k, &raw, format!("{at}: body field {k}")).into();
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(|i| self.json(i, host, at)),
            _ => {}
        }
    }

    /// A JSON object or form body with its credential fields from the environment; any other
    /// body as given.
    pub(crate) fn body(&mut self, data: &str, host: Option<&str>, at: &str) -> String {
        if let Ok(mut v @ serde_json::Value::Object(_)) = serde_json::from_str::<serde_json::Value>(data) {
            let before = v.clone();
            self.json(&mut v, host, at);
            if v == before {
                return data.to_string();
            }
            // In place, so the body keeps its layout (a body as API docs write it stays as sent):
            // each credential's JSON string replaced where it stands.
            let mut changed = Vec::new();
            json_changes(&before, &v, &mut changed);
            let mut out = data.to_string();
            for (old, new) in &changed {
                let quoted = serde_json::to_string(old).unwrap_or_default();
                // Only where it stands for the credential alone: the same text in another field
                // (a user name equal to the password) is that field's.
                let times = changed.iter().filter(|(o, _)| o == old).count();
                if out.matches(&quoted).count() != times {
                    return serde_json::to_string(&v).unwrap_or_default();
                }
                out = out.replace(&quoted, &serde_json::to_string(new).unwrap_or_default());
            }
            return out;
        }
        let form = !data.contains(char::is_whitespace) && data.contains('=');
        if form { self.pairs(data, host, at, "form field") } else { data.to_string() }
    }

    /// `text` with each value taken (4 characters or more, longest first) as its
    /// `{{env.NAME}}`: for comments and warnings, which quote what they came from.
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut values: Vec<(&String, &String)> = self.values.iter().filter(|(v, _)| v.len() >= 4).collect();
        values.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        let mut out = text.to_string();
        for (value, name) in values {
            out = out.replace(value.as_str(), &format!("{{{{env.{name}}}}}"));
            // As comments quote it ([`super::one_line`]).
            let quoted = super::one_line(value);
            if quoted != *value {
                out = out.replace(&quoted, &format!("{{{{env.{name}}}}}"));
            }
        }
        out
    }

    /// `yaml` with its comment lines scrubbed ([`Secrets::scrub`]).
    pub(crate) fn scrub_comments(&self, yaml: &str) -> String {
        yaml.lines()
            .map(|l| if l.trim_start().starts_with('#') { self.scrub(l) } else { l.to_string() })
            .map(|l| l + "\n")
            .collect()
    }
}

/// The string values `after` holds in place of `before`'s (the credentials [`Secrets::json`]
/// moved to the environment).
fn json_changes(before: &serde_json::Value, after: &serde_json::Value, out: &mut Vec<(String, String)>) {
    use serde_json::Value;
    match (before, after) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                if let Some(w) = b.get(k) {
                    json_changes(v, w, out);
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => a.iter().zip(b).for_each(|(v, w)| json_changes(v, w, out)),
        (v, Value::String(new)) if v != after => {
            let old = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.push((old, new.clone()));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_gets_one_valid_variable_per_host_and_value() {
        assert_eq!(var_name(Some("api.example.com"), "Authorization"), "API_EXAMPLE_COM_AUTHORIZATION");
        assert_eq!(var_name(Some("127.0.0.1"), "X-Api-Key"), "HOST_127_0_0_1_X_API_KEY");
        assert_eq!(var_name(None, "shopToken"), "SHOP_TOKEN");
        let mut s = Secrets::default();
        let a = s.var(Some("api.example.com"), "Authorization", "t1", "1".into());
        let b = s.var(Some("other.host"), "Authorization", "t2", "2".into());
        assert_eq!((a.as_str(), b.as_str()), ("API_EXAMPLE_COM_AUTHORIZATION", "OTHER_HOST_AUTHORIZATION"));
        assert_eq!(s.var(Some("api.example.com"), "authorization", "t1", "3".into()), a, "the same one again");
        assert_eq!(
            s.var(Some("api.example.com"), "Authorization", "t3", "4".into()),
            "API_EXAMPLE_COM_AUTHORIZATION_2"
        );
        // `api-example.com` makes the same name as `api.example.com`: another variable.
        assert_eq!(
            s.var(Some("api-example.com"), "Authorization", "t1", "5".into()),
            "API_EXAMPLE_COM_AUTHORIZATION_3"
        );
        assert_eq!(s.env["API_EXAMPLE_COM_AUTHORIZATION"], "1");
    }

    #[test]
    fn urls_headers_and_bodies_lose_their_credentials() {
        let mut s = Secrets::default();
        let (url, auth) = s.url("https://ann:pw-1234@Api.Example.com:8443/x?q=1&api_key=k-5678#top", "r1");
        assert_eq!(url, "https://Api.Example.com:8443/x?q=1&api_key={{env.API_EXAMPLE_COM_API_KEY}}#top");
        assert_eq!(auth.unwrap().1, "Basic {{env.API_EXAMPLE_COM_AUTHORIZATION}}");
        let host = Some("api.example.com");
        assert_eq!(
            s.header(host, "Authorization", "Bearer abcd", "r1"),
            "Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION_2}}"
        );
        assert_eq!(s.header(host, "Authorization", "Bearer {{token}}", "r1"), "Bearer {{token}}");
        assert_eq!(s.header(host, "Accept", "text/html", "r1"), "text/html");
        let body = s.body(r#"{"user":"ann","auth":{"password":"pw-1234","pin":1}}"#, host, "r2");
        assert_eq!(body, r#"{"user":"ann","auth":{"password":"{{env.API_EXAMPLE_COM_PASSWORD}}","pin":1}}"#);
        assert_eq!(s.body("a=1&token=t-9999", host, "r3"), "a=1&token={{env.API_EXAMPLE_COM_TOKEN}}");
        // A user name equal to the password stays the user's.
        assert_eq!(
            s.body("{\"user\": \"same\", \"password\": \"same\"}", host, "r4"),
            "{\"password\":\"{{env.API_EXAMPLE_COM_PASSWORD_2}}\",\"user\":\"same\"}"
        );
        assert_eq!(s.body("plain text", host, "r3"), "plain text");
        assert_eq!(
            s.scrub("# GET /?api_key=k-5678 pw-1234"),
            "# GET /?api_key={{env.API_EXAMPLE_COM_API_KEY}} {{env.API_EXAMPLE_COM_PASSWORD}}"
        );
    }
}
