//! A step's request, compiled: its URL, query, headers and body as templates (a request made
//! only of constants is serialized once, here), and rendered per VU by the one request writer.

use std::time::Duration;

use stampede_model::scenario::{PartSpec, RequestSpec, ScenarioFile};

use crate::compile::files::Files;
use crate::compile::template::{Escape, Scope, Template, take_render_error};
use crate::error::{Problems, Under};
use crate::wire::request::{Head, write_request};
use crate::wire::url::{HttpUrl, Origin, UrlError};

/// Body of a request.
#[derive(Debug)]
pub struct BodyPlan {
    /// What the body is made of.
    pub kind: BodyKind,
    /// Content type implied by the body kind, unless the user set one.
    pub content_type: Option<String>,
}

/// What a body is made of.
#[derive(Debug)]
pub enum BodyKind {
    /// Text (raw or JSON).
    Text(Template),
    /// `application/x-www-form-urlencoded` fields (names already encoded).
    Form(Vec<(String, Template)>),
    /// `multipart/form-data` parts with their boundary.
    Multipart {
        /// The boundary between parts: `stampede-` and 16 random hex digits, drawn at compile time.
        boundary: String,
        /// The parts, in file order.
        parts: Vec<PartPlan>,
    },
}

/// One multipart part.
#[derive(Debug)]
pub enum PartPlan {
    /// A text field (`value`).
    Field {
        /// The field's `name`, sent in its `Content-Disposition`.
        name: String,
        /// The field's text, rendered per VU.
        value: Template,
        /// The part's `Content-Type` (`contentType`); `None`: the part has no such header.
        content_type: Option<String>,
    },
    /// A file, read once when the plan was compiled.
    File {
        /// The field's `name`, sent in its `Content-Disposition`.
        name: String,
        /// The file name sent (`filename`, default the file's own name).
        filename: String,
        /// The part's `Content-Type` (`contentType`, default `application/octet-stream`).
        content_type: String,
        /// The file's contents.
        bytes: bytes::Bytes,
    },
}

impl BodyPlan {
    /// Writes the body for one VU.
    pub fn render_into(&self, slots: &[String], out: &mut Vec<u8>) {
        match &self.kind {
            BodyKind::Text(t) => t.render_into(slots, out),
            BodyKind::Form(fields) => {
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(b'&');
                    }
                    out.extend_from_slice(name.as_bytes());
                    out.push(b'=');
                    let v = value.render(slots);
                    out.extend(form_urlencoded::byte_serialize(v.as_bytes()).flat_map(str::bytes));
                }
            }
            BodyKind::Multipart { boundary, parts } => {
                for part in parts {
                    out.extend_from_slice(b"--");
                    out.extend_from_slice(boundary.as_bytes());
                    out.extend_from_slice(b"\r\nContent-Disposition: form-data; name=\"");
                    match part {
                        PartPlan::Field { name, value, content_type } => {
                            out.extend_from_slice(quote_param(name).as_bytes());
                            out.extend_from_slice(b"\"\r\n");
                            if let Some(ct) = content_type {
                                out.extend_from_slice(format!("Content-Type: {ct}\r\n").as_bytes());
                            }
                            out.extend_from_slice(b"\r\n");
                            value.render_into(slots, out);
                        }
                        PartPlan::File { name, filename, content_type, bytes } => {
                            out.extend_from_slice(quote_param(name).as_bytes());
                            out.extend_from_slice(b"\"; filename=\"");
                            out.extend_from_slice(quote_param(filename).as_bytes());
                            out.extend_from_slice(format!("\"\r\nContent-Type: {content_type}\r\n\r\n").as_bytes());
                            out.extend_from_slice(bytes);
                        }
                    }
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"--");
                out.extend_from_slice(boundary.as_bytes());
                out.extend_from_slice(b"--\r\n");
            }
        }
    }

    /// Whether the body is the same for every VU.
    pub fn is_const(&self) -> bool {
        match &self.kind {
            BodyKind::Text(t) => t.as_const().is_some(),
            BodyKind::Form(fields) => fields.iter().all(|(_, v)| v.as_const().is_some()),
            BodyKind::Multipart { parts, .. } => parts.iter().all(|p| match p {
                PartPlan::Field { value, .. } => value.as_const().is_some(),
                PartPlan::File { .. } => true,
            }),
        }
    }
}

/// A quoted-string parameter of a multipart header: quotes and line breaks escaped as
/// browsers do.
fn quote_param(s: &str) -> String {
    s.replace('"', "%22").replace('\r', "%0D").replace('\n', "%0A")
}

