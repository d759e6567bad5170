//! gRPC server reflection (`grpc.reflection.v1` and `v1alpha`) for the target's service, so
//! that a scenario with `grpc: {reflect: true}` needs no `.proto` file: the file that defines
//! a symbol, a file by name, and the list of services. Its calls are counted on their own
//! (`grpc.reflection` in `/stats`), apart from the service's calls, messages and statuses.

use std::sync::OnceLock;

use bytes::Bytes;
use prost::Message;

use crate::grpc_call::{Call, Messages, Status};

/// The service's `.proto`, as served.
const SOURCE: &str = include_str!("../../../examples/target.proto");
/// The name the file is served under.
pub const FILE_NAME: &str = "stampede/target/v1/target.proto";

/// The reflection services' packages.
const PACKAGES: [&str; 2] = ["grpc.reflection.v1", "grpc.reflection.v1alpha"];

#[derive(Clone, PartialEq, Message)]
struct Request {
    #[prost(string, tag = "1")]
    host: String,
    #[prost(oneof = "Question", tags = "3, 4, 5, 6, 7")]
    question: Option<Question>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Question {
    #[prost(string, tag = "3")]
    FileByFilename(String),
    #[prost(string, tag = "4")]
    FileContainingSymbol(String),
    #[prost(message, tag = "5")]
    FileContainingExtension(ExtensionRequest),
    #[prost(string, tag = "6")]
    AllExtensionNumbersOfType(String),
    #[prost(string, tag = "7")]
    ListServices(String),
}

#[derive(Clone, PartialEq, Message)]
struct ExtensionRequest {
    #[prost(string, tag = "1")]
    containing_type: String,
    #[prost(int32, tag = "2")]
    extension_number: i32,
}

#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(string, tag = "1")]
    valid_host: String,
    #[prost(message, optional, tag = "2")]
    original_request: Option<Request>,
    #[prost(oneof = "Answer", tags = "4, 6, 7")]
    answer: Option<Answer>,
}

#[derive(Clone, PartialEq, prost::Oneof)]
enum Answer {
    #[prost(message, tag = "4")]
    Files(FileDescriptors),
    #[prost(message, tag = "6")]
    Services(ServiceList),
    #[prost(message, tag = "7")]
    Error(ErrorAnswer),
}

#[derive(Clone, PartialEq, Message)]
struct FileDescriptors {
    #[prost(bytes = "bytes", repeated, tag = "1")]
    file_descriptor_proto: Vec<Bytes>,
}

#[derive(Clone, PartialEq, Message)]
struct ServiceList {
    #[prost(message, repeated, tag = "1")]
    service: Vec<ServiceName>,
}

#[derive(Clone, PartialEq, Message)]
struct ServiceName {
    #[prost(string, tag = "1")]
    name: String,
}

#[derive(Clone, PartialEq, Message)]
struct ErrorAnswer {
    #[prost(int32, tag = "1")]
    error_code: i32,
    #[prost(string, tag = "2")]
    error_message: String,
}

/// The compiled file: its encoded descriptor, and every symbol it defines.
struct Described {
    descriptor: Bytes,
    symbols: Vec<String>,
    services: Vec<String>,
}

fn described() -> &'static Described {
    static DESCRIBED: OnceLock<Described> = OnceLock::new();
    DESCRIBED.get_or_init(|| {
        let mut compiler = protox::Compiler::with_file_resolver(Source);
        compiler.open_file(FILE_NAME).expect("examples/target.proto compiles (a unit test says so)");
        let file = compiler.file_descriptor_set().file.remove(0);
        let package = file.package().to_string();
        let mut symbols: Vec<String> = file.message_type.iter().map(|m| format!("{package}.{}", m.name())).collect();
        let mut services = Vec::new();
        for s in &file.service {
            let name = format!("{package}.{}", s.name());
            symbols.extend(s.method.iter().map(|m| format!("{name}.{}", m.name())));
            symbols.push(name.clone());
            services.push(name);
        }
        Described { descriptor: Bytes::from(file.encode_to_vec()), symbols, services }
    })
}

/// Serves examples/target.proto under [`FILE_NAME`].
struct Source;

