//! gRPC steps: the `.proto` files compiled in process (protox, no `protoc`), the method found
//! by name, its request messages as JSON templates checked field by field against the
//! descriptor, and the call's HTTP/2 request head (a [`RequestPlan`] of its own).
//!
//! At run time each message is rendered to JSON, read into a message of its descriptor
//! (protobuf's JSON mapping, unknown fields refused), encoded and framed; a call whose
//! messages never vary is encoded once, here. Answers are decoded back to JSON only when a
//! check or extractor reads them.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use bytes::{BufMut, Bytes};
use prost::Message as _;
use prost_reflect::{DescriptorPool, DynamicMessage, Kind, MessageDescriptor, MethodDescriptor};
use stampede_model::scenario::{GrpcSpec, RequestSpec, ScenarioFile};

use crate::compile::files::Files;
use crate::compile::request::{RequestPlan, compile_request};
use crate::compile::template::{Scope, Template};
use crate::error::Problems;

/// How the call's messages flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// One request message, one answer message.
    Unary,
    /// One request message, a stream of answers.
    ServerStreaming,
    /// A stream of request messages (`messages`), one answer.
    ClientStreaming,
    /// Streams both ways: request `messages` and answers.
    Bidirectional,
}

impl CallKind {
    fn of(method: &MethodDescriptor) -> CallKind {
        match (method.is_client_streaming(), method.is_server_streaming()) {
            (false, false) => CallKind::Unary,
            (false, true) => CallKind::ServerStreaming,
            (true, false) => CallKind::ClientStreaming,
            (true, true) => CallKind::Bidirectional,
        }
    }

    /// Whether the answer is a stream (read as a JSON list).
    pub fn streams_answers(self) -> bool {
        matches!(self, CallKind::ServerStreaming | CallKind::Bidirectional)
    }

    fn name(self) -> &'static str {
        match self {
            CallKind::Unary => "unary",
            CallKind::ServerStreaming => "server-streaming",
            CallKind::ClientStreaming => "client-streaming",
            CallKind::Bidirectional => "bidirectional",
        }
    }
}

/// A compiled gRPC call.
#[derive(Debug)]
pub struct GrpcPlan {
    /// `package.Service/Method`.
    pub method: String,
    /// How the method streams, from its descriptor: whether it takes `messages` and answers with a list.
    pub kind: CallKind,
    input: MessageDescriptor,
    output: MessageDescriptor,
    /// The request messages, as JSON templates.
    messages: Vec<Template>,
    /// The framed messages, when none of them varies.
    fixed_body: Option<Bytes>,
    /// The whole request (head and messages) and where it goes, when nothing in it varies.
    fixed_request: Option<(crate::wire::url::HttpUrl, Vec<u8>)>,
    /// The call's deadline.
    pub deadline: Duration,
}

impl GrpcPlan {
    /// The framed request messages for one call into `out`.
    pub fn encode(&self, slots: &[String], out: &mut Vec<u8>) -> Result<(), String> {
        if let Some(fixed) = &self.fixed_body {
            out.extend_from_slice(fixed);
            return Ok(());
        }
        let mut json = Vec::new();
        for (i, template) in self.messages.iter().enumerate() {
            json.clear();
            template.render_into(slots, &mut json);
            if let Some(message) = crate::compile::template::take_render_error() {
                return Err(format!("expression {message}"));
            }
            let message = read_message(&self.input, &json).map_err(|e| {
                let which = if self.messages.len() > 1 { format!("message {}", i + 1) } else { "the message".into() };
                format!("{which} does not fit {}: {e}", self.input.full_name())
            })?;
            frame(&message, out);
        }
        Ok(())
    }

