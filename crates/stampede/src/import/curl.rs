//! `stampede import curl`: curl command lines, as browsers' "copy as cURL" and people write them.
//! Credentials (headers, `-u`, `--oauth2-bearer`, `-b`, a URL's user-info, query keys, body
//! fields) become `{{env.NAME}}` ([`super::secrets`]); options that carry one and are not
//! converted (`--proxy-user`, `--cert`…) are listed without their values.

use std::collections::BTreeMap;

use super::secrets::{Secrets, host_of, strip_user_info};
use super::shell::{VAR_CLOSE, VAR_OPEN, shell_words};
use super::{Imported, Part, Step, unique_name, write_steps, write_top};

/// A piece of request data, as the option that gave it.
#[derive(Debug, Clone, PartialEq)]
enum Data {
    /// `-d`, `--data`, `--data-ascii`: `@file` read with its line breaks removed.
    Ascii(String),
    /// `--data-binary`: `@file` read as it is.
    Binary(String),
    /// `--data-raw`: as written, `@` included.
    Raw(String),
    /// `--data-urlencode`: `content`, `=content`, `name=content`, `@file`, `name@file`.
    Urlencode(String),
    /// `--json`: as `--data-binary`, its pieces joined with nothing between them.
    Json(String),
}

/// One request of a curl command line (each URL of it is one).
#[derive(Debug, Default, PartialEq)]
struct CurlRequest {
    method: Option<String>,
    urls: Vec<String>,
    /// A header, or `None`: `-H 'Name:'` removes it.
    headers: Vec<(String, Option<String>)>,
    data: Vec<Data>,
    /// `-F` / `--form` (`false`) and `--form-string` (`true`) parts, as written.
    form: Vec<(String, bool)>,
    /// `--url-query` pieces.
    url_query: Vec<String>,
    /// `-G`: the data goes in the query.
    get: bool,
    head: bool,
    insecure: bool,
    http2: bool,
    compressed: bool,
    location: bool,
    globoff: bool,
    user: Option<String>,
    /// `--oauth2-bearer`: the token.
    bearer: Option<String>,
    cookie: Option<String>,
}

/// Options that change nothing a load test sends (output, progress, verbosity, protocol
/// choices Stampede makes itself).
const QUIET_OPTIONS: [&str; 22] = [
    "-s",
    "--silent",
    "-S",
    "--show-error",
    "-v",
    "--verbose",
    "-i",
    "--include",
    "-#",
    "--progress-bar",
    "--no-progress-meter",
    "-f",
    "--fail",
    "--fail-with-body",
    "--http1.1",
    "--basic",
    "-N",
    "--no-buffer",
    "-n",
    "--netrc",
    "--tlsv1.2",
    "--tlsv1.3",
];

/// Options that take a value this importer does not use.
const IGNORED_WITH_VALUE: [&str; 8] =
    ["-o", "--output", "-w", "--write-out", "--max-time", "-m", "--trace-ascii", "--stderr"];

/// Options that take a value and are not converted (listed, their value skipped).
const NOT_CONVERTED_WITH_VALUE: [&str; 32] = [
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
    "--request-target",
    "--cert-type",
];

/// Options whose value is (or holds) a credential this importer does not use: listed, never
/// quoted. A proxy's: Stampede sends its requests straight to the target.
const CREDENTIAL_NOT_CONVERTED: [&str; 21] = [
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
    "--key-type",
];

/// Short options that take a value, which may follow them in the same word (`-XPOST`).
const SHORT_WITH_VALUE: &[u8] = b"XHdAebuUxEFoTwmrcCDKy";

