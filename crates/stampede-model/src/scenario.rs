//! The scenario file model (YAML, version 1): what users write.
//!
//! Every struct rejects unknown fields so a typo is an error, not a silently ignored
//! setting. Field doc comments become the published JSON Schema's descriptions.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Dur;

/// A Stampede scenario file.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioFile {
    /// Name of the test, shown in reports.
    pub name: String,
    /// Base URL of the system under test, available to templates as `{{baseUrl}}`.
    /// `builtin` starts Stampede's built-in target server on a free loopback port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// How many virtual users run, and for how long: the scenarios without a `load` of
    /// their own share these VUs by weight. Needed unless every scenario has its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSpec>,
    /// With `baseUrl: builtin`: how the built-in target serves, e.g. with a known capacity
    /// (`serviceTime` and `concurrency`: capacity = concurrency / serviceTime requests/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub builtin_target: Option<BuiltinTargetSpec>,
    /// HTTP client defaults for every request.
    #[serde(default)]
    pub http: HttpDefaults,
    /// Where `grpc:` steps find their services: `.proto` files compiled when the scenario is
    /// loaded (no `protoc` needed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcDefaults>,
    /// Data files: each iteration takes a row, whose fields are template variables
    /// (`{{users.email}}` for column `email` of data source `users`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, DataSpec>,
    /// Variables for templates: `{{name}}`. A value may use `{{env.NAME}}` and expressions;
    /// one with a generated value (`{{ uuid() }}`) gives a fresh one at each use, unless it
    /// says how long to keep one: `{value: "{{ uuid() }}", scope: iteration}`. A number, a
    /// boolean or a list (`qty: 3`, `ids: [1, 2]`) keeps its type, as does a value that is one
    /// hole alone (`"{{ vu.id }}"`). A `vu` or `iteration` value may use what `init` extracted.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, VarSpec>,
    /// Steps each VU runs once, before its first iteration (log in and keep the token for the
    /// VU's life): what they extract is visible to every scenario. Reported as scenario `init`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init: Vec<Step>,
    /// Steps run once for the whole test, before any load (create a tenant, log in an admin):
    /// what they extract every VU reads as `{{setup.NAME}}`. A failed one fails the test
    /// before any load. In a cluster they run once for the LoadTest, not once per runner.
    /// Reported as scenario `setup`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<Step>,
    /// Steps run once after the load (delete what `setup` made), also after an abort or a
    /// failed runner; they read `{{setup.NAME}}` too. Reported as scenario `teardown`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub teardown: Vec<Step>,
    /// The user flows. Each iteration of a virtual user picks one by weight.
    pub scenarios: Vec<Scenario>,
    /// Pass/fail criteria checked at the end of the run, e.g. `latency{step:login}.p99 < 250ms`,
    /// `errors.rate < 1%`, `checks.rate > 99.9%`, `requests.rate >= 100`. Any failure makes
    /// `stampede run` exit with code 1.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<ThresholdSpec>,
    /// An open model whose generator did not deliver the load it asked for (more than 1 % of
    /// the scheduled iterations dropped): `fail` (the default) makes the verdict not a pass,
    /// whatever the thresholds say, since they judged a lighter load than the test meant; `warn`
    /// only reports it.
    #[serde(default, skip_serializing_if = "UndeliveredLoad::is_default")]
    pub undelivered_load: UndeliveredLoad,
    /// The seed of generated values (`uuid()`, `randomInt(…)`, `randomItem(…)`…): a run with
    /// the same seed makes the same choices (each VU and runner its own). Default: a new seed
    /// for each run. `stampede run --seed` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// A variable of `vars`: a template, a number, a boolean or a list, or a template with the