impl protox::file::FileResolver for Source {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        if name == FILE_NAME {
            protox::file::File::from_source(name, SOURCE)
        } else {
            Err(protox::Error::file_not_found(name))
        }
    }
}

/// Whether `path` is the reflection method (of either package).
pub fn is_reflection(path: &str) -> bool {
    PACKAGES.iter().any(|p| {
        path.strip_prefix('/').and_then(|r| r.strip_prefix(p)) == Some(".ServerReflection/ServerReflectionInfo")
    })
}

/// One `ServerReflectionInfo` call: each question answered as it comes.
pub(crate) async fn serve(call: &Call<'_>, body: hyper::body::Incoming) -> Status {
    let mut messages = Messages::new(body);
    loop {
        match messages.next::<Request>(call.stats).await {
            Ok(Some(req)) => {
                if !call.send(&answer(req)).await {
                    return (1, "the client went away".into());
                }
            }
            Ok(None) => return (0, String::new()),
            Err(e) => return e,
        }
    }
}

fn answer(req: Request) -> Response {
    let d = described();
    let not_found = |what: String| Answer::Error(ErrorAnswer { error_code: 5, error_message: what });
    let answer = match &req.question {
        Some(Question::FileByFilename(name)) if name == FILE_NAME => {
            Answer::Files(FileDescriptors { file_descriptor_proto: vec![d.descriptor.clone()] })
        }
        Some(Question::FileByFilename(name)) => not_found(format!("no file {name}")),
        Some(Question::FileContainingSymbol(symbol)) if d.symbols.contains(symbol) => {
            Answer::Files(FileDescriptors { file_descriptor_proto: vec![d.descriptor.clone()] })
        }
        Some(Question::FileContainingSymbol(symbol)) => not_found(format!("no symbol {symbol}")),
        Some(Question::ListServices(_)) => {
            let names = d.services.iter().cloned().chain(PACKAGES.iter().map(|p| format!("{p}.ServerReflection")));
            Answer::Services(ServiceList { service: names.map(|name| ServiceName { name }).collect() })
        }
        Some(Question::FileContainingExtension(_) | Question::AllExtensionNumbersOfType(_)) => {
            not_found("the service defines no extensions".into())
        }
        None => Answer::Error(ErrorAnswer { error_code: 3, error_message: "an empty question".into() }),
    };
    Response { valid_host: req.host.clone(), original_request: Some(req), answer: Some(answer) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(question: Question) -> Answer {
        answer(Request { host: String::new(), question: Some(question) }).answer.unwrap()
    }

    #[test]
    fn the_service_file_is_found_by_each_symbol_and_by_name_and_others_are_not_found() {
        let file = |a: Answer| match a {
            Answer::Files(f) => prost_types_name(&f.file_descriptor_proto[0]),
            other => panic!("{other:?}"),
        };
        for symbol in ["stampede.target.v1.Target", "stampede.target.v1.Target.Chat", "stampede.target.v1.Tick"] {
            assert_eq!(file(ask(Question::FileContainingSymbol(symbol.into()))), FILE_NAME, "{symbol}");
        }
        assert_eq!(file(ask(Question::FileByFilename(FILE_NAME.into()))), FILE_NAME);
        for q in [
            Question::FileContainingSymbol("stampede.target.v1.Nope".into()),
            Question::FileByFilename("x.proto".into()),
        ] {
            assert!(matches!(ask(q), Answer::Error(ErrorAnswer { error_code: 5, .. })));
        }
        let Answer::Services(list) = ask(Question::ListServices(String::new())) else { panic!() };
        let names: Vec<&str> = list.service.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "stampede.target.v1.Target",
                "grpc.reflection.v1.ServerReflection",
                "grpc.reflection.v1alpha.ServerReflection"
            ]
        );
        assert!(is_reflection("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"));
        assert!(!is_reflection("/grpc.reflection.v2.ServerReflection/ServerReflectionInfo"));
    }

    /// The `name` (field 1) of an encoded FileDescriptorProto.
    fn prost_types_name(bytes: &[u8]) -> String {
        #[derive(Clone, PartialEq, Message)]
        struct Named {
            #[prost(string, tag = "1")]
            name: String,
        }
        Named::decode(bytes).unwrap().name
    }
}