/// Reads the words of a curl command (`words[0]` is `curl`, `n` numbers the command in warnings)
/// as one request: its options applied in order, every other word a URL.
fn parse_curl(words: &[String], n: usize, warnings: &mut Vec<String>) -> Result<CurlRequest, String> {
    let mut r = CurlRequest::default();
    let mut i = 1;
    while i < words.len() {
        let Some((flag, inline)) = split_option(&words[i], &mut r, n, warnings) else {
            i += 1;
            continue;
        };
        let mut take = || match &inline {
            Some(v) => Ok(v.clone()),
            None => {
                i += 1;
                words.get(i).cloned().ok_or_else(|| format!("command {n}: {flag} needs a value"))
            }
        };
        apply_option(&mut r, &flag, &mut take, n, warnings)?;
        i += 1;
    }
    Ok(r)
}

/// The option a word is and the value the word holds too (`--header=value`, `-XPOST`, `-sX`);
/// one-letter options without a value before it (`-sX`) applied to `r`. `None`: the word was
/// only such options (`-sSL`), all applied.
fn split_option(
    w: &str,
    r: &mut CurlRequest,
    n: usize,
    warnings: &mut Vec<String>,
) -> Option<(String, Option<String>)> {
    Some(match w.split_once('=') {
        Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
        _ if w.len() > 2 && w.starts_with('-') && !w.starts_with("--") && w.is_ascii() => {
            let letters = &w.as_bytes()[1..];
            // Flags without a value first, then at most one that takes one.
            match letters.iter().position(|b| SHORT_WITH_VALUE.contains(b)) {
                Some(0) => (w[..2].to_string(), Some(w[2..].to_string())),
                Some(at) => {
                    for b in &letters[..at] {
                        short_flag(r, &format!("-{}", *b as char), n, warnings);
                    }
                    let rest = &w[at + 2..];
                    (format!("-{}", letters[at] as char), (!rest.is_empty()).then(|| rest.to_string()))
                }
                None => {
                    for b in letters {
                        short_flag(r, &format!("-{}", *b as char), n, warnings);
                    }
                    return None;
                }
            }
        }
        _ => (w.to_string(), None),
    })
}

/// Applies one option (`flag`) to `r`, `take` giving its value; a word that is no option is a
/// URL.
fn apply_option(
    r: &mut CurlRequest,
    flag: &str,
    take: &mut impl FnMut() -> Result<String, String>,
    n: usize,
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    match flag {
        "-X" | "--request" => r.method = Some(take()?),
        "-H" | "--header" => header_option(r, flag, &take()?, n, warnings),
        "-d" | "--data" | "--data-ascii" => r.data.push(Data::Ascii(take()?)),
        "--data-binary" => r.data.push(Data::Binary(take()?)),
        "--data-raw" => r.data.push(Data::Raw(take()?)),
        "--data-urlencode" => r.data.push(Data::Urlencode(take()?)),
        "--json" => r.data.push(Data::Json(take()?)),
        "-F" | "--form" => r.form.push((take()?, false)),
        "--form-string" => r.form.push((take()?, true)),
        "--url-query" => r.url_query.push(take()?),
        "-b" | "--cookie" => {
            let c = take()?;
            if c.contains('=') {
                r.cookie = Some(c);
            } else {
                warnings.push(format!("command {n}: {flag} FILE: a cookie file is not read; left out"));
            }
        }
        "-u" | "--user" => r.user = Some(take()?),
        "--oauth2-bearer" => r.bearer = Some(take()?),
        "-A" | "--user-agent" => r.headers.push(("User-Agent".into(), Some(take()?))),
        "-e" | "--referer" => {
            let referer = take()?;
            let referer = referer.strip_suffix(";auto").unwrap_or(&referer).to_string();
            if !referer.is_empty() {
                r.headers.push(("Referer".into(), Some(referer)));
            }
        }
        "--url" => r.urls.push(take()?),
        "--digest" | "--ntlm" | "--negotiate" | "--anyauth" => {
            warnings.push(format!("command {n}: `{flag}` authentication is not converted: -u is sent as Basic"));
        }
        "-:" | "--next" => {
            warnings.push(format!("command {n}: `{flag}` is not converted: the options after it apply to every URL"));
        }
        f if f.starts_with("--") || f.len() == 2 && f.starts_with('-') => {
            if !long_flag(r, f) && !short_flag(r, f, n, warnings) {
                unconverted_option(f, take, n, warnings)?;
            }
        }
        url => r.urls.push(url.to_string()),
    }
    Ok(())
}