/// scope it is kept for.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(untagged)]
pub enum VarSpec {
    /// A template: constant, or fresh at each use when it holds a generated value.
    Value(String),
    /// A number (`qty: 3`), a boolean (`on: true`) or a list (`ids: [1, 2]`), kept with its
    /// type: `"{{qty}}"` alone in a JSON body sends 3, `"n={{qty}}"` the text `n=3`.
    Typed(TypedValue),
    /// A template with how long one value is kept: `{value: "{{ uuid() }}", scope: iteration}`.
    Scoped {
        /// The template; a generated value in it (`{{ uuid() }}`) is kept for `scope`.
        value: String,
        /// How long one value is kept.
        #[serde(default)]
        scope: VarScope,
    },
}

/// A value of `vars` that is not text.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(untagged)]
pub enum TypedValue {
    /// `true` or `false`.
    Bool(bool),
    /// A number, whole or not (`3`, `2.5`).
    Number(serde_json::Number),
    /// A list of values of any type (`[1, 2]`, `[a, b]`).
    List(Vec<serde_json::Value>),
}

impl TypedValue {
    /// The value as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            TypedValue::Bool(b) => serde_json::Value::Bool(*b),
            TypedValue::Number(n) => serde_json::Value::Number(n.clone()),
            TypedValue::List(items) => serde_json::Value::Array(items.clone()),
        }
    }
}

impl VarSpec {
    /// The template, when the value is text.
    pub fn template(&self) -> Option<&str> {
        match self {
            VarSpec::Value(v) | VarSpec::Scoped { value: v, .. } => Some(v),
            VarSpec::Typed(_) => None,
        }
    }

    /// The value, when it is a number, a boolean or a list.
    pub fn typed(&self) -> Option<&TypedValue> {
        match self {
            VarSpec::Typed(t) => Some(t),
            _ => None,
        }
    }

    /// How long one value is kept.
    pub fn scope(&self) -> VarScope {
        match self {
            VarSpec::Value(_) | VarSpec::Typed(_) => VarScope::Use,
            VarSpec::Scoped { scope, .. } => *scope,
        }
    }
}

impl From<&str> for VarSpec {
    fn from(value: &str) -> Self {
        VarSpec::Value(value.to_string())
    }
}

/// How long a variable's value is kept (`vars.NAME.scope`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum VarScope {
    /// Computed again at each use.
    #[default]
    Use,
    /// One value per iteration of a VU (an order id sent in two steps).
    Iteration,
    /// One value per VU, kept for its life.
    Vu,
    /// One value for the whole run, the same for every VU (every runner of a LoadTest too when
    /// the scenario sets `seed`).
    Test,
}

/// What an undelivered load does to the verdict (`undeliveredLoad`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum UndeliveredLoad {
    /// The run does not pass (exit code 1; a LoadTest's `Passed=False`, reason `GeneratorLimited`).
    #[default]
    Fail,
    /// Reported (table, report, a `LoadDelivered=False` condition) without changing the verdict.
    Warn,
}

impl UndeliveredLoad {
    fn is_default(&self) -> bool {
        *self == UndeliveredLoad::Fail
    }
}

/// How the built-in target serves (`baseUrl: builtin` only).
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BuiltinTargetSpec {
    /// Every request waits this long before it is answered (with `concurrency`, while holding
    /// one of its permits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_time: Option<Dur>,
    /// At most this many requests in their service time at once; the rest wait in arrival
    /// order. Capacity = concurrency / serviceTime requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    /// A request that finds this many waiting gets 503 at once (default: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_limit: Option<u32>,
}

