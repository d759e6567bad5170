//! Fuzzing the importers: mutated copies of every fixture of `tests/cli/fixtures` (and a small
//! recording for HAR), each through its importer. An import may refuse its input; it may not
//! panic, and what it gives must load back as a scenario (`parse_str`), as `stampede import`
//! requires before it writes it. The validation `stampede import` runs next is run too (it may
//! refuse: a mutated plan may name what is not there). The runner is the workspace's
//! (`crate::fuzz_support`); inputs stay under 48 KiB (some importers are quadratic).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use stampede_engine::CompileOptions;

use super::{curl, har, jmx, openapi, postman};
use crate::fuzz_support as support;

/// The importers by name, each with its fixtures (paths under `tests/cli/fixtures`).
const FORMATS: [(&str, &[&str]); 5] = [
    ("curl", &["curl/shop.sh", "secrets/secrets.sh"]),
    ("postman", &["postman/shop.postman_collection.json", "secrets/secrets.postman_collection.json"]),
    ("openapi", &["openapi/petstore3.yaml", "secrets/secrets.openapi.yaml"]),
    ("har", &["secrets/secrets.har"]),
    ("jmx", &["jmx/csv-extract.jmx", "jmx/transaction-timers.jmx", "secrets/secrets.jmx"]),
];

/// A recording with a correlated token, a static asset and a base64 body (as `har`'s tests).
const RECORDING: &str = r#"{"log": {"entries": [
 {"startedDateTime": "t1", "request": {"method": "GET", "url": "http://127.0.0.1:8080/app.js", "headers": []},
  "response": {"status": 200, "content": {"mimeType": "application/javascript", "text": ""}}},
 {"startedDateTime": "t2", "request": {"method": "POST", "url": "http://127.0.0.1:8080/shop/login",
   "headers": [{"name": "Content-Type", "value": "application/json"}, {"name": "Cookie", "value": "a=b"}],
   "postData": {"mimeType": "application/json", "text": "{\"user\":\"ann\",\"password\":\"pw\"}"}},
  "response": {"status": 200, "content": {"mimeType": "application/json", "text": "{\"token\":\"tok-0123456789abcdef\"}"}}},
 {"startedDateTime": "t3", "request": {"method": "POST", "url": "http://127.0.0.1:8080/shop/cart?id=550e8400-e29b-41d4-a716-446655440000",
   "headers": [{"name": "Authorization", "value": "Bearer tok-0123456789abcdef"}], "postData": {"text": "{\"productId\":3}"}},
  "response": {"status": 201, "content": {"mimeType": "application/json", "encoding": "base64", "text": "eyJpdGVtcyI6MX0="}}}
]}}"#;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/fixtures")
}

/// The inputs of each format, as bytes.
fn corpora() -> Vec<Vec<Vec<u8>>> {
    FORMATS
        .iter()
        .map(|(name, files)| {
            let mut corpus: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(fixtures().join(f)).unwrap()).collect();
            if *name == "har" {
                corpus.push(RECORDING.as_bytes().to_vec());
            }
            corpus
        })
        .collect()
}

/// Tokens of the formats: shell, JSON, YAML, XML and curl's options.
const TOKENS: &[&str] = &[
    " -H 'a: b'",
    " -d @f",
    " --data-binary $'\\x00'",
    " -u u:p",
    " -X",
    " \\\n",
    "$'",
    "&&",
    ";",
    "|",
    "`",
    "\"url\"",
    "\"item\": [",
    "{\"request\": {}}",
    "\"$ref\": \"#/x\"",
    "\"$ref\": \"#/components/schemas/Pet\"",
    "paths:\n  /x/{id}:\n    get: {}\n",
    "{{var}}",
    "{{",
    ":authority",
    "data:",
    "http://[::1",
    "http://a:b@",
    "<stringProp name=\"HTTPSampler.path\">",
    "<hashTree>",
    "</hashTree>",
    "<elementProp>",
    "${__P(x)}",
    "${x}",
    "&lt;",
    "&#65;",
    "&bogus;",
    "<?xml version=\"1.0\"?>",
    "\"encoding\": \"base64\"",
];

/// Imports `input` (its first byte picks the format), checks the result loads back and runs
/// the validation `stampede import` runs.
fn check(input: &[u8]) {
    let Some((&which, bytes)) = input.split_first() else { return };
    let text = String::from_utf8_lossy(bytes);
    let (name, _) = FORMATS[usize::from(which) % FORMATS.len()];
    let source = format!("fuzzed.{name}");
    let imported = match name {
        "curl" => curl::curl(&text, &source),
        "postman" => postman::postman(&text, &source, None),
        "openapi" => openapi::openapi(&text, &source),
        "har" => har::har(&text, &source, which & 0x80 != 0),
        _ => jmx::jmx(&text, &source),
    };
    let Ok(imported) = imported else { return };
    let path = fixtures().join("imported.yaml");
    let file = stampede_engine::parse_str(&imported.yaml, &path)
        .unwrap_or_else(|e| panic!("the {name} import does not load back: {e}\n{}", imported.yaml));
    let env: HashMap<String, String> = imported.env.keys().map(|k| (k.clone(), "x".to_string())).collect();
    let _ = stampede_engine::validate(&file, &path, &CompileOptions { env: Some(env), ..CompileOptions::default() });
}

/// Whatever the input, every importer refuses it or gives a scenario that loads back, without
/// a panic.
#[test]
fn no_mutated_input_makes_an_importer_panic_or_write_what_does_not_load() {
    let corpora = corpora();
    let cases = support::run(
        "import",
        |rng| {
            let which = rng.below(FORMATS.len());
            let corpus = &corpora[which];
            let seed = rng.pick(corpus).clone();
            let mut input = vec![which as u8 | if rng.one_in(2) { 0x80 } else { 0 }];
            input.extend(support::mutate(rng, &seed, corpus, TOKENS, 48 << 10));
            input
        },
        check,
    );
    assert!(cases > 0);
}
