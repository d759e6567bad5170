//! `stampede import openapi`: an OpenAPI 3.0 or 3.1 description (JSON or YAML) becomes one step
//! per operation, in the document's order: path and required query and header parameters from
//! their examples (or made from their schemas), a JSON or form body from the example or the
//! schema (`$ref`s resolved, `allOf` merged, the first of `oneOf`/`anyOf`), a check on the
//! documented success status, and the security schemes as headers from the environment, as are
//! the examples of credential parameters and body fields (`api_key`, `password`:
//! [`super::secrets`]). A `$ref` that leads nowhere is a warning naming it, never a panic.

use serde_yaml::Value;

use super::secrets::{Secrets, host_of};
use super::{Imported, Step, write_steps, write_top};

const METHODS: [&str; 7] = ["get", "post", "put", "patch", "delete", "head", "options"];

/// How deep a schema is followed (a recursive one stops there).
const MAX_DEPTH: usize = 6;

struct Doc<'a> {
    root: &'a Value,
    warnings: Vec<String>,
}

impl<'a> Doc<'a> {
    /// `value`, or what its `$ref` points to (`#/components/...`); `None` (with a warning) for a
    /// reference that leads nowhere.
    fn resolve(&mut self, value: &'a Value, at: &str) -> Option<&'a Value> {
        let mut v = value;
        for _ in 0..16 {
            let Some(r) = v.get("$ref").and_then(Value::as_str) else { return Some(v) };
            let Some(path) = r.strip_prefix("#/") else {
                self.warnings.push(format!("{at}: `$ref: {r}` points outside this document; left out"));
                return None;
            };
            let mut target = self.root;
            for part in path.split('/') {
                let part = part.replace("~1", "/").replace("~0", "~");
                match target.get(part.as_str()) {
                    Some(t) => target = t,
                    None => {
                        self.warnings.push(format!("{at}: `$ref: {r}` leads nowhere; left out"));
                        return None;
                    }
                }
            }
            v = target;
        }
        self.warnings.push(format!("{at}: `$ref`s refer to each other in a circle; left out"));
        None
    }

    /// A JSON value for `schema`: its example, default or first enum value, else one made from its
    /// type and format.
    fn sample(&mut self, schema: &'a Value, at: &str, depth: usize) -> serde_json::Value {
        let Some(s) = self.resolve(schema, at) else { return serde_json::Value::Null };
        // What the document gives is text as it is (an example's `{{name}}` is no template).
        let given = |v: &Value| {
            let mut v = serde_json::to_value(v).unwrap_or_default();
            literal_json(&mut v);
            v
        };
        for key in ["example", "default"] {
            if let Some(v) = s.get(key) {
                return given(v);
            }
        }
        if let Some(v) = s.get("examples").and_then(Value::as_sequence).and_then(|e| e.first()) {
            return given(v);
        }
        if let Some(v) = s.get("enum").and_then(Value::as_sequence).and_then(|e| e.first()) {
            return given(v);
        }
        if depth >= MAX_DEPTH {
            return serde_json::Value::Null;
        }
        if let Some(all) = s.get("allOf").and_then(Value::as_sequence) {
            let mut merged = serde_json::Map::new();
            for part in all {
                if let serde_json::Value::Object(o) = self.sample(part, at, depth + 1) {
                    merged.extend(o);
                }
            }
            return serde_json::Value::Object(merged);
        }
        for key in ["oneOf", "anyOf"] {
            if let Some(first) = s.get(key).and_then(Value::as_sequence).and_then(|e| e.first()) {
                return self.sample(first, at, depth + 1);
            }
        }
        // 3.1: `type` may be a list (`[string, "null"]`).
        let ty = match s.get("type") {
            Some(Value::Sequence(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null"),
            Some(t) => t.as_str(),
            None if s.get("properties").is_some() => Some("object"),
            None => None,
        };
        let format = s.get("format").and_then(Value::as_str).unwrap_or_default();
        match ty {
            Some("object") => {
                let mut o = serde_json::Map::new();
                if let Some(props) = s.get("properties").and_then(Value::as_mapping) {
                    for (k, v) in props {
                        if let Some(k) = k.as_str() {
                            o.insert(super::literal(k), self.sample(v, at, depth + 1));
                        }
                    }
                }
                serde_json::Value::Object(o)
            }
            Some("array") => match s.get("items") {
                Some(items) => serde_json::Value::Array(vec![self.sample(items, at, depth + 1)]),
                None => serde_json::Value::Array(vec![]),
            },
            Some("integer") => s.get("minimum").and_then(Value::as_i64).unwrap_or(1).into(),
            Some("number") => s.get("minimum").and_then(Value::as_f64).unwrap_or(1.5).into(),
            Some("boolean") => true.into(),
            Some("string") => match format {
                "uuid" => "{{ uuid() }}".into(),
                "date-time" => "{{ now() }}".into(),
                "date" => "2026-01-01".into(),
                "email" => "user@example.com".into(),
                "uri" | "url" => "https://example.com/".into(),
                _ => "string".into(),
            },
            _ => serde_json::Value::Null,
        }
    }
}

/// Text for a path, query or header value.
fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The security requirement in force (the operation's, else the document's) as headers and
/// query parameters from the environment.
fn security(
    doc: &mut Doc<'_>,
    op: &Value,
    secrets: &mut Secrets,
    host: Option<&str>,
    at: &str,
) -> Vec<(bool, String, String)> {
    let requirement = op.get("security").or_else(|| doc.root.get("security")).and_then(Value::as_sequence);
    let Some(first) = requirement.and_then(|r| r.first()).and_then(Value::as_mapping) else { return Vec::new() };
    let mut out = Vec::new();
    for name in first.keys().filter_map(Value::as_str) {
        let Some(scheme) = doc.root.get("components").and_then(|c| c.get("securitySchemes")).and_then(|s| s.get(name))
        else {
            doc.warnings.push(format!("{at}: security scheme `{name}` is not defined; left out"));
            continue;
        };
        let kind = scheme.get("type").and_then(Value::as_str).unwrap_or_default();
        let http = scheme.get("scheme").and_then(Value::as_str).unwrap_or_default().to_ascii_lowercase();
        match (kind, http.as_str()) {
            // A scheme's variable is told from another's by its name (the value it stands for).
            ("http", "bearer") | ("oauth2" | "openIdConnect", _) => {
                let from = format!("security scheme {name} ({kind}: the token)");
                let value = secrets.take_unheld(host, "Authorization", name, from);
                out.push((true, "Authorization".into(), format!("Bearer {value}")));
            }
            ("http", "basic") => {
                let from = format!("security scheme {name} (set it to user:password, base64)");
                let value = secrets.take_unheld(host, "Authorization", name, from);
                out.push((true, "Authorization".into(), format!("Basic {value}")));
            }
            ("apiKey", _) => {
                let key = scheme.get("name").and_then(Value::as_str).unwrap_or(name);
                let value = secrets.take_unheld(host, key, name, format!("security scheme {name} (API key)"));
                match scheme.get("in").and_then(Value::as_str) {
                    Some("query") => out.push((false, key.to_string(), value)),
                    Some("cookie") => out.push((true, "Cookie".into(), format!("{key}={value}"))),
                    _ => out.push((true, key.to_string(), value)),
                }
            }
            _ => doc.warnings.push(format!("{at}: security scheme `{name}` ({kind} {http}) is not converted")),
        }
    }
    out
}

/// YAML integers past what the reader holds (`maximum: 18446744073709551616`, `minimum:
/// -1e400`-like limits in generated specs) as the text they are written as, so the document
/// reads: a plain scalar of 20 digits or more becomes a quoted one. Text elsewhere untouched.
fn quote_big_integers(text: &str) -> std::borrow::Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut last = 0;
    let mut i = 0;
    while i < bytes.len() {
        if !(bytes[i] == b'-' || bytes[i].is_ascii_digit()) {
            i += 1;
            continue;
        }
        let start = i;
        let sign = usize::from(bytes[i] == b'-');
        let mut j = i + sign;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        let digits = j - i - sign;
        let before = text[..start].trim_end_matches(' ');
        let opens = before.ends_with(':') || before.ends_with('-') || before.ends_with('[') || before.ends_with(',');
        let after = text[j..].trim_start_matches(' ');
        let closes = after.is_empty() || after.starts_with(['\n', '\r', ',', ']', '}', '#']);
        if digits >= 20 && opens && closes && (start == 0 || !bytes[start - 1].is_ascii_alphanumeric()) {
            let o = out.get_or_insert_with(String::new);
            o.push_str(&text[last..start]);
            o.push('\'');
            o.push_str(&text[start..j]);
            o.push('\'');
            last = j;
        }
        i = if j > i { j } else { i + 1 };
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[last..]);
            std::borrow::Cow::Owned(o)
        }
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// A JSON document's raw control characters inside strings (which JSON forbids and some
/// generators write) escaped, so it reads.
fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string && c < ' ' {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
            continue;
        }
        match c {
            '\\' if in_string => escaped = !escaped,
            '"' if !escaped => in_string = !in_string,
            _ => escaped = false,
        }
        if c != '\\' {
            escaped = false;
        }
        out.push(c);
    }
    out
}