/// HTTP client defaults.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HttpDefaults {
    /// Time limit for a whole request: connect, send and receive (default 10s).
    #[serde(default = "default_timeout")]
    pub timeout: Dur,
    /// Time limit to open a connection (default 5s).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: Dur,
    /// HTTP version: `1.1` (default), `2` (over TLS via ALPN, cleartext with prior knowledge)
    /// or `auto` (HTTP/2 when the TLS handshake agrees on it, else HTTP/1.1).
    #[serde(default)]
    pub version: HttpVersion,
    /// HTTP/2: connections per origin and runner, shared by its VUs (default: one per worker
    /// thread). Spread over the worker threads, at least one each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u32>,
    /// HTTP/2: most requests in flight at once on one connection (default 100; the server's
    /// own limit applies too). A VU waits for a free stream when every connection is full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_streams: Option<u32>,
    /// HTTP/1.1: each VU keeps its connection open (`keep-alive`, default) or opens a new
    /// one for each iteration (`per-iteration`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub connection_policy: ConnectionPolicy,
    /// HTTP/1.1: close a connection after this many requests (default: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests_per_connection: Option<u32>,
    /// TLS settings for `https://` URLs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// Source addresses for new connections, taken in turn: IP addresses or IPv4 ranges
    /// `A-B` (like k6's `--local-ips`). Each address gives another ~28,000 ports per target.
    /// Without it, a loopback target whose ports run out gets connections spread over
    /// 127.0.0.2–127.0.0.254 by itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_addresses: Vec<String>,
    /// Headers sent with every request (a step's own headers win).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Keep a cookie jar per VU: cookies a response sets go back with later requests to the
    /// same host (default true).
    #[serde(default = "yes")]
    pub cookies: bool,
    /// Follow up to this many redirects (301, 302, 303, 307, 308) per request; 0 does not
    /// follow (default 10). A followed chain counts as one request of its step.
    #[serde(default = "default_redirects")]
    pub redirects: u32,
}

fn yes() -> bool {
    true
}

fn default_redirects() -> u32 {
    10
}

impl Default for HttpDefaults {
    fn default() -> Self {
        HttpDefaults {
            timeout: default_timeout(),
            connect_timeout: default_connect_timeout(),
            version: HttpVersion::default(),
            connections: None,
            max_streams: None,
            connection_policy: ConnectionPolicy::default(),
            max_requests_per_connection: None,
            tls: None,
            local_addresses: Vec::new(),
            headers: BTreeMap::new(),
            cookies: true,
            redirects: default_redirects(),
        }
    }
}

fn default_timeout() -> Dur {
    Dur::from_secs(10)
}

fn default_connect_timeout() -> Dur {
    Dur::from_secs(5)
}

/// HTTP protocol version.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
pub enum HttpVersion {
    /// HTTP/1.1: one connection per VU.
    #[default]
    #[serde(rename = "1.1")]
    Http11,
    /// HTTP/2: over TLS via ALPN `h2`, over cleartext with prior knowledge (h2c); VUs share
    /// `connections` connections of up to `maxStreams` streams each.
    #[serde(rename = "2")]
    Http2,
    /// HTTP/2 when the TLS handshake agrees on `h2`, else HTTP/1.1 (cleartext: HTTP/1.1).
    #[serde(rename = "auto")]
    Auto,
}

/// When an HTTP/1.1 VU opens a new connection.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionPolicy {
    /// Keep the connection for as long as the server does.
    #[default]
    KeepAlive,
    /// A new connection for each iteration, as a new visitor would open.
    PerIteration,
}

/// TLS settings. Server certificates are checked against the system's roots (Mozilla's when
/// the system has none) plus `caFile`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TlsSpec {
    /// PEM file of extra CA certificates to trust, relative to the scenario file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<String>,
    /// PEM file of a client certificate (chain) for mutual TLS; needs `clientKey`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cert: Option<String>,
    /// PEM file of the client certificate's private key (PKCS#8, PKCS#1 or SEC1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<String>,
    /// Name sent as SNI and checked against the certificate, instead of the URL's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// Accept any server certificate (self-signed, expired, another name). For tests only:
    /// the connection is encrypted but not authenticated.
    #[serde(default, skip_serializing_if = "is_default")]
    pub insecure: bool,
}

/// A user flow: ordered steps run once per iteration.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// Name shown in reports.
    pub name: String,
    /// Relative share of iterations (default 1). 0 disables the scenario.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// This scenario's own VUs and duration: it runs alongside the others (as k6 scenarios
    /// do) instead of sharing the file's `load`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadSpec>,
    /// Steps, run in order.
    pub steps: Vec<Step>,
}