    /// Counts the answer's messages in `body` (framed), and with `json` writes them there as
    /// JSON: the message, or a list of them for a streamed answer (a unary answer without a
    /// message, as a failed call has, writes nothing).
    pub fn decode(&self, body: &[u8], json: Option<&mut Vec<u8>>, ok: bool) -> Result<u64, String> {
        let mut rest = body;
        let mut frames = Vec::new();
        while !rest.is_empty() {
            if rest.len() < 5 {
                return Err("the answer ends inside a message's length prefix".into());
            }
            if rest[0] != 0 {
                return Err("the answer is compressed, which this client did not ask for".into());
            }
            let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            if rest.len() < 5 + len {
                return Err(format!("the answer ends inside a message ({} of its {len} bytes)", rest.len() - 5));
            }
            frames.push(&rest[5..5 + len]);
            rest = &rest[5 + len..];
        }
        let Some(out) = json else { return Ok(frames.len() as u64) };
        let mut decoded = Vec::with_capacity(frames.len());
        for bytes in &frames {
            let message = DynamicMessage::decode(self.output.clone(), *bytes)
                .map_err(|e| format!("cannot decode the answer as {}: {e}", self.output.full_name()))?;
            decoded.push(message);
        }
        let options = prost_reflect::SerializeOptions::new().skip_default_fields(false);
        let mut ser = serde_json::Serializer::new(std::mem::take(out));
        let written = if self.kind.streams_answers() {
            use serde::Serializer as _;
            use serde::ser::SerializeSeq;
            let mut seq = (&mut ser).serialize_seq(Some(decoded.len())).map_err(|e| e.to_string())?;
            for m in &decoded {
                seq.serialize_element(&WithOptions(m, &options)).map_err(|e| e.to_string())?;
            }
            seq.end().map_err(|e| e.to_string())
        } else {
            match decoded.first() {
                Some(m) => m.serialize_with_options(&mut ser, &options).map_err(|e| e.to_string()),
                None if ok => Err("the call ended OK without an answer".to_string()),
                None => Ok(()),
            }
        };
        *out = ser.into_inner();
        written.map(|()| frames.len() as u64)
    }

    /// The whole request and its target, when nothing in it varies.
    pub fn fixed_request(&self) -> Option<(&crate::wire::url::HttpUrl, &[u8])> {
        self.fixed_request.as_ref().map(|(t, b)| (t, b.as_slice()))
    }

    /// Request messages per call.
    pub fn messages_per_call(&self) -> u64 {
        self.messages.len() as u64
    }
}

struct WithOptions<'a>(&'a DynamicMessage, &'a prost_reflect::SerializeOptions);

impl serde::Serialize for WithOptions<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize_with_options(s, self.1)
    }
}

fn read_message(desc: &MessageDescriptor, json: &[u8]) -> Result<DynamicMessage, String> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let message = DynamicMessage::deserialize(desc.clone(), &mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(message)
}

fn frame(message: &DynamicMessage, out: &mut Vec<u8>) {
    let len = message.encoded_len();
    out.reserve(5 + len);
    out.put_u8(0);
    out.put_u32(len as u32);
    message.encode(out).expect("a Vec grows");
}

/// The services a scenario's `.proto` files define, compiled once per scenario, with those
/// its server described by reflection.
#[derive(Debug, Default)]
pub struct Protos {
    pool: Option<DescriptorPool>,
    /// Compiled (or failed) already.
    tried: bool,
    /// The server's answer to reflection, when asked.
    reflected: Option<DescriptorPool>,
}

/// Reads `.proto` files through [`Files`] (the disk beside the scenario, or `spec.data`),
/// trying each include root in turn; Google's well-known types come built in.
struct Resolver {
    roots: Vec<String>,
    base_dir: PathBuf,
    contents: Option<BTreeMap<String, Vec<u8>>>,
    /// The sources read, by name: error positions are computed from them.
    sources: Rc<RefCell<BTreeMap<String, String>>>,
    google: protox::file::GoogleFileResolver,
}

impl protox::file::FileResolver for Resolver {
    fn resolve_path(&self, path: &Path) -> Option<String> {
        Some(path.to_string_lossy().into_owned())
    }

    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        if name.starts_with("google/protobuf/") {
            return self.google.open_file(name);
        }
        let files = Files::new(&self.base_dir, self.contents.as_ref());
        for root in &self.roots {
            let path = if root.is_empty() || root == "." { name.to_string() } else { format!("{root}/{name}") };
            if let Ok(bytes) = files.read(&path) {
                let source =
                    String::from_utf8(bytes).map_err(|_| protox::Error::new(format!("{name} is not UTF-8")))?;
                self.sources.borrow_mut().insert(name.to_string(), source.clone());
                return protox::file::File::from_source(name, &source);
            }
        }
        Err(protox::Error::file_not_found(name))
    }
}

impl Protos {
    /// Nothing compiled yet; `reflected` is what the server described (`grpc.reflect`), `None` when
    /// not asked (validating).
    pub fn new(reflected: Option<DescriptorPool>) -> Protos {
        Protos { reflected, ..Protos::default() }
    }