/// A `-H` value (`h`) as a header of `r`: `Name: value`, `Name:` (removes it), `Name;` (sent
/// empty); `@file` and a header without a value listed and left out.
fn header_option(r: &mut CurlRequest, flag: &str, h: &str, n: usize, warnings: &mut Vec<String>) {
    if h.starts_with('@') {
        warnings.push(format!("command {n}: {flag} {h}: headers from a file are not read; left out"));
    } else if let Some((name, v)) = h.split_once(':') {
        let v = v.trim();
        r.headers.push((name.trim().to_string(), (!v.is_empty()).then(|| v.to_string())));
    } else if let Some(name) = h.strip_suffix(';') {
        r.headers.push((name.trim().to_string(), Some(String::new())));
    } else {
        warnings.push(format!("command {n}: header `{h}` has no value; left out"));
    }
}

/// An option this importer does not convert (`f`): its value, if it takes one, skipped (a
/// credential's never quoted), and listed unless it changes nothing a load test sends.
fn unconverted_option(
    f: &str,
    take: &mut impl FnMut() -> Result<String, String>,
    n: usize,
    warnings: &mut Vec<String>,
) -> Result<(), String> {
    if IGNORED_WITH_VALUE.contains(&f) {
        take()?;
    } else if NOT_CONVERTED_WITH_VALUE.contains(&f) {
        take()?;
        warnings.push(format!("command {n}: option `{f}` is not converted"));
    } else if CREDENTIAL_NOT_CONVERTED.contains(&f) {
        take()?;
        let why = if f.contains("proxy") || f.contains("socks") || f == "-x" || f == "-U" {
            "Stampede sends requests straight to the target, through no proxy"
        } else {
            "a client certificate is the file's `http.tls.clientCert` and `clientKey`"
        };
        warnings.push(format!("command {n}: option `{f}` is not converted ({why}); its value is left out"));
    } else {
        warnings.push(format!("command {n}: option `{f}` is not converted"));
    }
    Ok(())
}

/// A long option without a value; whether it was one.
fn long_flag(r: &mut CurlRequest, flag: &str) -> bool {
    match flag {
        "--get" => r.get = true,
        "--head" => r.head = true,
        "--insecure" => r.insecure = true,
        "--http2" | "--http2-prior-knowledge" => r.http2 = true,
        "--compressed" => r.compressed = true,
        "--location" | "--location-trusted" => r.location = true,
        "--globoff" => r.globoff = true,
        f => return QUIET_OPTIONS.contains(&f),
    }
    true
}

/// A one-letter option without a value (also one of several in a word, `-sSL`); whether it was
/// one. An unknown one is listed as not converted.
fn short_flag(r: &mut CurlRequest, flag: &str, n: usize, warnings: &mut Vec<String>) -> bool {
    match flag {
        "-G" => r.get = true,
        "-I" => r.head = true,
        "-k" => r.insecure = true,
        "-L" => r.location = true,
        "-g" => r.globoff = true,
        f if QUIET_OPTIONS.contains(&f) => {}
        f if SHORT_WITH_VALUE.contains(&f.as_bytes()[f.len() - 1]) && f.len() == 2 => return false,
        f if f.len() == 2 && f.starts_with('-') && !IGNORED_WITH_VALUE.contains(&f) => {
            if !NOT_CONVERTED_WITH_VALUE.contains(&f) && !CREDENTIAL_NOT_CONVERTED.contains(&f) {
                warnings.push(format!("command {n}: option `{f}` is not converted"));
                return true;
            }
            return false;
        }
        _ => return false,
    }
    true
}