fn default_weight() -> u32 {
    1
}

/// One named request and what to do with its answer — or a block of steps (`steps:`) run
/// under a condition (`if:`), repeated (`repeat:`), or timed as one transaction (`group:`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    /// Name shown in reports; unique within its scenario. A block needs none (its `group`
    /// names it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The HTTP request (a step has it, or `grpc`, or `ws`; a block has `steps` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestSpec>,
    /// A gRPC call instead of an HTTP request: unary or streaming, over HTTP/2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<GrpcSpec>,
    /// A WebSocket session instead of an HTTP request: connect, send, wait for answers, close.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ws: Option<WsSpec>,
    /// What a good answer looks like. Without it, any status below 400 passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckSpec>,
    /// Pause after this step (think time): `500ms`, or a range `{min: 1s, max: 3s}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think: Option<Think>,
    /// Values taken from the response for later steps of the same VU: `{{name}}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub extract: BTreeMap<String, ExtractSpec>,
    /// What a failure of this step (no answer, a failed check or extraction) does: `continue`
    /// with the next step (default), start the `next-iteration`, or `abort-run`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_error: OnError,
    /// Runs this step or block only when the expression is true: over variables, extracted
    /// values and the last answer (`response.status`), e.g. `size(products) > 0`.
    #[serde(default, rename = "if", skip_serializing_if = "Option::is_none")]
    pub when: Option<String>,
    /// Runs the block's `steps` again: `count` times, once `forEach` element of a list, or
    /// `while` an expression holds (at most `max` times, which `while` needs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<RepeatSpec>,
    /// Times the block as one transaction named so (Gatling's group, JMeter's transaction
    /// controller): from its first request's send to its last step's end, with its own
    /// latency in every report and in thresholds (`latency{group:checkout}.p95 < 400ms`). A
    /// run of the block whose steps were all skipped (by their `if`) is no transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The block's steps (and blocks), run in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<Step>,
}

/// How often a block runs: one of `count`, `forEach` or `while`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RepeatSpec {
    /// A number of times, or an expression giving one (`randomInt(1, 3)`), computed when the
    /// block starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<Count>,
    /// An expression giving a list (an `all: true` extractor's, or a literal one): the block
    /// runs once per element, the element in the variable named by `as` (default `item`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<String>,
    /// An expression checked before each run of the block; needs `max`.
    #[serde(default, rename = "while", skip_serializing_if = "Option::is_none")]
    pub while_: Option<String>,
    /// The most runs of the block (needed with `while`; caps `count` and `forEach` too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<u32>,
    /// The variable holding the current element (`forEach`, default `item`) or the run's
    /// number from 0 (`count`, `while`; default `index`).
    #[serde(default, rename = "as", skip_serializing_if = "Option::is_none")]
    pub as_: Option<String>,
}

/// A repeat count: a number, or an expression giving one.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(untagged)]
pub enum Count {
    /// A fixed number of runs.
    Times(u32),
    /// An expression giving a whole number, computed when the block starts (a negative one
    /// runs it 0 times).
    Expr(String),
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// A threshold: an expression (`"latency.p99 < 250ms"`), or one with options.
#[derive(Clone, Debug, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum ThresholdSpec {
    /// The expression alone, e.g. `latency.p99 < 250ms`.
    Text(String),
    /// The expression with options: `{threshold, abortOnFail, delayAbortEval}`.
    Full(ThresholdOptions),
}