/// The document as a YAML value: JSON read as JSON (its escapes, surrogate pairs and all),
/// else YAML.
fn read_document(text: &str, source: &str) -> Result<Value, String> {
    let not = |e: String| format!("{source}: not an OpenAPI description (JSON or YAML): {e}");
    if text.trim_start().starts_with('{') {
        let json = match serde_json::from_str::<serde_json::Value>(text) {
            Ok(j) => j,
            Err(e) if e.to_string().contains("control character") => {
                serde_json::from_str(&escape_controls(text)).map_err(|e| not(e.to_string()))?
            }
            Err(e) => return Err(not(e.to_string())),
        };
        return serde_yaml::to_value(json).map_err(|e| not(e.to_string()));
    }
    // The YAML reader takes time quadratic in how deep flow collections nest: past its own
    // limit (128 levels, which it would reach only after that time), refused at once.
    if flow_depth(text) > YAML_DEPTH {
        return Err(not(format!("collections nest deeper than {YAML_DEPTH} levels (recursion limit)")));
    }
    serde_yaml::from_str(&quote_big_integers(text)).map_err(|e| not(e.to_string()))
}

/// How deep a YAML document may nest its flow collections (`[[…]]`, `{a: {…}}`): serde_yaml's
/// own recursion limit.
const YAML_DEPTH: usize = 128;