    /// The services of `file`'s `grpc.protoFiles`, compiled at the first call, with those the
    /// server described (`grpc.reflect`). Problems (a file that does not compile: its name,
    /// line and column) go to `problems`. Reflection not asked yet (validating), the methods
    /// the steps name stand in, taking and giving any message.
    pub fn pool(&mut self, file: &ScenarioFile, files: Files<'_>, problems: &mut Problems) -> Option<&DescriptorPool> {
        if !self.tried {
            self.tried = true;
            let reflect = file.grpc.as_ref().is_some_and(|g| g.reflect);
            let compiled = compile_protos(file, files, reflect, problems);
            self.pool = match (reflect, compiled) {
                (false, compiled) => compiled,
                (true, None) => None,
                (true, Some(compiled)) => {
                    let served = match self.reflected.take() {
                        Some(pool) => Some(pool),
                        None => stand_ins(file, &compiled, problems),
                    };
                    served.and_then(|served| merged(served, &compiled, problems))
                }
            };
        }
        self.pool.as_ref()
    }
}

/// `served` with the files of `compiled` it lacks (a file of both is taken from the server).
fn merged(mut served: DescriptorPool, compiled: &DescriptorPool, problems: &mut Problems) -> Option<DescriptorPool> {
    let missing: Vec<_> = compiled
        .files()
        .filter(|f| served.get_file_by_name(f.name()).is_none())
        .map(|f| f.file_descriptor_proto().clone())
        .collect();
    match served.add_file_descriptor_protos(missing) {
        Ok(()) => Some(served),
        Err(e) => {
            problems.add("grpc.protoFiles", format!("do not fit the services the server described: {e}"));
            None
        }
    }
}

/// A service for each one the steps name that `compiled` lacks, whose methods take and give
/// any message (`google.protobuf.Struct`, streams both ways): what validation checks a
/// `grpc.reflect` scenario against before the server is asked.
fn stand_ins(file: &ScenarioFile, compiled: &DescriptorPool, problems: &mut Problems) -> Option<DescriptorPool> {
    let mut services: BTreeMap<&str, BTreeMap<&str, std::collections::BTreeSet<&str>>> = BTreeMap::new();
    for name in grpc_methods(file) {
        let Some((service, method)) = service_and_method(name) else { continue };
        if compiled.get_service_by_name(service).is_some() {
            continue;
        }
        let (package, service) = service.rsplit_once('.').unwrap_or(("", service));
        services.entry(package).or_default().entry(service).or_default().insert(method);
    }
    let mut sources = BTreeMap::new();
    for (i, (package, services)) in services.iter().enumerate() {
        let mut text = String::from("syntax = \"proto3\";\nimport \"google/protobuf/struct.proto\";\n");
        if !package.is_empty() {
            text.push_str(&format!("package {package};\n"));
        }
        for (service, methods) in services {
            text.push_str(&format!("service {service} {{\n"));
            for m in methods {
                text.push_str(&format!(
                    "  rpc {m}(stream google.protobuf.Struct) returns (stream google.protobuf.Struct);\n"
                ));
            }
            text.push_str("}\n");
        }
        sources.insert(format!("stampede-stand-in-{i}.proto"), text.into_bytes());
    }
    let names: Vec<String> = sources.keys().cloned().collect();
    match compile_sources(sources, &names) {
        Ok(pool) => Some(pool),
        Err(e) => {
            problems.add("grpc.reflect", format!("the steps' methods are not `package.Service/Method` names: {e}"));
            None
        }
    }
}

/// `package.Service` and `Method` of a step's `method`.
pub fn service_and_method(name: &str) -> Option<(&str, &str)> {
    name.trim().trim_start_matches('/').rsplit_once('/')
}

/// The methods `file`'s `grpc` steps name (setup, init, scenarios and teardown, in blocks too).
pub fn grpc_methods(file: &ScenarioFile) -> Vec<&str> {
    fn walk<'a>(steps: &'a [stampede_model::scenario::Step], out: &mut Vec<&'a str>) {
        for s in steps {
            if let Some(g) = &s.grpc {
                out.push(g.method.as_str());
            }
            walk(&s.steps, out);
        }
    }
    let mut out = Vec::new();
    for steps in [&file.setup, &file.init, &file.teardown] {
        walk(steps, &mut out);
    }
    for s in &file.scenarios {
        walk(&s.steps, &mut out);
    }
    out
}