/// `text` percent-encoded as curl's `--data-urlencode` does: letters, digits and `-._~` as they
/// are, a space as `+`, every other byte `%XX`; shell variables left in place.
fn urlencode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_var = false;
    for c in text.chars() {
        match c {
            VAR_OPEN => in_var = true,
            VAR_CLOSE => in_var = false,
            _ => {}
        }
        if in_var || c == VAR_CLOSE || c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~') {
            out.push(c);
        } else if c == ' ' {
            out.push('+');
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("%{b:02X}"));
            }
        }
    }
    out
}

/// A file a command reads (`@file`, `<file`), from the folder curl would run in.
fn read_file(path: &str) -> Option<String> {
    std::fs::read(path).ok().map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The data of a request as curl sends it: the pieces in order, `&` between them (none between
/// `--json` pieces); `None` when there is none.
fn request_data(r: &CurlRequest, n: usize, warnings: &mut Vec<String>) -> Option<String> {
    let mut out: Option<String> = None;
    let mut last_json = false;
    for d in &r.data {
        let piece = match d {
            Data::Raw(t) => Some(t.clone()),
            Data::Ascii(t) | Data::Binary(t) | Data::Json(t) if t.starts_with('@') => {
                let path = &t[1..];
                match read_file(path) {
                    Some(text) if matches!(d, Data::Ascii(_)) => Some(text.replace(['\r', '\n'], "")),
                    Some(text) => Some(text),
                    None => {
                        warnings.push(format!(
                            "command {n}: the body from the file `{path}` is not read (it is not there): put it in the step"
                        ));
                        None
                    }
                }
            }
            Data::Ascii(t) | Data::Binary(t) | Data::Json(t) => Some(t.clone()),
            Data::Urlencode(t) => {
                let at_eq = t.find('=');
                let at_at = t.find('@');
                match (at_eq, at_at) {
                    (Some(e), a) if a.is_none_or(|a| e < a) => {
                        let (name, content) = (&t[..e], &t[e + 1..]);
                        Some(if name.is_empty() {
                            urlencode(content)
                        } else {
                            format!("{name}={}", urlencode(content))
                        })
                    }
                    (_, Some(a)) => {
                        let (name, path) = (&t[..a], &t[a + 1..]);
                        match read_file(path) {
                            Some(text) => Some(if name.is_empty() {
                                urlencode(&text)
                            } else {
                                format!("{name}={}", urlencode(&text))
                            }),
                            None => {
                                warnings.push(format!(
                                    "command {n}: --data-urlencode {t}: the file `{path}` is not read (it is not there)"
                                ));
                                None
                            }
                        }
                    }
                    _ => Some(urlencode(t)),
                }
            }
        };
        let Some(piece) = piece else { continue };
        let json = matches!(d, Data::Json(_));
        match &mut out {
            None => out = Some(piece),
            Some(o) => {
                if !(json && last_json) {
                    o.push('&');
                }
                o.push_str(&piece);
            }
        }
        last_json = json;
    }
    out
}

/// The content type curl gives a file part by its name's extension.
fn file_content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase()).unwrap_or_default();
    match ext.as_str() {
        "gif" => "image/gif",
        "jpg" | "jpeg" => "image/jpeg",
        "png" => "image/png",
        "svg" => "image/svg+xml",
        "txt" => "text/plain",
        "htm" | "html" => "text/html",
        "pdf" => "application/pdf",
        "xml" => "application/xml",
        _ => "application/octet-stream",
    }
}