/// The deepest nesting of `[` and `{` in `text` outside quotes and comments.
fn flow_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut prev = '\n';
    for c in text.chars() {
        match (quote, c) {
            _ if comment => comment = c != '\n',
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '#') if prev.is_whitespace() => comment = true,
            (None, '"' | '\'') if depth > 0 || prev.is_whitespace() || prev == ':' => quote = Some(c),
            (None, '[' | '{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = c;
    }
    deepest
}

/// Every text of a sample body (keys and values) as Stampede sends it as it is: an example's
/// `{{Sender_Name}}` is text, not a template.
fn literal_json(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => *s = super::literal(s),
        serde_json::Value::Array(a) => a.iter_mut().for_each(literal_json),
        serde_json::Value::Object(o) => {
            let old = std::mem::take(o);
            for (k, mut x) in old {
                literal_json(&mut x);
                o.insert(super::literal(&k), x);
            }
        }
        _ => {}
    }
}

/// A Swagger 2.0 document in OpenAPI 3's shape, as far as an import reads it: `servers` from
/// `schemes`, `host` and `basePath`; `in: body` and `in: formData` parameters as a
/// `requestBody`; a parameter's type as its `schema`; `definitions`, `parameters`,
/// `responses` and `securityDefinitions` under `components`, with every `$ref` to them.
fn from_swagger(mut doc: Value) -> Value {
    swagger_refs(&mut doc);
    let get = |d: &Value, k: &str| d.get(k).cloned();
    let scheme = first_text(doc.get("schemes")).unwrap_or("http").to_string();
    let base_path = doc.get("basePath").and_then(Value::as_str).unwrap_or("").trim_end_matches('/').to_string();
    let url = match doc.get("host").and_then(Value::as_str) {
        Some(host) => format!("{scheme}://{host}{base_path}"),
        None => base_path,
    };
    let consumes = first_text(doc.get("consumes")).unwrap_or("application/json").to_string();
    let components = swagger_components(&doc);
    let mut paths = doc.get("paths").cloned().unwrap_or(Value::Mapping(Default::default()));
    for (_, item) in paths.as_mapping_mut().into_iter().flatten() {
        let Some(item) = item.as_mapping_mut() else { continue };
        let shared = item.get("parameters").cloned();
        for (_, op) in item.iter_mut() {
            let Some(op) = op.as_mapping_mut() else { continue };
            swagger_operation(op, shared.as_ref(), &consumes);
        }
        item.remove("parameters");
        if let Some(p) = shared.filter(|_| false) {
            item.insert("parameters".into(), p);
        }
    }
    let mut out = serde_yaml::Mapping::new();
    out.insert("openapi".into(), "3.0.0".into());
    if let Some(info) = get(&doc, "info") {
        out.insert("info".into(), info);
    }
    let mut server = serde_yaml::Mapping::new();
    server.insert("url".into(), if url.is_empty() { "/".into() } else { url.into() });
    out.insert("servers".into(), Value::Sequence(vec![Value::Mapping(server)]));
    out.insert("paths".into(), paths);
    out.insert("components".into(), Value::Mapping(components));
    if let Some(sec) = get(&doc, "security") {
        out.insert("security".into(), sec);
    }
    Value::Mapping(out)
}