// By hand rather than `untagged`, so that a mistake inside the object form (an unknown field,
// a wrong type) is reported as such instead of as "no variant matched".
impl<'de> Deserialize<'de> for ThresholdSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Spec;
        impl<'de> serde::de::Visitor<'de> for Spec {
            type Value = ThresholdSpec;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(
                    "an expression such as \"latency.p99 < 250ms\", or {threshold, abortOnFail, delayAbortEval}",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ThresholdSpec, E> {
                Ok(ThresholdSpec::Text(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<ThresholdSpec, A::Error> {
                ThresholdOptions::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(ThresholdSpec::Full)
            }
        }
        d.deserialize_any(Spec)
    }
}

impl ThresholdSpec {
    /// The expression.
    pub fn expression(&self) -> &str {
        match self {
            ThresholdSpec::Text(t) => t,
            ThresholdSpec::Full(o) => &o.threshold,
        }
    }
}

/// A threshold with options.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ThresholdOptions {
    /// The expression, e.g. `errors.rate < 1%`.
    pub threshold: String,
    /// Also evaluate it every second during the run, and stop the run as soon as it fails.
    #[serde(default)]
    pub abort_on_fail: bool,
    /// With `abortOnFail`: evaluate only after this long into the run (default 0s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_abort_eval: Option<Dur>,
}

/// What a failed step does to its iteration.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum OnError {
    /// Go on with the next step.
    #[default]
    Continue,
    /// Skip the rest of this iteration.
    NextIteration,
    /// Stop the whole run (the report says why; the exit code is 1).
    AbortRun,
}

/// How a value is taken from a response. Set one of `json`, `regex` or `status`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExtractSpec {
    /// A JSON path into the body: `$.headers.Host` or the dotted `headers.Host`; `$` alone is
    /// the whole body. The value keeps its JSON type (a number, a list, an object…).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<String>,
    /// A regular expression on the body; the value is capture group `group` (default 1, or
    /// the whole match when there is no group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
    /// With `regex`: the capture group whose text is the value, 0 for the whole match
    /// (default 1, or 0 when the expression has no group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
    /// `true`: the status code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<bool>,
    /// A response header, by name (case-insensitive); the first one when it repeats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    /// A cookie the response sets (`Set-Cookie`), by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cookie: Option<String>,
    /// `true`: keep every match as a list — every match of `regex`, or every value a `json`
    /// path with `*` reaches (`$.products[*].id`) — for `randomItem(…)`, `size(…)`, indexing;
    /// none is an empty list, not a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,
}

/// An HTTP request. Every string may use `{{name}}` templates.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RequestSpec {
    /// HTTP method (default GET).
    #[serde(default = "default_method")]
    pub method: String,
    /// Absolute URL, usually `{{baseUrl}}/path`.
    pub url: String,
    /// Request headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Query parameters, appended to the URL (percent-encoded).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub query: BTreeMap<String, String>,
    /// A raw text body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// A JSON body: any YAML structure, sent as JSON with `content-type: application/json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json: Option<serde_json::Value>,
    /// A url-encoded form body (`application/x-www-form-urlencoded`): field → value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<BTreeMap<String, String>>,
    /// A `multipart/form-data` body: fields and file parts, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multipart: Option<Vec<PartSpec>>,
    /// Time limit for this request, overriding `http.timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Redirects to follow for this request, overriding `http.redirects` (0: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redirects: Option<u32>,
}

/// Where `grpc:` steps find their services.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GrpcDefaults {
    /// `.proto` files (relative to the scenario file, or names in a LoadTest's `spec.data`),
    /// compiled in process when the scenario is loaded. Imports are looked up beside them,
    /// in `importPaths`, and among Google's well-known types.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub proto_files: Vec<String>,
    /// Folders (relative to the scenario file) that imports are looked up in.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub import_paths: Vec<String>,
    /// `true`: ask the server at `baseUrl` for the services the steps call (gRPC server
    /// reflection, `grpc.reflection.v1` or `v1alpha`) when the test starts, instead of (or
    /// beside) `protoFiles`. `stampede validate` and the operator check everything else then;
    /// the methods and messages are checked against the server's answer before any load.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reflect: bool,
}