/// The `-F` parts: `name=value`, `name=@file` (a file part), `name=<file` (a field with the
/// file's text), with `;type=` and `;filename=`.
fn form_parts(r: &CurlRequest, n: usize, warnings: &mut Vec<String>) -> Vec<Part> {
    let mut parts = Vec::new();
    for (spec, literal) in &r.form {
        let Some((name, rest)) = spec.split_once('=') else {
            warnings.push(format!("command {n}: -F `{spec}` has no `=`; left out"));
            continue;
        };
        let mut part = Part { name: name.to_string(), ..Part::default() };
        if *literal {
            part.value = Some(rest.to_string());
            parts.push(part);
            continue;
        }
        let mut pieces = rest.split(';');
        let head = pieces.next().unwrap_or_default();
        for p in pieces {
            match p.trim().split_once('=') {
                Some(("type", t)) => part.content_type = Some(t.to_string()),
                Some(("filename", f)) => part.filename = Some(f.trim_matches('"').to_string()),
                _ => warnings.push(format!("command {n}: -F `{name}`: `;{p}` is not converted")),
            }
        }
        if let Some(path) = head.strip_prefix('@') {
            let own = std::path::Path::new(path).file_name().and_then(|f| f.to_str()).unwrap_or(path).to_string();
            part.filename.get_or_insert(own);
            part.content_type.get_or_insert_with(|| file_content_type(path).to_string());
            part.file = Some(path.to_string());
        } else if let Some(path) = head.strip_prefix('<') {
            match read_file(path) {
                Some(text) => part.value = Some(text),
                None => {
                    warnings
                        .push(format!("command {n}: -F `{name}=<{path}`: the file is not there; the field is empty"));
                    part.value = Some(String::new());
                }
            }
        } else {
            part.value = Some(head.trim_matches('"').to_string());
        }
        parts.push(part);
    }
    parts
}

/// `text` as a Stampede template: what would read as one (`{{`, another tool's `${`) kept as
/// text, and each marked shell variable `{{env.NAME}}` (named in `env`).
fn templated(text: &str, at: &str, env: &mut BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find(VAR_OPEN) {
        out.push_str(&super::literal(&rest[..open]));
        let after = &rest[open + VAR_OPEN.len_utf8()..];
        let close = after.find(VAR_CLOSE).unwrap_or(after.len());
        let name = super::env_name(&after[..close]);
        let why = if name == "COMMAND_OUTPUT" {
            format!("{at}: what a shell command printed (`$(…)`)")
        } else {
            format!("{at}: the shell variable ${name}")
        };
        env.entry(name.clone()).or_insert(why);
        out.push_str(&format!("{{{{env.{name}}}}}"));
        rest = after.get(close + VAR_CLOSE.len_utf8()..).unwrap_or("");
    }
    out.push_str(&super::literal(rest));
    out
}

/// The origin (`scheme://host[:port]`) and the rest (`/path?query`) of a URL; a URL without a
/// scheme is `http://`, as curl takes it.
fn split_url(url: &str) -> Option<(String, String)> {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '+') => (s, r),
        Some(_) => return None,
        None if !url.is_empty() && !url.starts_with('/') && !url.starts_with('-') => ("http", url),
        None => return None,
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return None;
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return None; // curl refuses it: "Malformed input to a URL function"
    }
    let rest = rest.split('#').next().unwrap_or_default();
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') { format!("/{path}") } else { path.to_string() };
    (!authority.is_empty()).then(|| (format!("{scheme}://{authority}"), path))
}

/// Whether a URL holds curl's globbing (`{a,b}`, `[1-3]`), which curl expands unless `-g`.
fn globs(url: &str) -> bool {
    url.contains(['{', '['])
}

/// A request to import: its command's number, its options, its URL without the user-info, and
/// that user-info.
type Sent = (usize, std::sync::Arc<CurlRequest>, String, Option<String>);

/// What each command's options left unconverted, by the command's number.
type Notes = BTreeMap<usize, Vec<String>>;

/// What the steps of one import share: the origin every request has (when they have one), how
/// many requests follow redirects (`-L`) out of how many, and what each command's options left
/// unconverted.
struct Shared {
    base: Option<String>,
    follow: usize,
    requests: usize,
    notes: Notes,
}