/// Every `$ref` of a Swagger 2.0 document to its `definitions`, `parameters` or `responses` as
/// one to OpenAPI 3's `components`.
fn swagger_refs(v: &mut Value) {
    match v {
        Value::Mapping(m) => {
            for (k, x) in m.iter_mut() {
                if k.as_str() == Some("$ref")
                    && let Value::String(r) = x
                {
                    for (from, to) in [
                        ("#/definitions/", "#/components/schemas/"),
                        ("#/parameters/", "#/components/parameters/"),
                        ("#/responses/", "#/components/responses/"),
                    ] {
                        if let Some(rest) = r.strip_prefix(from) {
                            *r = format!("{to}{rest}");
                        }
                    }
                } else {
                    swagger_refs(x);
                }
            }
        }
        Value::Sequence(s) => s.iter_mut().for_each(swagger_refs),
        _ => {}
    }
}

/// The first text of a list (`schemes`, `consumes`).
fn first_text(list: Option<&Value>) -> Option<&str> {
    list.and_then(Value::as_sequence).and_then(|s| s.first()).and_then(Value::as_str)
}

/// A Swagger 2.0 document's `components`: its `definitions` as `schemas`, its `parameters`
/// and `responses`, its `securityDefinitions` as `securitySchemes` (`basic` as HTTP basic).
fn swagger_components(doc: &Value) -> serde_yaml::Mapping {
    let mut components = serde_yaml::Mapping::new();
    for (from, to) in [("definitions", "schemas"), ("parameters", "parameters"), ("responses", "responses")] {
        if let Some(v) = doc.get(from).cloned() {
            components.insert(to.into(), v);
        }
    }
    if let Some(Value::Mapping(defs)) = doc.get("securityDefinitions").cloned() {
        let mut schemes = serde_yaml::Mapping::new();
        for (name, mut def) in defs {
            if def.get("type").and_then(Value::as_str) == Some("basic") {
                def = serde_yaml::from_str("{type: http, scheme: basic}").unwrap_or(def);
            }
            schemes.insert(name, def);
        }
        components.insert("securitySchemes".into(), Value::Mapping(schemes));
    }
    components
}

/// A Swagger 2.0 operation in OpenAPI 3's shape: its parameters (the path's, `shared`, first)
/// each with a `schema`, its `in: body` or `in: formData` ones as a `requestBody` of its own
/// `consumes` type, else the document's (`consumes`).
fn swagger_operation(op: &mut serde_yaml::Mapping, shared: Option<&Value>, consumes: &str) {
    let own_consumes = first_text(op.get("consumes")).map(str::to_string);
    let mut params: Vec<Value> =
        shared.into_iter().chain(op.get("parameters")).filter_map(Value::as_sequence).flatten().cloned().collect();
    if params.is_empty() {
        return;
    }
    let (body, form, required_form) = take_body_parameters(&mut params);
    let params: Vec<Value> = params.into_iter().map(with_schema).collect();
    op.insert("parameters".into(), Value::Sequence(params));
    let media = own_consumes.unwrap_or_else(|| consumes.to_string());
    if let Some(request_body) = swagger_request_body(media, body, form, required_form) {
        op.insert("requestBody".into(), request_body);
    }
}