/// Compiles `.proto` sources held in memory (Google's well-known types come built in).
pub fn compile_sources(sources: BTreeMap<String, Vec<u8>>, names: &[String]) -> Result<DescriptorPool, String> {
    let resolver = Resolver {
        roots: vec![String::new()],
        base_dir: PathBuf::from("."),
        contents: Some(sources),
        sources: Rc::default(),
        google: protox::file::GoogleFileResolver::new(),
    };
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true);
    for name in names {
        compiler.open_file(name).map_err(|e| e.to_string())?;
    }
    Ok(compiler.descriptor_pool())
}

fn compile_protos(
    file: &ScenarioFile,
    files: Files<'_>,
    reflect: bool,
    problems: &mut Problems,
) -> Option<DescriptorPool> {
    let Some(grpc) = file.grpc.as_ref().filter(|g| !g.proto_files.is_empty()) else {
        if reflect {
            return Some(DescriptorPool::new());
        }
        problems.add(
            "grpc.protoFiles",
            "a `grpc` step needs the services' `.proto` files (`grpc: {protoFiles: [...]}`), or \
             `grpc: {reflect: true}` to ask the server for them",
        );
        return None;
    };
    let mut roots: Vec<String> = grpc.import_paths.iter().map(|p| p.trim_end_matches('/').to_string()).collect();
    roots.push(String::new());
    for p in &grpc.proto_files {
        if let Some((dir, _)) = p.rsplit_once('/')
            && !roots.iter().any(|r| r == dir)
        {
            roots.push(dir.to_string());
        }
    }
    let sources = Rc::new(RefCell::new(BTreeMap::new()));
    let resolver = Resolver {
        roots,
        base_dir: files.base_dir().to_path_buf(),
        contents: files.contents().cloned(),
        sources: sources.clone(),
        google: protox::file::GoogleFileResolver::new(),
    };
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler.include_imports(true);
    let before = problems.len();
    for (i, name) in grpc.proto_files.iter().enumerate() {
        if let Err(e) = compiler.open_file(name) {
            let at = format!("grpc.protoFiles[{i}]");
            let message = if e.is_file_not_found() && e.file() == Some(name.as_str()) {
                match files.read(name) {
                    Err(read) => read.to_string(),
                    Ok(_) => e.to_string(),
                }
            } else {
                describe(&e, &sources.borrow(), &files)
            };
            problems.add(at, message);
        }
    }
    (problems.len() == before).then(|| compiler.descriptor_pool())
}

/// A protox error as `FILE:LINE:COLUMN: message`, from its first labelled span.
fn describe(e: &protox::Error, sources: &BTreeMap<String, String>, files: &Files<'_>) -> String {
    use miette::Diagnostic;
    let file = e.file().map(str::to_string);
    let offset = e.labels().and_then(|mut l| l.next()).map(|l| l.offset());
    let mut message = e.to_string();
    if let Some(help) = e.help() {
        message.push_str(&format!(" ({help})"));
    }
    match (file, offset) {
        (Some(name), Some(offset)) => {
            let shown = files.shown(&name).display().to_string();
            match sources.get(&name) {
                Some(text) => {
                    let (line, column) = line_column(text, offset);
                    format!("{shown}:{line}:{column}: {message}")
                }
                None => format!("{shown}: {message}"),
            }
        }
        (Some(name), None) => format!("{}: {message}", files.shown(&name).display()),
        _ => message,
    }
}

