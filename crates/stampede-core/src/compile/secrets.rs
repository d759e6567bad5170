//! What an error sample may not keep: the values of credential headers, cookies and query
//! keys ([`stampede_model::secrets::is_credential`]), and every value that came from the
//! environment (`{{env.NAME}}`, where a cluster puts its Secrets) or from setup. A sample is
//! redacted when it is taken, on the worker, so no report, ConfigMap, status, Event or log
//! made from it can hold them; each redaction leaves a visible mark naming what it hid.

use stampede_model::secrets::{REDACTED, is_credential};

/// Values shorter than this are not searched for: `1` or `on` from the environment is no
/// credential, and hiding it everywhere would blank out half a report.
pub const SHORTEST_SECRET: usize = 4;

/// The secret values of a run, each with the name its mark shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redactor {
    /// Longest first, so that a value holding another is hidden whole.
    values: Vec<(String, String)>,
}

impl Redactor {
    /// A redactor for `values` (value, where it came from: `env.TOKEN`, `setup.session`).
    pub fn new(values: impl IntoIterator<Item = (String, String)>) -> Redactor {
        let mut values: Vec<(String, String)> =
            values.into_iter().filter(|(v, _)| v.len() >= SHORTEST_SECRET).collect();
        // Stable: of one value given twice, the first name given stays (the run's own, before
        // an exchange's header names).
        values.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        values.dedup_by(|a, b| a.0 == b.0);
        Redactor { values }
    }

    /// This redactor with more values (setup's, once it ran).
    pub fn with(&self, more: impl IntoIterator<Item = (String, String)>) -> Redactor {
        Redactor::new(self.values.iter().cloned().chain(more))
    }

    /// The length of the longest secret value (0 with none).
    pub fn longest(&self) -> usize {
        self.values.first().map_or(0, |(v, _)| v.len())
    }

    /// `text`, which was cut short, with a secret the cut left partly visible at its end (its
    /// first [`SHORTEST_SECRET`] bytes or more) replaced by `[redacted NAME]`.
    pub fn cut_end(&self, text: &str) -> String {
        for (value, name) in &self.values {
            let partial = (SHORTEST_SECRET..value.len())
                .rev()
                .filter(|k| value.is_char_boundary(*k))
                .find(|k| text.ends_with(&value[..*k]));
            if let Some(k) = partial {
                return format!("{}[redacted {name}]", &text[..text.len() - k]);
            }
        }
        text.to_string()
    }

    /// `text` with every secret value replaced by `[redacted NAME]`.
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, name) in &self.values {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("[redacted {name}]"));
            }
        }
        out
    }

    /// A message: a request head or an answer's (`name: value` lines, up to an empty line,
    /// then a body). Credential headers keep their name and lose their value, the first line's
    /// query keeps its credential keys without their values, and every secret value anywhere
    /// is replaced.
    pub fn message(&self, message: &str) -> String {
        let mut out = String::with_capacity(message.len());
        let mut in_head = true;
        for (i, line) in message.split_inclusive('\n').enumerate() {
            let (body, end) = match line.strip_suffix("\r\n").or_else(|| line.strip_suffix('\n')) {
                Some(b) => (b, &line[b.len()..]),
                None => (line, ""),
            };
            if in_head && body.is_empty() && i > 0 {
                in_head = false;
            } else if in_head && i == 0 {
                out.push_str(&request_line(body));
                out.push_str(end);
                continue;
            } else if in_head && let Some((name, _)) = body.split_once(':').filter(|(n, _)| is_credential(n.trim())) {
                out.push_str(name);
                out.push_str(": ");
                out.push_str(REDACTED);
                out.push_str(end);
                continue;
            }
            out.push_str(line);
        }
        self.text(&out)
    }
}

/// The values of the credential headers of `message`'s head (a cookie header's cookies one
/// by one too), named by their header: hidden wherever else the same exchange shows them (an
/// answer that echoes its cookies in its body).
pub fn credentials_in(message: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in message.lines().skip(1).take_while(|l| !l.trim().is_empty()) {
        let Some((name, value)) = line.split_once(':') else { continue };
        let (name, value) = (name.trim(), value.trim());
        if !is_credential(name) {
            continue;
        }
        let lower = name.to_ascii_lowercase();
        if lower == "cookie" || lower == "set-cookie" {
            let cookies = if lower == "cookie" { value } else { value.split(';').next().unwrap_or_default() };
            for (_, v) in cookies.split(';').filter_map(|c| c.trim().split_once('=')) {
                found.push((v.trim().to_string(), lower.clone()));
            }
        }
        // `Bearer abc`: the credential without its scheme too.
        if let Some((_, token)) = value.split_once(' ') {
            found.push((token.trim().to_string(), lower.clone()));
        }
        found.push((value.to_string(), lower));
    }
    found
}

