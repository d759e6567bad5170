//! `grpc.reflect`: the services a scenario calls, asked of its server (gRPC server
//! reflection) before the scenario compiles. The question is itself a one-step scenario that
//! the engine runs once, as it runs `setup` (its own HTTP/2 client, the file's TLS settings):
//! a `ServerReflectionInfo` call asking for the file that defines each service the steps name,
//! then for the files those import, until none is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use base64::Engine as _;
use prost::Message as _;
use prost_reflect::DescriptorPool;
use prost_reflect::prost_types::FileDescriptorProto;
use stampede_model::ErrorKind;
use stampede_model::scenario::ScenarioFile;

use crate::compile::grpc::{compile_sources, grpc_methods, service_and_method};
use crate::compile::plan::{CompileOptions, compile};
use crate::error::RunError;
use crate::run::once::{Once, run_once};

/// The reflection service's packages, newest first: servers offer `v1`, older ones only
/// `v1alpha` (the same messages).
const PACKAGES: [&str; 2] = ["grpc.reflection.v1", "grpc.reflection.v1alpha"];

/// The name of the step that asks (a step of the engine's own, never shown).
const QUESTION: &str = "reflection";

/// At most this many questions (a file's imports are asked for in the next one).
const ROUNDS: usize = 16;

/// The part of the reflection protocol asked here (`reflection.proto` of gRPC, by its field
/// numbers), in `package`.
fn reflection_proto(package: &str) -> String {
    format!(
        r#"syntax = "proto3";
package {package};
service ServerReflection {{
  rpc ServerReflectionInfo(stream ServerReflectionRequest) returns (stream ServerReflectionResponse);
}}
message ServerReflectionRequest {{
  string host = 1;
  oneof message_request {{
    string file_by_filename = 3;
    string file_containing_symbol = 4;
    string list_services = 7;
  }}
}}
message ServerReflectionResponse {{
  string valid_host = 1;
  ServerReflectionRequest original_request = 2;
  oneof message_response {{
    FileDescriptorResponse file_descriptor_response = 4;
    ErrorResponse error_response = 7;
  }}
}}
message FileDescriptorResponse {{
  repeated bytes file_descriptor_proto = 1;
}}
message ErrorResponse {{
  int32 error_code = 1;
  string error_message = 2;
}}
"#
    )
}

/// Why the server's services could not be had.
#[derive(Debug)]
enum Asked {
    /// The server does not offer this package of the reflection service.
    Unimplemented(String),
    Failed(String),
}

/// Whose services are asked for, and of which server.
pub(crate) struct Asking<'a> {
    pub(crate) file: &'a ScenarioFile,
    /// Where `file` was read from: the errors name it.
    pub(crate) path: &'a Path,
    /// The file's `baseUrl` as it compiled (templates such as `{{env.PORT}}` expanded).
    pub(crate) base_url: &'a str,
}

/// The services `asking.file`'s steps call, as the server at its base URL describes them,
/// with the files they import. On a thread of its own (the question runs on a runtime of its
/// own).
pub(crate) fn ask(asking: &Asking<'_>, opts: &CompileOptions) -> Result<DescriptorPool, RunError> {
    std::thread::scope(|s| s.spawn(|| ask_here(asking, opts)).join())
        .unwrap_or_else(|_| Err(RunError::Other("asking the server for its services panicked".into())))
}

fn ask_here(asking: &Asking<'_>, opts: &CompileOptions) -> Result<DescriptorPool, RunError> {
    let Asking { file, path, base_url: base } = *asking;
    let services: BTreeSet<String> =
        grpc_methods(file).into_iter().filter_map(|m| service_and_method(m).map(|(s, _)| s.to_string())).collect();
    // Said of the user's file and field: the question is a step of the engine's own.
    let fail = |why: String| {
        RunError::Other(format!(
            "{}: grpc.reflect: asking {base} for its gRPC services by reflection: {why}",
            path.display()
        ))
    };
    let opts = CompileOptions { base_url: Some(base.to_string()), ..opts.clone() };
    let opts = &opts;
    let mut last = String::new();
    for package in PACKAGES {
        match files_of(file, opts, package, &services) {
            Ok(files) => return pool_of(files).map_err(fail),
            Err(Asked::Unimplemented(why)) => last = why,
            Err(Asked::Failed(why)) => return Err(fail(why)),
        }
    }
    Err(fail(format!("the server offers no reflection service ({last})")))
}

