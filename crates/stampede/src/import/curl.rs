//! `stampede import curl`: curl command lines, as browsers' "copy as cURL" and people write them.
//! Credentials (headers, `-u`, `--oauth2-bearer`, `-b`, a URL's user-info, query keys, body
//! fields) become `{{env.NAME}}` ([`super::secrets`]); options that carry one and are not
//! converted (`--proxy-user`, `--cert`…) are listed without their values.

use std::collections::BTreeMap;

use super::secrets::{Secrets, host_of, strip_user_info};
use super::{Imported, Step, unique_name, write_steps, write_top};

/// One request of a curl command line.
#[derive(Debug, Default, PartialEq)]
struct CurlRequest {
    method: Option<String>,
    url: Option<String>,
    headers: Vec<(String, String)>,
    body: Vec<String>,
    /// `-G`: the data goes in the query.
    get: bool,
    json: bool,
    insecure: bool,
    http2: bool,
    user: Option<String>,
    /// `--oauth2-bearer`: the token.
    bearer: Option<String>,
    cookie: Option<String>,
}

/// Splits shell text into words as bash would for a simple command: single quotes, double quotes
/// (with `\` before `"`, `\`, `$` and a newline), ANSI-C `$'…'` (as Chrome writes bodies),
/// backslash escapes and line continuations. Words of each command (`;`, `&&`, a newline not
/// continued) are a list of their own.
fn shell_words(text: &str) -> Result<Vec<Vec<String>>, String> {
    let mut commands = vec![Vec::new()];
    let mut word: Option<String> = None;
    let mut chars = text.chars().peekable();
    let push = |word: &mut Option<String>, commands: &mut Vec<Vec<String>>| {
        if let Some(w) = word.take() {
            commands.last_mut().unwrap().push(w);
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some('\r') if chars.peek() == Some(&'\n') => {
                    chars.next();
                }
                Some(e) => word.get_or_insert_with(String::new).push(e),
                None => {}
            },
            '\'' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => w.push(c),
                        None => return Err("a single quote is not closed".into()),
                    }
                }
            }
            '$' if chars.peek() == Some(&'\'') => {
                chars.next();
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some('\\') => match chars.next() {
                            Some('n') => w.push('\n'),
                            Some('t') => w.push('\t'),
                            Some('r') => w.push('\r'),
                            Some('x') => {
                                let hex: String = (0..2).filter_map(|_| chars.next()).collect();
                                let byte = u8::from_str_radix(&hex, 16).map_err(|_| format!("bad escape \\x{hex}"))?;
                                w.push(byte as char);
                            }
                            Some('u') => {
                                let hex: String = (0..4).filter_map(|_| chars.next()).collect();
                                let code = u32::from_str_radix(&hex, 16).map_err(|_| format!("bad escape \\u{hex}"))?;
                                w.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                            }
                            Some(e) => w.push(e),
                            None => return Err("a $'…' quote is not closed".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("a $'…' quote is not closed".into()),
                    }
                }
            }
            '"' => {
                let w = word.get_or_insert_with(String::new);
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => w.push(e),
                            Some('\n') => {}
                            Some(e) => {
                                w.push('\\');
                                w.push(e);
                            }
                            None => return Err("a double quote is not closed".into()),
                        },
                        Some(c) => w.push(c),
                        None => return Err("a double quote is not closed".into()),
                    }
                }
            }
            ' ' | '\t' | '\r' => push(&mut word, &mut commands),
            '\n' | ';' => {
                push(&mut word, &mut commands);
                commands.push(Vec::new());
            }
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                push(&mut word, &mut commands);
                commands.push(Vec::new());
            }
            '#' if word.is_none() => {
                // A comment, to the end of the line.
                for c in chars.by_ref() {
                    if c == '\n' {
                        break;
                    }
                }
                push(&mut word, &mut commands);
                commands.push(Vec::new());
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    push(&mut word, &mut commands);
    Ok(commands.into_iter().filter(|c| !c.is_empty()).collect())
}