/// A request line (`GET /path?api_key=… HTTP/1.1`, or an answer's status line, left as it is)
/// with the values of credential query keys hidden.
fn request_line(line: &str) -> String {
    let Some(q) = line.find('?') else { return line.to_string() };
    let end = line[q..].find(' ').map_or(line.len(), |e| q + e);
    let query: Vec<String> = line[q + 1..end]
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((k, _)) if is_credential(&percent_decoded(k)) => format!("{k}={REDACTED}"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{}?{}{}", &line[..q], query.join("&"), &line[end..])
}

fn percent_decoded(s: &str) -> String {
    percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_keeps_its_shape_and_loses_its_credentials() {
        let r = Redactor::new([
            ("s3cr3t-token-value".to_string(), "env.API_TOKEN".to_string()),
            ("1".to_string(), "env.SHORT".to_string()),
            ("sess-0123456789".to_string(), "setup.session".to_string()),
        ]);
        let head = "POST /login?api_key=k-999&page=1&access%5Ftoken=zz HTTP/1.1\r\nhost: 127.0.0.1:1\r\n\
                    authorization: Bearer s3cr3t-token-value\r\nX-Api-Key: abcd\r\ncookie: a=b\r\n\
                    x-trace: sess-0123456789\r\n\r\n{\"user\": \"u1\", \"t\": \"s3cr3t-token-value\"}";
        assert_eq!(
            r.message(head),
            "POST /login?api_key=[redacted]&page=1&access%5Ftoken=[redacted] HTTP/1.1\r\nhost: 127.0.0.1:1\r\n\
             authorization: [redacted]\r\nX-Api-Key: [redacted]\r\ncookie: [redacted]\r\n\
             x-trace: [redacted setup.session]\r\n\r\n{\"user\": \"u1\", \"t\": \"[redacted env.API_TOKEN]\"}"
        );
        let answer = "HTTP 401\nset-cookie: sid=abc; HttpOnly\ncontent-type: text/plain\n\nno: s3cr3t-token-value";
        assert_eq!(
            r.message(answer),
            "HTTP 401\nset-cookie: [redacted]\ncontent-type: text/plain\n\nno: [redacted env.API_TOKEN]"
        );
        // A body line shaped like a header is left to the value search.
        assert_eq!(r.message("HTTP 500\n\ntoken: plain"), "HTTP 500\n\ntoken: plain");
    }

    #[test]
    fn the_credentials_of_an_exchange_are_hidden_in_its_body_too() {
        let answer = "HTTP 200\nset-cookie: sid=cookie-val-31337; Path=/\nauthorization: Bearer tok-abcdef\n\n\
                      {\"set-cookie\": \"sid=cookie-val-31337; Path=/\", \"t\": \"tok-abcdef\"}";
        let r = Redactor::default().with(credentials_in(answer));
        assert_eq!(
            r.message(answer),
            "HTTP 200\nset-cookie: [redacted]\nauthorization: [redacted]\n\n\
             {\"set-cookie\": \"[redacted set-cookie]\", \"t\": \"[redacted authorization]\"}"
        );
    }

    #[test]
    fn a_secret_a_cut_left_partly_visible_is_hidden() {
        let r = Redactor::new([("s3cr3t-token-value".to_string(), "env.T".to_string())]);
        assert_eq!(r.cut_end("token=s3cr3t-to"), "token=[redacted env.T]");
        assert_eq!(r.cut_end("token=s3c"), "token=s3c", "fewer bytes than the shortest secret");
        assert_eq!(r.cut_end("token=other"), "token=other");
    }

    #[test]
    fn a_value_holding_another_is_hidden_whole() {
        let r =
            Redactor::new([("abcd".to_string(), "env.A".to_string()), ("abcdefgh".to_string(), "env.B".to_string())]);
        assert_eq!(r.text("x abcdefgh y abcd"), "x [redacted env.B] y [redacted env.A]");
    }
}