/// Line and column (from 1, in characters) of byte `offset` in `text`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Compiles one `grpc:` step: its method, messages and request head.
pub fn compile_call(
    spec: &GrpcSpec,
    pool: &DescriptorPool,
    file: &ScenarioFile,
    scope: &Scope,
    files: Files<'_>,
    loc: &str,
    problems: &mut Problems,
) -> Option<(RequestPlan, GrpcPlan)> {
    let at = |field: &str| format!("{loc}: grpc.{field}");
    let before = problems.len();
    let method = find_method(pool, &spec.method).map_err(|e| problems.add(at("method"), e)).ok()?;
    let kind = CallKind::of(&method);
    let input = method.input();
    let empty = serde_json::Value::Object(Default::default());
    let values: Vec<(String, &serde_json::Value)> = match (&spec.message, &spec.messages, kind) {
        (Some(_), Some(_), _) => {
            problems.add(at("messages"), "set `message` or `messages`, not both");
            return None;
        }
        (_, Some(_), CallKind::Unary | CallKind::ServerStreaming) => {
            problems.add(at("messages"), format!("{} is {}: it takes one request `message`", spec.method, kind.name()));
            return None;
        }
        (Some(m), None, _) => vec![(at("message"), m)],
        (None, Some(list), _) => list.iter().enumerate().map(|(i, m)| (at(&format!("messages[{i}]")), m)).collect(),
        // No message given: one empty message (every field at its default). A stream's
        // `messages: []` sends none: the call opens and half-closes at once.
        (None, None, _) => vec![(at("message"), &empty)],
    };
    let mut messages = Vec::new();
    for (path, value) in &values {
        check_fields(value, &input, path, problems);
        match Template::json(value, scope) {
            Ok(t) => messages.push(t),
            Err(e) => problems.add(path.clone(), e),
        }
    }
    let deadline = spec.deadline.unwrap_or(file.http.timeout).get();
    if deadline.is_zero() {
        problems.add(at("deadline"), "must be longer than 0s");
    }
    if problems.len() != before {
        return None;
    }
    // Messages that never vary: encoded once, now, so that a wrong value is found now.
    let mut fixed_body = None;
    if messages.iter().all(|t| t.as_const().is_some()) {
        let mut body = Vec::new();
        for ((path, _), t) in values.iter().zip(&messages) {
            match read_message(&input, t.as_const().unwrap_or_default().as_bytes()) {
                Ok(m) => frame(&m, &mut body),
                Err(e) => problems.add(path.clone(), format!("does not fit {}: {e}", input.full_name())),
            }
        }
        fixed_body = Some(Bytes::from(body));
    }
    let url = spec.url.clone().unwrap_or_else(|| "{{baseUrl}}".into());
    let (service, name) = spec.method.trim().rsplit_once('/').unwrap_or_default();
    let mut headers = BTreeMap::from([
        ("content-type".to_string(), "application/grpc".to_string()),
        ("te".to_string(), "trailers".to_string()),
        ("grpc-timeout".to_string(), grpc_timeout(deadline)),
    ]);
    for (k, v) in &spec.metadata {
        headers.insert(k.to_ascii_lowercase(), v.clone());
    }
    let request = RequestSpec {
        method: "POST".into(),
        url: format!("{}/{}/{}", url.trim_end_matches('/'), service.trim_start_matches('/'), name),
        headers,
        query: BTreeMap::new(),
        body: None,
        json: None,
        form: None,
        multipart: None,
        timeout: Some(stampede_model::Dur::from(deadline)),
        redirects: Some(0),
    };
    let head = compile_request(&request, file, scope, files, loc, problems)?;
    let fixed_request = match (&fixed_body, &head.fixed) {
        (Some(body), Some(_)) => {
            let mut bytes = Vec::new();
            head.render_with_body(&[], body, &mut bytes).ok().map(|target| (target, bytes))
        }
        _ => None,
    };
    let plan = GrpcPlan {
        method: spec.method.trim().to_string(),
        kind,
        output: method.output(),
        input,
        messages,
        fixed_body,
        fixed_request,
        deadline,
    };
    (problems.len() == before).then_some((head, plan))
}

/// `grpc-timeout`: the deadline in milliseconds (at most 8 digits, so seconds past that).
fn grpc_timeout(d: Duration) -> String {
    let ms = d.as_millis().max(1);
    if ms < 100_000_000 { format!("{ms}m") } else { format!("{}S", d.as_secs().min(99_999_999)) }
}

/// The method `package.Service/Method`, or why it is not there.
fn find_method(pool: &DescriptorPool, name: &str) -> Result<MethodDescriptor, String> {
    let Some((service, method)) = service_and_method(name) else {
        return Err(format!("`{}` is not `package.Service/Method`", name.trim()));
    };
    let known = || pool.services().map(|s| s.full_name().to_string()).collect::<Vec<_>>().join(", ");
    let Some(svc) = pool.get_service_by_name(service) else {
        return Err(format!("no service `{service}` (the services known: {})", known()));
    };
    svc.methods().find(|m| m.name() == method).ok_or_else(|| {
        let methods: Vec<String> = svc.methods().map(|m| m.name().to_string()).collect();
        format!("service `{service}` has no method `{method}` (it has: {})", methods.join(", "))
    })
}