/// Options that change nothing a load test sends (output, progress, verbosity).
const QUIET_OPTIONS: [&str; 14] = [
    "-s",
    "--silent",
    "-S",
    "--show-error",
    "-v",
    "--verbose",
    "-i",
    "--include",
    "--compressed",
    "-L",
    "--location",
    "-#",
    "--progress-bar",
    "--no-progress-meter",
];

/// Options that take a value this importer does not use.
const IGNORED_WITH_VALUE: [&str; 6] = ["-o", "--output", "-w", "--write-out", "--max-time", "-m"];

/// Options that take a value and are not converted (listed, their value skipped).
const NOT_CONVERTED_WITH_VALUE: [&str; 36] = [
    "--retry",
    "--retry-delay",
    "--retry-max-time",
    "--connect-timeout",
    "-r",
    "--range",
    "-c",
    "--cookie-jar",
    "--resolve",
    "--connect-to",
    "--interface",
    "--limit-rate",
    "-y",
    "--speed-time",
    "-Y",
    "--speed-limit",
    "--cacert",
    "--capath",
    "-F",
    "--form",
    "-T",
    "--upload-file",
    "--aws-sigv4",
    "--unix-socket",
    "--noproxy",
    "--proxy-header",
    "-K",
    "--config",
    "--netrc-file",
    "--max-redirs",
    "-D",
    "--dump-header",
    "--url-query",
    "--request-target",
    "--cert-type",
    "--key-type",
];

/// Options whose value is (or holds) a credential this importer does not use: listed, never
/// quoted. A proxy's: Stampede sends its requests straight to the target.
const CREDENTIAL_NOT_CONVERTED: [&str; 20] = [
    "-x",
    "--proxy",
    "-U",
    "--proxy-user",
    "--preproxy",
    "--socks5",
    "--socks5-hostname",
    "--socks4",
    "-E",
    "--cert",
    "--key",
    "--pass",
    "--proxy-pass",
    "--proxy-cert",
    "--proxy-key",
    "--tlsuser",
    "--tlspassword",
    "--proxy-tlsuser",
    "--proxy-tlspassword",
    "--login-options",
];

fn parse_curl(words: &[String], n: usize, warnings: &mut Vec<String>) -> Result<CurlRequest, String> {
    let mut r = CurlRequest::default();
    let mut i = 1;
    let value = |i: &mut usize, flag: &str| -> Result<String, String> {
        *i += 1;
        words.get(*i).cloned().ok_or_else(|| format!("command {n}: {flag} needs a value"))
    };
    while i < words.len() {
        let w = words[i].as_str();
        // `--header=value` and `-XPOST` forms.
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ if w.len() > 2
                && w.starts_with('-')
                && !w.starts_with("--")
                && w.is_char_boundary(2)
                && b"XHdAebuUxE".contains(&w.as_bytes()[1]) =>
            {
                (&w[..2], Some(w[2..].to_string()))
            }
            _ => (w, None),
        };
        let take = |i: &mut usize| match &inline {
            Some(v) => Ok(v.clone()),
            None => value(i, flag),
        };
        match flag {
            "-X" | "--request" => r.method = Some(take(&mut i)?.to_ascii_uppercase()),
            "-H" | "--header" => {
                let h = take(&mut i)?;
                match h.split_once(':') {
                    Some((name, v)) => r.headers.push((name.trim().to_string(), v.trim().to_string())),
                    None => warnings.push(format!("command {n}: header `{h}` has no value; left out")),
                }
            }
            "-d" | "--data" | "--data-raw" | "--data-binary" | "--data-ascii" | "--data-urlencode" => {
                let d = take(&mut i)?;
                if d.starts_with('@') && flag != "--data-raw" {
                    warnings
                        .push(format!("command {n}: {flag} {d}: a body from a file is not read; put it in the step"));
                } else {
                    r.body.push(d);
                }
            }
            "--json" => {
                r.body.push(take(&mut i)?);
                r.json = true;
            }
            "-b" | "--cookie" => {
                let c = take(&mut i)?;
                if c.contains('=') {
                    r.cookie = Some(c);
                } else {
                    warnings.push(format!("command {n}: {flag} FILE: a cookie file is not read; left out"));
                }
            }
            "-u" | "--user" => r.user = Some(take(&mut i)?),
            "--oauth2-bearer" => r.bearer = Some(take(&mut i)?),
            "-A" | "--user-agent" => r.headers.push(("User-Agent".into(), take(&mut i)?)),
            "-e" | "--referer" => r.headers.push(("Referer".into(), take(&mut i)?)),
            "--url" => r.url = Some(take(&mut i)?),
            "-G" | "--get" => r.get = true,
            "-k" | "--insecure" => r.insecure = true,
            "--http2" | "--http2-prior-knowledge" => r.http2 = true,
            "-I" | "--head" => r.method = Some("HEAD".into()),
            f if QUIET_OPTIONS.contains(&f) => {}
            f if IGNORED_WITH_VALUE.contains(&f) => {
                take(&mut i)?;
            }
            f if NOT_CONVERTED_WITH_VALUE.contains(&f) => {
                take(&mut i)?;
                warnings.push(format!("command {n}: option `{f}` is not converted"));
            }
            f if CREDENTIAL_NOT_CONVERTED.contains(&f) => {
                take(&mut i)?;
                let why = if f.contains("proxy") || f.contains("socks") || f == "-x" || f == "-U" {
                    "Stampede sends requests straight to the target, through no proxy"
                } else {
                    "a client certificate is the file's `http.tls.clientCert` and `clientKey`"
                };
                warnings.push(format!("command {n}: option `{f}` is not converted ({why}); its value is left out"));
            }
            f if f.starts_with('-') => {
                warnings.push(format!("command {n}: option `{f}` is not converted"));
            }
            url if r.url.is_none() => r.url = Some(url.to_string()),
            other => warnings.push(format!("command {n}: `{other}` (a second URL) is not converted")),
        }
        i += 1;
    }
    Ok(r)
}