/// Why a request could not be built for a VU.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The rendered URL is not an absolute `http` or `https` URL with a host.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// An expression failed (a wrong type, an empty range…).
    #[error("expression {0}")]
    Expression(String),
}

/// A compiled request.
#[derive(Debug)]
pub struct RequestPlan {
    /// The HTTP method, uppercase.
    pub method: String,
    /// The URL as written, constants folded in; the query is appended after it is rendered.
    pub url: Template,
    /// Query parameters (name already percent-encoded, value encoded at render time).
    pub query: Vec<(String, Template)>,
    /// Headers with lowercase names: the `http.headers` the step does not set, then its own.
    pub headers: Vec<(String, Template)>,
    /// The body; `None`: none (a POST, PUT or PATCH then sends an empty one).
    pub body: Option<BodyPlan>,
    /// Limit for the whole request: connect, send and receive (`request.timeout`, else `http.timeout`).
    pub timeout: Duration,
    /// Limit for opening a connection (`http.connectTimeout`), at most `timeout`.
    pub connect_timeout: Duration,
    /// Redirects to follow (0: none).
    pub redirects: u32,
    /// The whole request, serialized once, when nothing in it varies per VU.
    pub fixed: Option<FixedRequest>,
    /// Where it goes, parsed once, when its URL and query are fixed (its headers or body vary).
    target: Option<HttpUrl>,
    /// The URL's fixed origin, when only its path or query varies: a rendered URL whose rest
    /// needs no normalizing is joined to it without parsing.
    origin: Option<Origin>,
}

/// A request that is the same every time.
#[derive(Debug, Clone)]
pub struct FixedRequest {
    /// Where the request goes.
    pub target: HttpUrl,
    /// The serialized request, head and body, ready to write.
    pub bytes: bytes::Bytes,
}

impl RequestPlan {
    /// Serializes the request for one VU into `out`, returning where it goes.
    pub fn render(&self, slots: &[String], out: &mut Vec<u8>) -> Result<HttpUrl, RenderError> {
        let url = self.target.is_none().then(|| {
            let mut url = self.url.render(slots);
            append_query(&mut url, &self.query, slots);
            url
        });
        let mut body = Vec::new();
        if let Some(b) = &self.body {
            b.render_into(slots, &mut body);
        }
        let sends_body = self.body.is_some() || matches!(self.method.as_str(), "POST" | "PUT" | "PATCH");
        if let Some(message) = take_render_error() {
            return Err(RenderError::Expression(message));
        }
        let target = match (&self.target, url.as_deref()) {
            (Some(fixed), _) => fixed.clone(),
            (None, url) => {
                let url = url.unwrap_or_default();
                match self.origin.as_ref().and_then(|o| o.join(url)) {
                    Some(joined) => joined,
                    None => HttpUrl::parse(url)?,
                }
            }
        };
        self.write(&self.method, &target, slots, sends_body.then_some(body.as_slice()), |_| true, out);
        if let Some(message) = take_render_error() {
            return Err(RenderError::Expression(message));
        }
        Ok(target)
    }

    /// Serializes the request with `body` (made by the caller: a gRPC call's framed messages)
    /// for one VU into `out`, returning where it goes.
    pub fn render_with_body(&self, slots: &[String], body: &[u8], out: &mut Vec<u8>) -> Result<HttpUrl, RenderError> {
        let target = match &self.target {
            Some(fixed) => fixed.clone(),
            None => {
                let mut url = self.url.render(slots);
                append_query(&mut url, &self.query, slots);
                if let Some(message) = take_render_error() {
                    return Err(RenderError::Expression(message));
                }
                match self.origin.as_ref().and_then(|o| o.join(&url)) {
                    Some(joined) => joined,
                    None => HttpUrl::parse(&url)?,
                }
            }
        };
        self.write(&self.method, &target, slots, Some(body), |_| true, out);
        if let Some(message) = take_render_error() {
            return Err(RenderError::Expression(message));
        }
        Ok(target)
    }

    /// Serializes a redirected request: `method` to `target`, with this request's headers
    /// (minus the body's when `body` is `None`, and minus credentials on another host).
    pub fn render_redirect(
        &self,
        method: &str,
        target: &HttpUrl,
        same_host: bool,
        slots: &[String],
        body: Option<&[u8]>,
        out: &mut Vec<u8>,
    ) {
        let keep = |name: &str| {
            !((body.is_none() && name.starts_with("content-"))
                || (!same_host && matches!(name, "authorization" | "cookie")))
        };
        self.write(method, target, slots, body, keep, out);
    }