/// The files defining `services` and all they import, asked of the server in rounds.
fn files_of(
    file: &ScenarioFile,
    opts: &CompileOptions,
    package: &str,
    services: &BTreeSet<String>,
) -> Result<BTreeMap<String, FileDescriptorProto>, Asked> {
    let name = format!("{package}.proto");
    let pool = compile_sources(BTreeMap::from([(name.clone(), reflection_proto(package).into_bytes())]), &[name])
        .map_err(Asked::Failed)?;
    let mut have: BTreeMap<String, FileDescriptorProto> = BTreeMap::new();
    let mut questions: Vec<serde_json::Value> =
        services.iter().map(|s| serde_json::json!({"fileContainingSymbol": s})).collect();
    for round in 0..ROUNDS {
        if questions.is_empty() {
            return Ok(have);
        }
        let (files, errors) = question(file, opts, package, &pool, &questions)?;
        // A service the server does not know is the scenario's problem, named at its step
        // when it compiles; a file it imports that the server cannot give is the server's.
        if round > 0 && !errors.is_empty() {
            return Err(Asked::Failed(format!("the server answered: {}", errors.join("; "))));
        }
        for bytes in files {
            let proto = FileDescriptorProto::decode(bytes.as_slice())
                .map_err(|e| Asked::Failed(format!("the server sent a file descriptor that does not decode: {e}")))?;
            have.insert(proto.name().to_string(), proto);
        }
        let wanted: BTreeSet<&String> = have
            .values()
            .flat_map(|f| &f.dependency)
            .filter(|d| !have.contains_key(*d) && !d.starts_with("google/protobuf/"))
            .collect();
        questions = wanted.into_iter().map(|d| serde_json::json!({"fileByFilename": d})).collect();
    }
    Err(Asked::Failed(format!("the files' imports were still incomplete after {ROUNDS} questions")))
}

/// One `ServerReflectionInfo` call with `questions`: the file descriptors of its answers, and
/// the errors it answered.
fn question(
    file: &ScenarioFile,
    opts: &CompileOptions,
    package: &str,
    pool: &DescriptorPool,
    questions: &[serde_json::Value],
) -> Result<(Vec<Vec<u8>>, Vec<String>), Asked> {
    let method = format!("{package}.ServerReflection/ServerReflectionInfo");
    let spec = serde_json::json!({
        "name": "grpc reflection",
        "baseUrl": opts.base_url,
        "grpc": {"reflect": true},
        "load": {"executor": "constant-vus", "vus": 1, "iterations": 1},
        "setup": [{
            "name": QUESTION,
            "grpc": {
                "method": method,
                "messages": questions,
            },
            "extract": {
                "files": {"json": "$[*].fileDescriptorResponse.fileDescriptorProto[*]", "all": true},
                "errors": {"json": "$[*].errorResponse.errorMessage", "all": true},
            },
        }],
        // Never run: only `setup` is.
        "scenarios": [{"name": "none", "steps": [{"name": "none", "grpc": {"method": method}}]}],
    });
    let mut asking: ScenarioFile =
        serde_json::from_value(spec).map_err(|e| Asked::Failed(format!("the question does not compile: {e}")))?;
    asking.http = file.http.clone();
    let opts = CompileOptions { reflected: Some(pool.clone()), seed: Some(0), ..opts.clone() };
    let plan = compile(&asking, &opts).map_err(|problems| {
        let listed: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.location, p.message)).collect();
        Asked::Failed(listed.join("; "))
    })?;
    let outcome = run_once(&Arc::new(plan), Once::Setup, &BTreeMap::new()).map_err(|e| Asked::Failed(e.to_string()))?;
    if let Some(why) = outcome.failure {
        // Without the name of the question's own step, which the user never wrote.
        let why = why.strip_prefix(&format!("step `{QUESTION}`: ")).map_or(why.clone(), str::to_string);
        return Err(match outcome.error_samples.first().map(|e| e.kind) {
            Some(ErrorKind::Unimplemented) => Asked::Unimplemented(why),
            _ => Asked::Failed(why),
        });
    }
    let list = |name: &str| -> Vec<String> {
        outcome.values.get(name).and_then(|v| serde_json::from_str(v).ok()).unwrap_or_default()
    };
    let files = list("files")
        .iter()
        .map(|b| {
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| Asked::Failed(format!("a file descriptor is not base64: {e}")))
        })
        .collect::<Result<_, _>>()?;
    Ok((files, list("errors")))
}

/// The pool of the server's files, with Google's well-known types they import.
fn pool_of(files: BTreeMap<String, FileDescriptorProto>) -> Result<DescriptorPool, String> {
    let google: Vec<String> = files
        .values()
        .flat_map(|f| &f.dependency)
        .filter(|d| !files.contains_key(*d) && d.starts_with("google/protobuf/"))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut pool = compile_sources(BTreeMap::new(), &google)?;
    pool.add_file_descriptor_protos(files.into_values())
        .map_err(|e| format!("the server's file descriptors do not fit together: {e}"))?;
    Ok(pool)
}