/// The origin (`scheme://host[:port]`) and the rest (`/path?query`) of a URL.
fn split_url(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = url.split_once("://")?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') { format!("/{path}") } else { path.to_string() };
    (!authority.is_empty()).then(|| (format!("{scheme}://{authority}"), path))
}

/// Imports curl command lines (`text`, from `source`). Nothing usable (no curl command with a
/// URL) is an error.
pub(crate) fn curl(text: &str, source: &str) -> Result<Imported, String> {
    let commands = shell_words(text).map_err(|e| format!("{source}: {e}"))?;
    let mut warnings = Vec::new();
    let mut requests = Vec::new();
    for (i, words) in commands.iter().enumerate() {
        let n = i + 1;
        if words[0] != "curl" {
            warnings.push(format!("command {n}: `{}` is not curl; left out", words[0]));
            continue;
        }
        let mut r = parse_curl(words, n, &mut warnings).map_err(|e| format!("{source}: {e}"))?;
        // The user-info is a credential, sent as a header: no origin or comment holds it.
        r.url = r.url.map(|u| {
            let (url, user) = strip_user_info(&u);
            r.user = r.user.take().or(user);
            url
        });
        match r.url.as_deref().and_then(split_url) {
            Some(_) => requests.push((n, r)),
            None => warnings.push(format!("command {n}: no http(s) URL; left out")),
        }
    }
    if requests.is_empty() {
        return Err(format!("{source}: no curl command with a URL to import"));
    }
    let origins: Vec<String> =
        requests.iter().filter_map(|(_, r)| split_url(r.url.as_deref()?).map(|(o, _)| o)).collect();
    let base = origins.iter().all(|o| *o == origins[0]).then(|| origins[0].clone());
    let mut secrets = Secrets::default();
    let mut steps = Vec::new();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    for (n, r) in &requests {
        let url = r.url.clone().unwrap_or_default();
        let host = host_of(&url);
        let host = host.as_deref();
        let at = format!("command {n}");
        let (origin, mut path) = split_url(&url).unwrap_or_default();
        let data = r.body.join("&");
        let method = r.method.clone().unwrap_or_else(|| if data.is_empty() || r.get { "GET" } else { "POST" }.into());
        if r.get && !data.is_empty() {
            path.push(if path.contains('?') { '&' } else { '?' });
            path.push_str(&data);
        }
        let path = secrets.query(&path, host, &at);
        let route = path.split('?').next().unwrap_or("/").to_string();
        let name = unique_name(&mut names, format!("{method} {route}"));
        let target = match &base {
            Some(_) => format!("{{{{baseUrl}}}}{path}"),
            None => format!("{origin}{path}"),
        };
        let mut headers: Vec<(String, String)> =
            r.headers.iter().map(|(h, v)| (h.clone(), secrets.header(host, h, v, &at))).collect();
        let has = |headers: &[(String, String)], name: &str| headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(name));
        if let Some(c) = &r.cookie
            && !has(&headers, "Cookie")
        {
            let value = secrets.take(host, "Cookie", c, format!("{at}: -b (cookies, `name=value; …`)"));
            headers.push(("Cookie".into(), value));
        }
        // As curl: a header given wins over -u and --oauth2-bearer.
        if !has(&headers, "Authorization") {
            if let Some(token) = &r.bearer {
                let value = secrets.take(host, "Authorization", token, format!("{at}: --oauth2-bearer (the token)"));
                headers.push(("Authorization".into(), format!("Bearer {value}")));
            } else if let Some(user) = &r.user {
                let from = format!("{at}: -u or the URL's user-info (set it to user:password, base64)");
                let value = secrets.take(host, "Authorization", user, from);
                headers.push(("Authorization".into(), format!("Basic {value}")));
            }
        }
        if r.json && !headers.iter().any(|(h, _)| h.eq_ignore_ascii_case("content-type")) {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        let body = (!data.is_empty() && !r.get).then(|| {
            if data.contains("{{") {
                warnings.push(format!("command {n}: the body holds `{{{{`, which Stampede reads as a template"));
            }
            secrets.body(&data, host, &at)
        });
        steps.push(Step {
            comment: format!("from curl command {n}: {method} {origin}{path}"),
            name,
            method,
            url: target,
            headers,
            body,
            ..Step::default()
        });
    }
    let insecure = requests.iter().any(|(_, r)| r.insecure);
    let http2 = requests.iter().any(|(_, r)| r.http2);
    let mut imported = Imported { yaml: String::new(), env: secrets.env.clone(), warnings };
    let mut yaml = imported.head(source, "curl", requests.len());
    let name = base.as_deref().and_then(|b| b.split_once("://")).map_or("imported", |(_, host)| host);
    write_top(&mut yaml, name, base.as_deref());
    if insecure || http2 {
        yaml.push_str("http:\n");
        if http2 {
            yaml.push_str("  version: \"2\"\n");
        }
        if insecure {
            yaml.push_str("  tls: {insecure: true}  # from curl -k: any certificate is accepted\n");
        }
    }
    write_steps(&mut yaml, "imported", &steps);
    imported.yaml = yaml;
    Ok(imported.scrubbed(&secrets))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_read_quotes_escapes_and_continuations_as_bash_does() {
        let text = "curl 'http://h/a b' \\\n  -H \"X: \\\"q\\\"\" --data-raw $'{\"a\":\"line\\nnext\\u00e9\"}' && echo hi\n# c\ncurl x";
        let words = shell_words(text).unwrap();
        assert_eq!(words[0], ["curl", "http://h/a b", "-H", "X: \"q\"", "--data-raw", "{\"a\":\"line\nnexté\"}"]);
        assert_eq!(words[1], ["echo", "hi"]);
        assert_eq!(words[2], ["curl", "x"]);
        assert!(shell_words("curl 'open").unwrap_err().contains("not closed"));
    }

    #[test]
    fn credential_options_take_their_values_and_never_show_them() {
        let words: Vec<String> = [
            "curl",
            "--oauth2-bearer",
            "tok-1234",
            "--proxy-user",
            "pu:proxy-pw-1234",
            "-Upu:inline-pw-1234",
            "--cert=client.pem:cert-pw-1234",
            "https://h.example/x",
        ]
        .map(String::from)
        .to_vec();
        let mut warnings = Vec::new();
        let r = parse_curl(&words, 1, &mut warnings).unwrap();
        assert_eq!((r.bearer.as_deref(), r.url.as_deref()), (Some("tok-1234"), Some("https://h.example/x")));
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings.iter().all(|w| !w.contains("second URL") && !w.contains("pw-1234")), "{warnings:?}");
        let out = curl(&words.join(" "), "c.sh").unwrap();
        let file: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&out.yaml).unwrap();
        let req = file.scenarios[0].steps[0].request.as_ref().unwrap();
        assert_eq!(req.headers["Authorization"], "Bearer {{env.H_EXAMPLE_AUTHORIZATION}}");
        assert!(!out.yaml.contains("1234"), "{}", out.yaml);
    }

    #[test]
    fn curl_commands_become_steps_with_secrets_from_the_environment() {
        let text = "curl 'http://127.0.0.1:8080/shop/login' -H 'Content-Type: application/json' \
                    -H 'Authorization: Bearer abc' --data-raw '{\"user\":\"ann\"}' --compressed\n\
                    curl -G http://127.0.0.1:8080/search -d q=kettle -b 'sid=1' --retry 3\n\
                    wget http://127.0.0.1:8080/";
        let out = curl(text, "flow.sh").unwrap();
        let file: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&out.yaml).unwrap();
        assert_eq!(file.base_url.as_deref(), Some("http://127.0.0.1:8080"));
        let steps = &file.scenarios[0].steps;
        assert_eq!(steps.len(), 2);
        let login = steps[0].request.as_ref().unwrap();
        assert_eq!((steps[0].name.as_str(), login.method.as_str()), ("POST /shop/login", "POST"));
        assert_eq!(login.url, "{{baseUrl}}/shop/login");
        assert_eq!(login.headers["Authorization"], "Bearer {{env.HOST_127_0_0_1_AUTHORIZATION}}");
        assert_eq!(login.body.as_deref(), Some("{\"user\":\"ann\"}"));
        let search = steps[1].request.as_ref().unwrap();
        assert_eq!((steps[1].name.as_str(), search.url.as_str()), ("GET /search", "{{baseUrl}}/search?q=kettle"));
        assert_eq!(search.headers["Cookie"], "{{env.HOST_127_0_0_1_COOKIE}}");
        assert!(!out.yaml.contains("abc") && !out.yaml.contains("sid=1"), "no secret in the file:\n{}", out.yaml);
        assert_eq!(out.env.keys().collect::<Vec<_>>(), ["HOST_127_0_0_1_AUTHORIZATION", "HOST_127_0_0_1_COOKIE"]);
        assert!(out.yaml.contains("# from curl command 1: POST http://127.0.0.1:8080/shop/login"), "{}", out.yaml);
        for w in ["option `--retry` is not converted", "`wget` is not curl"] {
            assert!(out.warnings.iter().any(|x| x.contains(w)), "{:?}", out.warnings);
            assert!(out.yaml.contains(w), "listed in the file too");
        }
        assert!(curl("echo nothing", "x").unwrap_err().contains("no curl command with a URL"));
    }

    /// Found by the importers' fuzz test: a warning quoting a word with line breaks in it (a
    /// quoted second URL) ended its `#` comment, so the rest of the word landed in the YAML,
    /// unscrubbed, and the file did not load.
    #[test]
    fn a_warning_quoting_lines_stays_one_comment_and_hides_the_credentials_it_quotes() {
        for brk in ["\n", "\r", "\r\n", "\u{85}", "\u{2028}"] {
            let text = format!(
                "curl -H 'X-Api-Key: k-secret-1234' http://127.0.0.1:8080/a 'x{brk}k-secret-1234{brk}name: injected'"
            );
            let out = curl(&text, "c.sh").unwrap();
            let file = stampede_engine::parse_str(&out.yaml, std::path::Path::new("c.yaml"))
                .unwrap_or_else(|e| panic!("{brk:?}: {e}\n{}", out.yaml));
            assert_eq!(file.name, "127.0.0.1:8080", "{brk:?}: {}", out.yaml);
            assert!(!out.yaml.contains("k-secret-1234"), "{brk:?}: the credential shows:\n{}", out.yaml);
            let warning = out.yaml.lines().find(|l| l.contains("a second URL")).unwrap();
            assert!(
                warning.starts_with("# not converted: command 1: `x ") && warning.contains(" name: injected`"),
                "{warning}"
            );
        }
    }
}