    fn write(
        &self,
        method: &str,
        url: &HttpUrl,
        slots: &[String],
        body: Option<&[u8]>,
        keep: impl Fn(&str) -> bool,
        out: &mut Vec<u8>,
    ) {
        let content_type = body.and(self.body.as_ref()).and_then(|b| b.content_type.as_deref());
        let head = Head { method, url, content_type, body };
        let headers = self.headers.iter().filter(|(n, _)| keep(n)).map(|(n, v)| (n.as_str(), v));
        write_request(&head, headers, |t: &Template, out| t.render_into(slots, out), out);
    }
}

fn append_query(url: &mut String, query: &[(String, Template)], slots: &[String]) {
    for (i, (name, value)) in query.iter().enumerate() {
        let sep = if i == 0 && !url.contains('?') { '?' } else { '&' };
        url.push(sep);
        url.push_str(name);
        url.push('=');
        let v = value.render(slots);
        url.extend(form_urlencoded::byte_serialize(v.as_bytes()));
    }
}

/// Compiles one step's request; problems go under the step's location. `None` when it has any.
pub fn compile_request(
    req: &RequestSpec,
    file: &ScenarioFile,
    scope: &Scope,
    files: Files<'_>,
    loc: &str,
    problems: &mut Problems,
) -> Option<RequestPlan> {
    let before = problems.len();
    let mut c = RequestCompiler { scope, problems: problems.under(format!("{loc}: ")) };
    let method = req.method.trim().to_ascii_uppercase();
    let url = c.template("request.url", &req.url, Escape::None);
    let mut headers: Vec<(String, Template)> = Vec::new();
    for (name, value) in
        file.http.headers.iter().filter(|(n, _)| !req.headers.keys().any(|k| k.eq_ignore_ascii_case(n)))
    {
        headers.push((name.to_ascii_lowercase(), c.text(&format!("http.headers.{name}"), value, Escape::None)));
    }
    for (name, value) in &req.headers {
        headers.push((name.to_ascii_lowercase(), c.text(&format!("request.headers.{name}"), value, Escape::None)));
    }
    let query: Vec<(String, Template)> = req
        .query
        .iter()
        .map(|(k, v)| {
            let name = form_urlencoded::byte_serialize(k.as_bytes()).collect();
            (name, c.text(&format!("request.query.{k}"), v, Escape::None))
        })
        .collect();
    let body = c.body(req, files);
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_') {
        c.problems.add("request.method", format!("`{}` is not an HTTP method", req.method));
    }
    c.check_headers(&headers);
    // A URL made only of constants must be valid now; one with per-VU parts is checked when sent.
    if let Some(u) = url.as_ref().and_then(Template::as_const) {
        if u.is_empty() {
            c.problems.add("request.url", "the URL is empty");
        } else if let Err(e) = HttpUrl::parse(u) {
            c.problems.add("request.url", e);
        }
    }
    let timeout = req.timeout.unwrap_or(file.http.timeout).get();
    if timeout.is_zero() {
        c.problems.add("request.timeout", "must be longer than 0s");
    }
    if problems.len() != before {
        return None;
    }
    let mut plan = RequestPlan {
        method,
        url: url?,
        query,
        headers,
        body,
        timeout,
        connect_timeout: file.http.connect_timeout.get().min(timeout),
        redirects: req.redirects.unwrap_or(file.http.redirects),
        fixed: None,
        target: None,
        origin: None,
    };
    let all_fixed = plan.url.as_const().is_some()
        && plan.query.iter().all(|(_, v)| v.as_const().is_some())
        && plan.headers.iter().all(|(_, v)| v.as_const().is_some())
        && plan.body.as_ref().is_none_or(BodyPlan::is_const);
    if let Some(url) = plan.url.as_const()
        && plan.query.iter().all(|(_, v)| v.as_const().is_some())
    {
        let mut url = url.to_string();
        append_query(&mut url, &plan.query, &[]);
        plan.target = HttpUrl::parse(&url).ok();
    } else {
        plan.origin = Origin::of(plan.url.literal_prefix());
    }
    if all_fixed {
        let mut bytes = Vec::new();
        match plan.render(&[], &mut bytes) {
            Ok(target) => plan.fixed = Some(FixedRequest { target, bytes: bytes.into() }),
            Err(e) => {
                problems.add(format!("{loc}: request.url"), e);
                return None;
            }
        }
    }
    Some(plan)
}

/// Compiles the parts of one request, adding problems under its step's location.
struct RequestCompiler<'a> {
    scope: &'a Scope,
    problems: Under<'a>,
}