/// Takes the `in: body` and `in: formData` parameters out of `params`: the body's schema (the
/// last one's), the form fields' schemas by name, and the names of the required fields.
fn take_body_parameters(params: &mut Vec<Value>) -> (Option<Value>, serde_yaml::Mapping, Vec<Value>) {
    let mut body = None;
    let mut form = serde_yaml::Mapping::new();
    let mut required_form = Vec::new();
    params.retain(|p| match p.get("in").and_then(Value::as_str) {
        Some("body") => {
            body = p.get("schema").cloned();
            false
        }
        Some("formData") => {
            let name = p.get("name").cloned().unwrap_or(Value::Null);
            let mut schema = p.clone();
            if let Some(m) = schema.as_mapping_mut() {
                for k in ["name", "in", "required", "description"] {
                    m.remove(k);
                }
            }
            if p.get("required").and_then(Value::as_bool) == Some(true) {
                required_form.push(name.clone());
            }
            form.insert(name, schema);
            false
        }
        _ => true,
    });
    (body, form, required_form)
}

/// A Swagger 2.0 parameter with its type (`type`, `format`, `enum`, `default`, `items`, limits)
/// as its `schema` too, as OpenAPI 3 reads it; one with a schema or a `$ref` as it is.
fn with_schema(mut p: Value) -> Value {
    if p.get("schema").is_none()
        && p.get("$ref").is_none()
        && let Some(m) = p.as_mapping_mut()
    {
        let mut schema = serde_yaml::Mapping::new();
        for k in ["type", "format", "enum", "default", "items", "minimum", "maximum"] {
            if let Some(v) = m.get(k).cloned() {
                schema.insert(k.into(), v);
            }
        }
        m.insert("schema".into(), Value::Mapping(schema));
    }
    p
}

/// The OpenAPI 3 `requestBody` of a Swagger 2.0 operation's body parameter (its schema `body`,
/// as `media`) or form fields (`form`, an object of them, as `media` when it is multipart, else
/// as a URL-encoded form); `None` when it has neither.
fn swagger_request_body(
    media: String,
    body: Option<Value>,
    form: serde_yaml::Mapping,
    required_form: Vec<Value>,
) -> Option<Value> {
    let content = match (body, form.is_empty()) {
        (Some(schema), _) => Some((media, serde_yaml::to_value(serde_json::json!({})).ok().map(|_| schema))),
        (None, false) => {
            let media = if media.contains("multipart") { media } else { "application/x-www-form-urlencoded".into() };
            let mut schema = serde_yaml::Mapping::new();
            schema.insert("type".into(), "object".into());
            schema.insert("properties".into(), Value::Mapping(form));
            if !required_form.is_empty() {
                schema.insert("required".into(), Value::Sequence(required_form));
            }
            Some((media, Some(Value::Mapping(schema))))
        }
        (None, true) => None,
    };
    let (media, Some(schema)) = content? else { return None };
    let mut m = serde_yaml::Mapping::new();
    m.insert("schema".into(), schema);
    let mut c = serde_yaml::Mapping::new();
    c.insert(media.into(), Value::Mapping(m));
    let mut rb = serde_yaml::Mapping::new();
    rb.insert("content".into(), Value::Mapping(c));
    Some(Value::Mapping(rb))
}

/// `(name, value)` pairs: a query's parameters, headers, a form's fields.
type Pairs = Vec<(String, String)>;

/// One operation being imported: its path, its path item, itself, its method, and where it is
/// (`GET /path`) for warnings.
struct Operation<'a> {
    path: &'a str,
    item: &'a Value,
    op: &'a Value,
    method: &'a str,
    at: String,
}