/// Imports curl command lines (`text`, from `source`). Nothing usable (no curl command with an
/// http(s) URL) is an error.
pub(crate) fn curl(text: &str, source: &str) -> Result<Imported, String> {
    let commands = shell_words(text).map_err(|e| format!("{source}: {e}"))?;
    let mut warnings = Vec::new();
    let (requests, notes) = curl_requests(&commands, source, &mut warnings)?;
    if requests.is_empty() {
        return Err(format!("{source}: no curl command with an http(s) URL to import"));
    }
    let origins: Vec<String> = requests.iter().filter_map(|(_, _, u, _)| split_url(u).map(|(o, _)| o)).collect();
    let base = origins.iter().all(|o| *o == origins[0]).then(|| origins[0].clone());
    let mut secrets = Secrets::default();
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let follow = requests.iter().filter(|(_, r, _, _)| r.location).count();
    let shared = Shared { base, follow, requests: requests.len(), notes };
    let steps: Vec<Step> =
        requests.iter().map(|sent| curl_step(sent, &shared, &mut secrets, &mut names, &mut warnings)).collect();
    let mut imported = Imported { env: secrets.env.clone(), warnings, ..Imported::default() };
    let mut yaml = imported.head(source, "curl", requests.len());
    let name = shared.base.as_deref().and_then(|b| b.split_once("://")).map_or("imported", |(_, host)| host);
    let base_t = shared.base.as_deref().map(|b| templated(b, "the URL", &mut imported.env));
    write_top(&mut yaml, name, base_t.as_deref());
    write_http(&mut yaml, &requests, follow);
    write_steps(&mut yaml, "imported", &steps);
    imported.yaml = yaml;
    Ok(imported.scrubbed(&secrets))
}

/// The requests of the commands (each URL of a curl command one), and what each command's
/// options left unconverted, by the command's number; a command that is not curl, a command
/// without a URL and a URL that is not http(s) listed and left out.
fn curl_requests(
    commands: &[Vec<String>],
    source: &str,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Sent>, Notes), String> {
    let mut requests = Vec::new();
    let mut parsed_notes = Notes::new();
    for (i, words) in commands.iter().enumerate() {
        let n = i + 1;
        // `$ curl …` as docs show a prompt; `sudo`, `time`, `command` before it.
        let start = words.iter().position(|w| w == "curl" || w.ends_with("/curl"));
        let Some(start) = start.filter(|s| {
            words[..*s].iter().all(|w| matches!(w.as_str(), "$" | "sudo" | "time" | "command" | "%" | ">"))
        }) else {
            warnings
                .push(format!("command {n}: `{}` is not curl; left out", words[0].replace([VAR_OPEN, VAR_CLOSE], "$")));
            continue;
        };
        let before = warnings.len();
        let mut r = parse_curl(&words[start..], n, warnings).map_err(|e| format!("{source}: {e}"))?;
        parsed_notes.insert(n, warnings[before..].to_vec());
        let urls = std::mem::take(&mut r.urls);
        if urls.is_empty() {
            warnings.push(format!("command {n}: no http(s) URL; left out"));
        }
        let r = std::sync::Arc::new(r);
        for url in urls {
            // The user-info is a credential, sent as a header: no origin or comment holds it.
            let (url, user) = strip_user_info(&url);
            if split_url(&url).is_none() {
                warnings.push(format!(
                    "command {n}: `{}` is no http(s) URL; left out",
                    url.replace([VAR_OPEN, VAR_CLOSE], "$")
                ));
                continue;
            }
            if globs(&url) && !r.globoff {
                warnings.push(format!(
                    "command {n}: curl would expand the `{{…}}` / `[…]` of `{url}` (globbing) unless -g; sent as written"
                ));
            }
            requests.push((n, r.clone(), url, user));
        }
    }
    Ok((requests, parsed_notes))
}