impl RequestCompiler<'_> {
    /// The template in `src`, or `None` (with a problem at `field`) when it does not compile.
    fn template(&mut self, field: &str, src: &str, escape: Escape) -> Option<Template> {
        Template::compile(src, self.scope, escape).map_err(|e| self.problems.add(field, e)).ok()
    }

    /// Like [`Self::template`], with an empty template standing in for a bad one (the problem
    /// is recorded; the plan is not built).
    fn text(&mut self, field: &str, src: &str, escape: Escape) -> Template {
        self.template(field, src, escape).unwrap_or_else(|| Template::literal(""))
    }

    /// The body: one of `body`, `json`, `form` or `multipart`.
    fn body(&mut self, req: &RequestSpec, files: Files<'_>) -> Option<BodyPlan> {
        let kinds = [req.body.is_some(), req.json.is_some(), req.form.is_some(), req.multipart.is_some()];
        if kinds.iter().filter(|k| **k).count() > 1 {
            self.problems.add("request", "set one of `body`, `json`, `form` or `multipart`, not several");
            return None;
        }
        if let Some(text) = &req.body {
            return Some(BodyPlan {
                kind: BodyKind::Text(self.text("request.body", text, Escape::None)),
                content_type: None,
            });
        }
        if let Some(json) = &req.json {
            let body = Template::json(json, self.scope).map_err(|e| self.problems.add("request.json", e)).ok();
            return Some(BodyPlan {
                kind: BodyKind::Text(body.unwrap_or_else(|| Template::literal(""))),
                content_type: Some("application/json".into()),
            });
        }
        if let Some(form) = &req.form {
            let fields = form
                .iter()
                .map(|(k, v)| {
                    let name = form_urlencoded::byte_serialize(k.as_bytes()).collect();
                    (name, self.text(&format!("request.form.{k}"), v, Escape::None))
                })
                .collect();
            let content_type = Some("application/x-www-form-urlencoded".into());
            return Some(BodyPlan { kind: BodyKind::Form(fields), content_type });
        }
        let parts = req.multipart.as_ref()?;
        let parts = parts.iter().enumerate().filter_map(|(i, part)| self.part(i, part, files)).collect();
        let boundary = format!("stampede-{:016x}", fastrand::u64(..));
        let content_type = format!("multipart/form-data; boundary={boundary}");
        Some(BodyPlan { kind: BodyKind::Multipart { boundary, parts }, content_type: Some(content_type) })
    }

    /// One multipart part: a field with a (templated) value, or a file read now.
    fn part(&mut self, i: usize, part: &PartSpec, files: Files<'_>) -> Option<PartPlan> {
        let field = format!("request.multipart[{i}]");
        if part.name.trim().is_empty() {
            self.problems.add(&format!("{field}.name"), "a part needs a name");
        }
        for (what, v) in [
            ("name", Some(&part.name)),
            ("filename", part.filename.as_ref()),
            ("contentType", part.content_type.as_ref()),
        ] {
            if v.is_some_and(|v| v.contains(['\r', '\n'])) {
                self.problems.add(&format!("{field}.{what}"), "must not contain line breaks");
            }
        }
        match (&part.value, &part.file) {
            (Some(value), None) => {
                if part.filename.is_some() {
                    self.problems.add(&format!("{field}.filename"), "goes with `file`");
                }
                Some(PartPlan::Field {
                    name: part.name.clone(),
                    value: self.text(&format!("{field}.value"), value, Escape::None),
                    content_type: part.content_type.clone(),
                })
            }
            (None, Some(path)) => {
                let bytes = files.read(path).map_err(|e| self.problems.add(&format!("{field}.file"), e)).ok()?;
                let shown = files.shown(path);
                let default_name = || shown.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
                Some(PartPlan::File {
                    name: part.name.clone(),
                    filename: part.filename.clone().unwrap_or_else(default_name),
                    content_type: part.content_type.clone().unwrap_or_else(|| "application/octet-stream".into()),
                    bytes: bytes.into(),
                })
            }
            _ => {
                self.problems.add(&field, "set either `value` or `file`");
                None
            }
        }
    }

    /// Header names must be tokens, constant values must not break lines, and the headers
    /// Stampede writes itself cannot be set.
    fn check_headers(&mut self, headers: &[(String, Template)]) {
        for (name, value) in headers {
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)) {
                self.problems.add("request.headers", format!("`{name}` is not a valid header name"));
            }
            if value.as_const().is_some_and(|v| v.contains(['\r', '\n'])) {
                self.problems.add(&format!("request.headers.{name}"), "a header value must not contain line breaks");
            }
            if matches!(name.as_str(), "host" | "content-length" | "transfer-encoding") {
                self.problems.add(&format!("request.headers.{name}"), "this header is set by Stampede");
            }
        }
    }
}