/// Problems for the fields of `value` that `desc` does not have, each at its own path.
fn check_fields(value: &serde_json::Value, desc: &MessageDescriptor, at: &str, problems: &mut Problems) {
    // Well-known types have JSON forms of their own (a Timestamp is a string).
    if desc.full_name().starts_with("google.protobuf.") {
        return;
    }
    let serde_json::Value::Object(fields) = value else {
        if !is_template(value) {
            problems.add(at, format!("{} is a message: give it as an object of its fields", desc.full_name()));
        }
        return;
    };
    for (key, item) in fields {
        let Some(field) = desc.get_field_by_name(key).or_else(|| desc.get_field_by_json_name(key)) else {
            let names: Vec<String> = desc.fields().map(|f| f.json_name().to_string()).collect();
            problems.add(
                format!("{at}.{key}"),
                format!("{} has no field `{key}` (its fields: {})", desc.full_name(), names.join(", ")),
            );
            continue;
        };
        let Kind::Message(inner) = field.kind() else { continue };
        let path = format!("{at}.{key}");
        match item {
            serde_json::Value::Array(items) if field.is_list() => {
                for (i, item) in items.iter().enumerate() {
                    check_fields(item, &inner, &format!("{path}[{i}]"), problems);
                }
            }
            serde_json::Value::Object(entries) if field.is_map() => {
                let value_kind = inner.map_entry_value_field().kind();
                if let Kind::Message(v) = value_kind {
                    for (k, item) in entries {
                        check_fields(item, &v, &format!("{path}.{k}"), problems);
                    }
                }
            }
            item if !field.is_list() && !field.is_map() => check_fields(item, &inner, &path, problems),
            _ => {}
        }
    }
}

/// A string that is all template (`"{{ order }}"`): its value is only known when sent.
fn is_template(value: &serde_json::Value) -> bool {
    matches!(value, serde_json::Value::String(s) if s.contains("{{")) || value.is_null()
}

/// A `check.status` of a gRPC step: gRPC status names (`OK`, `NOT_FOUND`) or codes (0–16).
pub fn compile_status(
    spec: &stampede_model::scenario::StatusSpec,
    loc: &str,
    problems: &mut Problems,
) -> crate::compile::check::StatusCheck {
    use stampede_model::scenario::{StatusItem, StatusSpec};
    let items: Vec<&StatusItem> = match spec {
        StatusSpec::One(i) => vec![i],
        StatusSpec::Many(v) => v.iter().collect(),
    };
    if items.is_empty() {
        problems.add(loc, "the list of accepted statuses is empty");
    }
    let mut ranges = Vec::new();
    for item in items {
        let code = match item {
            StatusItem::Code(c) if *c <= 16 => Some(*c),
            StatusItem::Code(_) => None,
            StatusItem::Pattern(p) => status_code(p.trim()),
        };
        match code {
            Some(c) => ranges.push((c, c)),
            None => problems.add(
                loc,
                format!(
                    "`{}` is not a gRPC status: a name such as OK, NOT_FOUND, UNAVAILABLE, or a code 0-16",
                    serde_json::to_value(item).map(|v| crate::compile::extract::value_text(&v)).unwrap_or_default()
                ),
            ),
        }
    }
    crate::compile::check::StatusCheck { ranges }
}