/// The step of one request: its method, URL, headers and body as curl sends them, templated,
/// credentials from the environment, under what its command left unconverted.
fn curl_step(
    (n, r, url, user): &Sent,
    shared: &Shared,
    secrets: &mut Secrets,
    names: &mut BTreeMap<String, usize>,
    warnings: &mut Vec<String>,
) -> Step {
    let n = *n;
    let before = warnings.len();
    let host = host_of(url);
    let host = host.as_deref();
    let at = format!("command {n}");
    let (origin, path) = split_url(url).unwrap_or_default();
    let data = request_data(r, n, warnings);
    let parts = form_parts(r, n, warnings);
    let sends_body = (data.is_some() && !r.get) || !parts.is_empty();
    let method = match &r.method {
        Some(m) => m.clone(),
        None if r.head => "HEAD".into(),
        None if sends_body => "POST".into(),
        None => "GET".into(),
    };
    let path = request_path(r, data.as_deref(), path, &at, host, secrets);
    let route = path.split('?').next().unwrap_or("/").to_string();
    let name = unique_name(names, format!("{method} {route}"));
    let origin_t = templated(&origin, &at, &mut secrets.env);
    let target = match &shared.base {
        Some(_) => format!("{{{{baseUrl}}}}{path}"),
        None => format!("{origin_t}{path}"),
    };
    let mut headers = request_headers(r, user.as_deref(), host, &at, secrets, warnings);
    content_headers(r, data.is_some(), &mut headers);
    let body = data.filter(|_| !r.get && parts.is_empty()).map(|d| {
        let d = templated(&d, &at, &mut secrets.env);
        secrets.body(&d, host, &at)
    });
    let multipart = parts
        .into_iter()
        .map(|mut p| {
            p.value = p.value.map(|v| templated(&v, &at, &mut secrets.env));
            p
        })
        .collect();
    let redirects = (shared.follow > 0 && shared.follow < shared.requests).then_some(if r.location { 10 } else { 0 });
    let mut notes = shared.notes.get(&n).cloned().unwrap_or_default();
    notes.extend(warnings[before..].iter().cloned());
    Step {
        notes,
        comment: format!("from curl command {n}: {method} {origin}{path}"),
        name,
        method,
        url: target,
        headers,
        body,
        multipart,
        redirects,
        ..Step::default()
    }
}

/// The path and query a request goes to: `path` with `-G`'s data and the `--url-query` pieces
/// added to its query, templated, the query's credentials from the environment.
fn request_path(
    r: &CurlRequest,
    data: Option<&str>,
    mut path: String,
    at: &str,
    host: Option<&str>,
    secrets: &mut Secrets,
) -> String {
    let mut query: Vec<String> = Vec::new();
    if r.get
        && let Some(d) = data
    {
        query.push(d.to_string());
    }
    for q in &r.url_query {
        query.push(match q.strip_prefix('+') {
            Some(raw) => raw.to_string(),
            None => match q.split_once('=') {
                Some(("", c)) => urlencode(c),
                Some((k, c)) => format!("{k}={}", urlencode(c)),
                None => urlencode(q),
            },
        });
    }
    for q in query {
        path.push(if path.contains('?') { '&' } else { '?' });
        path.push_str(&q);
    }
    let path = templated(&path, at, &mut secrets.env);
    secrets.query(&path, host, at)
}

/// Whether `headers` has one named `name` (in any case).
fn has_header(headers: &[(String, String)], name: &str) -> bool {
    headers.iter().any(|(h, _)| h.eq_ignore_ascii_case(name))
}