/// Imports an OpenAPI 3.0 or 3.1 description from `source`.
pub(crate) fn openapi(text_in: &str, source: &str) -> Result<Imported, String> {
    let mut root = read_document(text_in, source)?;
    let mut swagger = false;
    if let Some(v) = root.get("swagger") {
        let v = v.as_str().map(str::to_string).unwrap_or_else(|| format!("{v:?}"));
        if !v.starts_with('2') {
            return Err(format!("{source}: `swagger: {v}` is not Swagger 2.0"));
        }
        root = from_swagger(root);
        swagger = true;
    }
    let version = root.get("openapi").and_then(Value::as_str).unwrap_or_default().to_string();
    if !version.starts_with("3.") {
        return Err(format!("{source}: `openapi: {version}` is not OpenAPI 3 (nor Swagger 2.0)"));
    }
    let mut doc = Doc { root: &root, warnings: Vec::new() };
    if swagger {
        doc.warnings.push("a Swagger 2.0 document: read as OpenAPI 3 (servers from host and basePath, body and form parameters as request bodies)".into());
    }
    let mut secrets = Secrets::default();
    let base = server_base(&root);
    let relative = !base.contains("://");
    let host = host_of(&base);
    let host = host.as_deref();
    if relative {
        secrets.env.insert(super::BASE_URL.into(), format!("the API's host: servers[0] is the relative `{base}`"));
    }
    let mut steps = Vec::new();
    let paths = root.get("paths").and_then(Value::as_mapping).ok_or_else(|| format!("{source}: no `paths`"))?;
    for (path, item) in paths {
        let Some(path) = path.as_str() else { continue };
        let Some(item) = doc.resolve(item, &format!("paths.{path}")) else { continue };
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let at = format!("{} {path}", method.to_ascii_uppercase());
            let operation = Operation { path, item, op, method, at };
            steps.push(operation_step(&mut doc, &operation, &mut secrets, host));
        }
    }
    if steps.is_empty() {
        return Err(format!("{source}: no operation to import"));
    }
    let mut imported = Imported { env: secrets.env.clone(), warnings: doc.warnings, ..Imported::default() };
    let mut yaml = imported.head(source, "openapi", steps.len());
    let title = root.get("info").and_then(|i| i.get("title")).and_then(Value::as_str).unwrap_or("imported");
    let base_url = if relative { format!("{{{{env.BASE_URL}}}}{base}") } else { base };
    write_top(&mut yaml, title, Some(&base_url));
    write_steps(&mut yaml, "imported", &steps);
    imported.yaml = yaml;
    Ok(imported.scrubbed(&secrets))
}

/// The first server's URL, its variables at their defaults, without a trailing `/`; `/` when
/// there is none (so the base is empty).
fn server_base(root: &Value) -> String {
    let server = root.get("servers").and_then(Value::as_sequence).and_then(|s| s.first());
    let mut base = server.and_then(|s| s.get("url")).and_then(Value::as_str).unwrap_or("/").to_string();
    if let Some(vars) = server.and_then(|s| s.get("variables")).and_then(Value::as_mapping) {
        for (k, v) in vars {
            let (Some(k), Some(d)) = (k.as_str(), v.get("default").and_then(Value::as_str)) else { continue };
            base = base.replace(&format!("{{{k}}}"), d);
        }
    }
    base.trim_end_matches('/').to_string()
}

/// The step of one operation: its required parameters, its security, a JSON or form body, and
/// a check on its success status when it documents one; credentials from the environment.
fn operation_step<'a>(doc: &mut Doc<'a>, o: &Operation<'a>, secrets: &mut Secrets, host: Option<&str>) -> Step {
    let before = doc.warnings.len();
    let at = &o.at;
    let name = o.op.get("operationId").and_then(Value::as_str).map_or_else(|| at.clone(), str::to_string);
    let (url_path, mut query, mut headers) = parameters(doc, o, secrets, host);
    for (header, h, v) in security(doc, o.op, secrets, host, at) {
        if header {
            headers.push((h, v));
        } else {
            query.push((h, v));
        }
    }
    let (mut json, form) = request_body(doc, o, secrets, host);
    let success = success_statuses(o.op);
    if let Some(j) = json.as_mut() {
        secrets.json(j, host, at);
    }
    let summary =
        o.op.get("summary").and_then(Value::as_str).map(|s| format!(": {}", s.replace('\n', " "))).unwrap_or_default();
    Step {
        notes: doc.warnings[before..].to_vec(),
        comment: format!("from {at}{summary}"),
        name,
        method: o.method.to_ascii_uppercase(),
        url: format!("{{{{baseUrl}}}}{url_path}"),
        query,
        headers,
        json,
        form: form.unwrap_or_default(),
        status: if let [only] = success[..] { Some(only) } else { None },
        ..Step::default()
    }
}

/// The success statuses (2xx) an operation documents responses for.
fn success_statuses(op: &Value) -> Vec<u16> {
    op.get("responses")
        .and_then(Value::as_mapping)
        .into_iter()
        .flatten()
        .filter_map(|(code, _)| match code {
            Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
            Value::String(s) => s.parse().ok(),
            _ => None,
        })
        .filter(|c| (200..300).contains(c))
        .collect()
}