pub use crate::stats::metrics::{grpc_status_code as status_code, grpc_status_name as status_name};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters_from_one() {
        let text = "syntax = \"proto3\";\nmessage A {\n  strin x = 1;\n}\n";
        let offset = text.find("strin").unwrap();
        assert_eq!(line_column(text, offset), (3, 3));
        assert_eq!(line_column(text, 0), (1, 1));
    }

    fn compiled(
        yaml: &str,
        reflected: Option<DescriptorPool>,
    ) -> Result<crate::compile::plan::Plan, Vec<crate::error::Problem>> {
        let file = crate::compile::parse::parse_str(yaml, Path::new("s.yaml")).unwrap();
        let opts = crate::compile::plan::CompileOptions { reflected, ..Default::default() };
        crate::compile::plan::compile(&file, &opts)
    }

    const REFLECTING: &str = "name: r\nbaseUrl: http://127.0.0.1:9\ngrpc: {reflect: true}\n\
        load: {executor: constant-vus, vus: 1, iterations: 1}\nscenarios:\n  - name: s\n    steps:\n\
        \x20     - {name: a, grpc: {method: p.v1.S/Get, message: {id: 1, any: [x]}}}\n\
        \x20     - {name: b, grpc: {method: p.v1.S/Put, messages: [{}, {}]}}\n\
        \x20     - {name: c, grpc: {method: q.T/Get}}\n";

    #[test]
    fn before_the_server_is_asked_the_named_methods_stand_in_taking_any_message() {
        let plan = compiled(REFLECTING, None).unwrap_or_else(|p| panic!("{p:?}"));
        let names: Vec<&str> = plan.step_keys.iter().map(|k| k.step.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        // With the server's answer, its descriptors judge the same steps.
        let served = compile_sources(
            BTreeMap::from([(
                "p.proto".to_string(),
                b"syntax = \"proto3\";\npackage p.v1;\nmessage M { int32 id = 1; }\n\
                  service S { rpc Get(M) returns (M); }\n"
                    .to_vec(),
            )]),
            &["p.proto".to_string()],
        )
        .unwrap();
        let problems = compiled(REFLECTING, Some(served)).err().unwrap();
        let said: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.location, p.message)).collect();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said[0].contains("step `a`: grpc.message.any: p.v1.M has no field `any`"), "{said:?}");
        assert!(said[1].contains("step `b`: grpc.method: service `p.v1.S` has no method `Put`"), "{said:?}");
        assert!(said[2].contains("step `c`: grpc.method: no service `q.T` (the services known: p.v1.S)"), "{said:?}");
        // Reflection asks `baseUrl`'s server: a file without one is told so.
        let problems = compiled(&REFLECTING.replace("baseUrl: http://127.0.0.1:9\n", ""), None).err().unwrap();
        assert!(problems.iter().any(|p| p.location == "grpc.reflect" && p.message.contains("needs a `baseUrl`")));
    }

    /// #33: a stream's `messages: []` is no message at all (the call opens and half-closes);
    /// no `message` at all is one empty message; a unary call cannot be given an empty list.
    #[test]
    fn an_empty_list_of_messages_sends_none_and_no_message_sends_one_empty_one() {
        let served = compile_sources(
            BTreeMap::from([(
                "p.proto".to_string(),
                b"syntax = \"proto3\";\npackage p;\nmessage M { int32 id = 1; }\n\
                  service S { rpc Up(stream M) returns (M); rpc Both(stream M) returns (stream M); rpc Get(M) returns (M); }\n"
                    .to_vec(),
            )]),
            &["p.proto".to_string()],
        )
        .unwrap();
        let yaml = "name: r\nbaseUrl: http://127.0.0.1:9\ngrpc: {reflect: true}\n\
            load: {executor: constant-vus, vus: 1, iterations: 1}\nscenarios:\n  - name: s\n    steps:\n\
            \x20     - {name: none, grpc: {method: p.S/Up, messages: []}}\n\
            \x20     - {name: none both ways, grpc: {method: p.S/Both, messages: []}}\n\
            \x20     - {name: default, grpc: {method: p.S/Up}}\n\
            \x20     - {name: two, grpc: {method: p.S/Both, messages: [{id: 1}, {}]}}\n";
        let plan = compiled(yaml, Some(served.clone())).unwrap_or_else(|p| panic!("{p:?}"));
        let sent: Vec<(u64, usize)> = plan.scenarios[0]
            .steps
            .iter()
            .map(|s| match &s.protocol {
                crate::compile::plan::Protocol::Grpc(g) => {
                    let mut body = Vec::new();
                    g.encode(&[], &mut body).unwrap();
                    (g.messages_per_call(), body.len())
                }
                _ => panic!("a gRPC step"),
            })
            .collect();
        // Framed: 5 bytes each, and `id: 1` two more.
        assert_eq!(sent, [(0, 0), (0, 0), (1, 5), (2, 12)]);
        let unary = yaml.replace("p.S/Up, messages: []", "p.S/Get, messages: []");
        let problems = compiled(&unary, Some(served)).err().unwrap();
        assert!(problems.iter().any(|p| p.message.contains("it takes one request `message`")), "{problems:?}");
    }

    #[test]
    fn deadlines_become_grpc_timeouts() {
        assert_eq!(grpc_timeout(Duration::from_millis(250)), "250m");
        assert_eq!(grpc_timeout(Duration::from_secs(10)), "10000m");
        assert_eq!(grpc_timeout(Duration::from_micros(10)), "1m");
        assert_eq!(grpc_timeout(Duration::from_secs(200_000)), "200000S");
    }
}