/// A request's headers: the `-H` ones (a later one of a name replacing an earlier, `Name:`
/// removing it), the `-b` cookies, and `--oauth2-bearer` or `-u` (else the URL's user-info,
/// `user`) as Authorization when no header gives one; templated, credentials from the
/// environment.
fn request_headers(
    r: &CurlRequest,
    user: Option<&str>,
    host: Option<&str>,
    at: &str,
    secrets: &mut Secrets,
    warnings: &mut Vec<String>,
) -> Vec<(String, String)> {
    let mut headers: Vec<(String, String)> = Vec::new();
    for (h, v) in &r.headers {
        headers.retain(|(k, _)| !k.eq_ignore_ascii_case(h));
        match v {
            Some(v) => {
                let v = templated(v, at, &mut secrets.env);
                headers.push((h.clone(), secrets.header(host, h, &v, at)));
            }
            None if h.eq_ignore_ascii_case("accept") || h.eq_ignore_ascii_case("user-agent") => {
                warnings.push(format!("{at}: `-H '{h}:'` (send no {h}) is not converted: Stampede sends its own"));
            }
            None => {}
        }
    }
    if let Some(c) = &r.cookie
        && !has_header(&headers, "Cookie")
    {
        let c = templated(c, at, &mut secrets.env);
        let value = if c.contains("{{") {
            c
        } else {
            secrets.take(host, "Cookie", &c, format!("{at}: -b (cookies, `name=value; …`)"))
        };
        headers.push(("Cookie".into(), value));
    }
    // As curl: a header given wins over -u and --oauth2-bearer.
    if !has_header(&headers, "Authorization") {
        if let Some(token) = &r.bearer {
            let value = secrets.take(host, "Authorization", token, format!("{at}: --oauth2-bearer (the token)"));
            headers.push(("Authorization".into(), format!("Bearer {value}")));
        } else if let Some(user) = r.user.as_deref().or(user) {
            let from = format!("{at}: -u or the URL's user-info (set it to user:password, base64)");
            let value = secrets.take(host, "Authorization", user, from);
            headers.push(("Authorization".into(), format!("Basic {value}")));
        }
    }
    headers
}

/// The headers curl adds for what a request sends, unless `headers` has them: JSON's
/// Content-Type and Accept for `--json`, a form's Content-Type for other data (`data`) not sent
/// in the query, and Accept-Encoding for `--compressed`.
fn content_headers(r: &CurlRequest, data: bool, headers: &mut Vec<(String, String)>) {
    let json = r.data.iter().any(|d| matches!(d, Data::Json(_)));
    if json {
        if !has_header(headers, "Content-Type") {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        if !has_header(headers, "Accept") {
            headers.push(("Accept".into(), "application/json".into()));
        }
    } else if data && !r.get && !has_header(headers, "Content-Type") {
        headers.push(("Content-Type".into(), "application/x-www-form-urlencoded".into()));
    }
    if r.compressed && !has_header(headers, "Accept-Encoding") {
        // What Debian's curl (zlib, brotli, zstd) asks for.
        headers.push(("Accept-Encoding".into(), "deflate, gzip, br, zstd".into()));
    }
}

/// The file's `http` settings the commands ask for: HTTP/2 (`--http2`), any certificate (`-k`),
/// and no redirect followed when no command follows them (`follow` of them have `-L`).
fn write_http(yaml: &mut String, requests: &[Sent], follow: usize) {
    let insecure = requests.iter().any(|(_, r, _, _)| r.insecure);
    let http2 = requests.iter().any(|(_, r, _, _)| r.http2);
    if insecure || http2 || follow == 0 {
        yaml.push_str("http:\n");
        if http2 {
            yaml.push_str("  version: \"2\"\n");
        }
        if insecure {
            yaml.push_str("  tls: {insecure: true}  # from curl -k: any certificate is accepted\n");
        }
        if follow == 0 {
            yaml.push_str("  redirects: 0  # as curl without -L: a redirect is the answer\n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            (r.bearer.as_deref(), r.urls.as_slice()),
            (Some("tok-1234"), ["https://h.example/x".to_string()].as_slice())
        );
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
        // In its place too: above the step of the command it came from.
        assert!(
            out.yaml.contains(
                "      # not converted: command 2: option `--retry` is not converted\n      - name: GET /search"
            ),
            "{}",
            out.yaml
        );
        for w in ["option `--retry` is not converted", "`wget` is not curl"] {
            assert!(out.warnings.iter().any(|x| x.contains(w)), "{:?}", out.warnings);
            assert!(out.yaml.contains(w), "listed in the file too");
        }
        assert!(curl("echo nothing", "x").unwrap_err().contains("no curl command with an http(s) URL"));
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
            let warning = out.yaml.lines().find(|l| l.contains("is no http(s) URL")).unwrap();
            assert!(
                warning.starts_with("# not converted: command 1: `x ") && warning.contains(" name: injected`"),
                "{warning}"
            );
        }
    }
}