/// A gRPC call. Every string may use `{{name}}` templates.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GrpcSpec {
    /// The server: `http://host:port` (HTTP/2 in cleartext) or `https://host:port` (TLS with
    /// ALPN h2). Default `{{baseUrl}}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The method, `package.Service/Method`, from `grpc.protoFiles` or the server (`grpc.reflect`).
    pub method: String,
    /// The request message as JSON (YAML), in protobuf's JSON mapping; a string that is one
    /// expression alone (`"{{ randomInt(1, 9) }}"`) gives a typed value. For unary and
    /// server-streaming calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<serde_json::Value>,
    /// The messages a client-streaming or bidirectional call sends, in order, before it
    /// half-closes (its answers are read as they come); `[]` sends none (the call opens and
    /// half-closes at once). Without `message` or `messages`, a call sends one empty message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<serde_json::Value>>,
    /// Metadata (request headers): name → value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
    /// The call's deadline (sent as `grpc-timeout`); past it the call is `DEADLINE_EXCEEDED`.
    /// Default `http.timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Dur>,
}

/// A WebSocket session: connect, then the `actions` in order, then close (or keep the socket
/// for a later step of the iteration with the same `url`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WsSpec {
    /// `ws://` or `wss://` URL (an `http(s)://` one works too, e.g. `{{baseUrl}}/ws/echo`).
    #[serde(default)]
    pub url: String,
    /// Handshake request headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Subprotocols offered in the handshake (`Sec-WebSocket-Protocol`); the server must pick one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subprotocols: Vec<String>,
    /// What the session does, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<WsAction>,
    /// Leave the socket open at the end of the step: a later `ws` step of the iteration with
    /// the same URL goes on with it (no new handshake). It closes when the iteration ends.
    #[serde(default, skip_serializing_if = "is_default")]
    pub keep_open: bool,
    /// Close with this code (default 1000, normal closure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_code: Option<u16>,
    /// How long the whole session may take (default `http.timeout`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
}

/// One thing a WebSocket session does: exactly one of its fields.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WsAction {
    /// Send a text frame (a template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    /// Send a JSON text frame: any YAML structure, strings as templates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_json: Option<serde_json::Value>,
    /// Send a binary frame: base64 of its bytes (a template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_binary: Option<String>,
    /// Wait for a message that matches; timed from the last send. Messages that do not match
    /// are counted and skipped. The step's `check` and `extract` read the last matching
    /// message as the answer's body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive: Option<WsReceive>,
    /// Keep the socket open this long (answers that come meanwhile are counted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Dur>,
    /// End the session here: a Close frame with this code and reason, then wait for the
    /// server's. The last action of a step that does not `keepOpen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close: Option<WsClose>,
}

/// A `close` action's Close frame.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WsClose {
    /// The code: 1000 or one from 3000 to 4999 (default the step's `closeCode`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// The reason the frame gives (at most 123 bytes of UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Which message a `receive` waits for, and what it takes from it.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WsReceive {
    /// The message's text equals this (a template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    /// The message's text contains this (a template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// The message's text matches this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// The message is JSON and the value at these JSONPaths meets the expectations, e.g.
    /// `$.type: {equals: joined}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub json: BTreeMap<String, Expect>,
    /// How long to wait (default 5s); past it the step fails with `timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Wait for this many matching messages (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
}

/// One part of a multipart body: a field (`value`) or a file (`file`).
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PartSpec {
    /// Field name.
    pub name: String,
    /// The field's text (templated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// A file to send, relative to the scenario file; read once when the run starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// File name sent for a file part (default: the file's own name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    /// The part's content type (a file's default: `application/octet-stream`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
}

fn default_method() -> String {
    "GET".to_string()
}

/// Checks on the response. A failed check counts as an error of kind `check`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckSpec {
    /// Accepted status: a code (`200`), a class (`2xx`), a range (`200-299`) or a list of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<StatusSpec>,
    /// Response headers, by name (case-insensitive): `{content-type: {contains: json}}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, Expect>,
    /// The body: `{contains: "ok"}` or `{matches: "id\":\\d+"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Expect>,
    /// JSON paths into the body: `{"$.json.test": {equals: test}, "form.key1": {exists: true}}`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub json: BTreeMap<String, Expect>,
}