/// An example as the document gives it, as JSON: its text sent as it is (a `{{name}}` in it is
/// no template).
fn example(e: &Value) -> serde_json::Value {
    let mut e = serde_json::to_value(e).unwrap_or_default();
    literal_json(&mut e);
    e
}

/// An operation's required parameters (the path item's, then its own) from their examples or
/// schemas: the path with its `{name}`s filled in, the query and the headers; credentials from
/// the environment, another place listed.
fn parameters<'a>(
    doc: &mut Doc<'a>,
    o: &Operation<'a>,
    secrets: &mut Secrets,
    host: Option<&str>,
) -> (String, Pairs, Pairs) {
    let at = &o.at;
    let params: Vec<&Value> = o
        .item
        .get("parameters")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .chain(o.op.get("parameters").and_then(Value::as_sequence).into_iter().flatten())
        .collect();
    let mut url_path = o.path.to_string();
    let mut query = Vec::new();
    let mut headers: Vec<(String, String)> = Vec::new();
    for p in params {
        let Some(p) = doc.resolve(p, at) else { continue };
        let pname = p.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let place = p.get("in").and_then(Value::as_str).unwrap_or_default();
        let required = p.get("required").and_then(Value::as_bool).unwrap_or(place == "path");
        if !required {
            continue;
        }
        let value = match p.get("example") {
            Some(e) => example(e),
            None => match p.get("schema") {
                Some(s) => doc.sample(s, at, 0),
                None => serde_json::Value::String("1".into()),
            },
        };
        let value = text(&value);
        let value = secrets.field(host, &pname, &value, || format!("{at}: {place} parameter {pname}"));
        match place {
            "path" => url_path = url_path.replace(&format!("{{{pname}}}"), &value),
            "query" => query.push((pname, value)),
            "header" => headers.push((pname, value)),
            other => doc.warnings.push(format!("{at}: a required {other} parameter `{pname}` is not converted")),
        }
    }
    (url_path, query, headers)
}

/// An operation's request body: JSON (`application/json` or a `+json` type) from its example or
/// schema, or a URL-encoded form's fields from its schema (credentials from the environment);
/// another type listed.
fn request_body<'a>(
    doc: &mut Doc<'a>,
    o: &Operation<'a>,
    secrets: &mut Secrets,
    host: Option<&str>,
) -> (Option<serde_json::Value>, Option<Pairs>) {
    let at = &o.at;
    let Some(body) = o.op.get("requestBody").and_then(|b| doc.resolve(b, at)) else { return (None, None) };
    let content = body.get("content").and_then(Value::as_mapping);
    let media = |t: &str| content.and_then(|c| c.get(t));
    if let Some(m) = media("application/json").or_else(|| {
        content.and_then(|c| c.iter().find(|(k, _)| k.as_str().is_some_and(|k| k.ends_with("+json"))).map(|(_, v)| v))
    }) {
        let json = match (m.get("example"), m.get("schema")) {
            (Some(e), _) => example(e),
            (None, Some(s)) => doc.sample(s, at, 0),
            (None, None) => serde_json::json!({}),
        };
        return (Some(json), None);
    }
    if let Some(m) = media("application/x-www-form-urlencoded") {
        let sample = m.get("schema").map(|s| doc.sample(s, at, 0)).unwrap_or_default();
        let form = sample.as_object().map(|o| {
            o.iter()
                .map(|(k, v)| (k.clone(), secrets.field(host, k, &text(v), || format!("{at}: form field {k}"))))
                .collect::<Vec<_>>()
        });
        return (None, form);
    }
    if let Some(types) = content {
        let types: Vec<&str> = types.keys().filter_map(Value::as_str).collect();
        doc.warnings.push(format!("{at}: a `{}` body is not converted", types.join("`, `")));
    }
    (None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_give_samples_and_broken_refs_are_named_not_fatal() {
        let doc = r##"
openapi: 3.1.0
info: {title: t, version: "1"}
servers: [{url: "http://{host}:8080/v1", variables: {host: {default: 127.0.0.1}}}]
paths:
  /items/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: integer, minimum: 7}}]
    post:
      operationId: addItem
      parameters: [{name: dry, in: query, required: true, example: "yes"}, {name: opt, in: query, schema: {type: string}}]
      requestBody:
        content:
          application/json:
            schema:
              allOf:
                - $ref: "#/components/schemas/Base"
                - {type: object, properties: {when: {type: string, format: date-time}, tags: {type: array, items: {type: string, enum: [a, b]}}}}
      responses: {"201": {description: created}, "400": {description: bad}}
  /broken:
    get:
      requestBody: {content: {application/json: {schema: {$ref: "#/components/schemas/Missing"}}}}
      responses: {"200": {description: ok}}
components:
  schemas:
    Base: {type: object, properties: {name: {type: [string, "null"], example: kettle}, id: {type: string, format: uuid}}}
"##;
        let out = openapi(doc, "t.yaml").unwrap();
        let file: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&out.yaml).unwrap();
        assert_eq!(file.base_url.as_deref(), Some("http://127.0.0.1:8080/v1"));
        let add = &file.scenarios[0].steps[0];
        let req = add.request.as_ref().unwrap();
        assert_eq!(
            (add.name.as_str(), req.method.as_str(), req.url.as_str()),
            ("addItem", "POST", "{{baseUrl}}/items/7")
        );
        assert_eq!(req.query.keys().collect::<Vec<_>>(), ["dry"], "required parameters only");
        assert_eq!(
            req.json.as_ref().unwrap(),
            &serde_json::json!({"name": "kettle", "id": "{{ uuid() }}", "when": "{{ now() }}", "tags": ["a"]})
        );
        assert!(out.yaml.contains("check: {status: 201}"), "{}", out.yaml);
        assert!(
            out.warnings.iter().any(|w| w.contains("`$ref: #/components/schemas/Missing` leads nowhere")),
            "{:?}",
            out.warnings
        );
        assert!(openapi("swagger: '1.2'", "s.yaml").unwrap_err().contains("is not Swagger 2.0"));
        assert!(openapi("openapi: 4.0.0", "s.yaml").unwrap_err().contains("is not OpenAPI 3"));
        // Integers past 64 bits (generated specs) are read as the text they are.
        assert_eq!(
            quote_big_integers("a: 18446744073709551616\nb: [1, -99999999999999999999]\nc: x1234567890123456789012"),
            "a: '18446744073709551616'\nb: [1, '-99999999999999999999']\nc: x1234567890123456789012"
        );
        let swagger = r##"{"swagger": "2.0", "host": "127.0.0.1:8080", "basePath": "/v2/", "schemes": ["http"],
            "paths": {"/pet": {"post": {"operationId": "addPet", "parameters": [{"in": "body", "name": "body", "schema": {"$ref": "#/definitions/Pet"}}],
                "responses": {"200": {"description": "ok"}}}},
              "/pet/{id}/upload": {"post": {"operationId": "upload", "consumes": ["application/x-www-form-urlencoded"],
                "parameters": [{"in": "path", "name": "id", "required": true, "type": "integer", "minimum": 3},
                               {"in": "formData", "name": "note", "type": "string", "default": "{{hi}}"}],
                "responses": {"200": {"description": "ok"}}}}},
            "definitions": {"Pet": {"type": "object", "properties": {"name": {"type": "string", "example": "rex"}}}}}"##;
        let out = openapi(swagger, "petstore.json").unwrap();
        let file = stampede_engine::parse_str(&out.yaml, std::path::Path::new("s.yaml")).unwrap();
        assert_eq!(file.base_url.as_deref(), Some("http://127.0.0.1:8080/v2"), "{}", out.yaml);
        let steps = &file.scenarios[0].steps;
        let add = steps[0].request.as_ref().unwrap();
        assert_eq!((add.method.as_str(), add.json.as_ref()), ("POST", Some(&serde_json::json!({"name": "rex"}))));
        let upload = steps[1].request.as_ref().unwrap();
        assert_eq!(upload.url, "{{baseUrl}}/pet/3/upload");
        assert_eq!(upload.form.as_ref().unwrap()["note"], "{{ '{{' }}hi}}", "an example's braces are text");
        assert!(openapi("openapi: 3.0.0\ninfo: {title: t}\npaths: {}", "e.yaml").unwrap_err().contains("no operation"));
        assert!(openapi("{", "x.json").unwrap_err().contains("not an OpenAPI description"));
    }
}