/// What one checked value must be. Set exactly one.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// Equal to this (templated; a JSON value compares as its text, strings without quotes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Scalar>,
    /// `true`: present; `false`: absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
    /// Contains this text (templated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// Matches this regular expression (anywhere).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
}

/// A text, number or boolean written in YAML.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum Scalar {
    /// `true` or `false`, compared as that text.
    Bool(bool),
    /// A number, compared as its text (`3`, `2.5`).
    Number(serde_json::Number),
    /// A text (templated).
    Text(String),
}

impl Scalar {
    /// The text this scalar compares as.
    pub fn as_text(&self) -> String {
        match self {
            Scalar::Bool(b) => b.to_string(),
            Scalar::Number(n) => n.to_string(),
            Scalar::Text(t) => t.clone(),
        }
    }
}

/// Accepted status codes.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum StatusSpec {
    /// One accepted status.
    One(StatusItem),
    /// Several accepted statuses: any of them passes.
    Many(Vec<StatusItem>),
}

/// One accepted status: a code, a class such as `2xx`, or a range such as `200-204`.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum StatusItem {
    /// A status code: HTTP 100–599 (a `grpc` step: a gRPC code, 0–16).
    Code(u16),
    /// A class (`2xx`) or a range (`200-299`, both ends included); a `grpc` step: a status name
    /// (`OK`, `NOT_FOUND`…).
    Pattern(String),
}

/// Think time: fixed, or uniformly random within a range.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(untagged)]
pub enum Think {
    /// The same pause every time, e.g. `500ms`.
    Fixed(Dur),
    /// A pause drawn uniformly between `min` and `max` each time.
    Range(ThinkRange),
}

/// A uniformly random think time.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ThinkRange {
    /// The shortest pause.
    pub min: Dur,
    /// The longest pause (not less than `min`).
    pub max: Dur,
}

/// A CSV data file.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DataSpec {
    /// Path of a CSV file with a header row, relative to the scenario file.
    pub csv: String,
    /// Which row an iteration takes (default `sequential`).
    #[serde(default)]
    pub mode: DataMode,
    /// What happens when every row was used (default: `stop` for `unique`, else `loop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_exhausted: Option<OnExhausted>,
}

/// How iterations take rows.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DataMode {
    /// In file order, shared by all VUs.
    #[default]
    Sequential,
    /// A random row each time.
    Random,
    /// Each row at most once across all VUs (and runners).
    Unique,
}

/// What happens when the rows are used up.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum OnExhausted {
    /// Start again from the first row.
    #[default]
    Loop,
    /// VUs stop: the run ends when no rows are left.
    Stop,
}

impl ScenarioFile {
    /// Every load block: the file's, then each scenario's own.
    pub fn loads_mut(&mut self) -> impl Iterator<Item = &mut LoadSpec> {
        self.load.iter_mut().chain(self.scenarios.iter_mut().filter_map(|s| s.load.as_mut()))
    }

    /// Runner `index` of `count`'s part of every load block.
    pub fn share(&mut self, index: u32, count: u32) {
        for load in self.loads_mut() {
            *load = load.share(index, count);
        }
    }

    /// Whether any load block (that some scenario uses) runs anything.
    pub fn has_work(&self) -> bool {
        let shared_used = self.scenarios.iter().any(|s| s.load.is_none());
        (shared_used && self.load.as_ref().is_some_and(LoadSpec::has_work))
            || self.scenarios.iter().filter_map(|s| s.load.as_ref()).any(LoadSpec::has_work)
    }
}

pub use crate::load::{Executor, LoadSpec, Stage, split_evenly};

#[cfg(test)]
#[path = "scenario_tests.rs"]
mod tests;
