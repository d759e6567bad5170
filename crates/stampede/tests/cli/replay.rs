//! #33: corpus artifacts of five kinds, imported and run for a bounded count against a server on
//! loopback that speaks their API — a HAR's recorded answers replayed, the documented status of
//! an OpenAPI operation, `200` for a Postman collection, a JMeter plan and a curl line — with 0
//! errors, and the server saw exactly the requests the source describes (method and path, read
//! from the source by the test itself, in order, as many times as the source's load says).

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::corpus::corpus;
use super::curl_parity::{Seen, read_request};

/// An answer: status, headers, body.
type Answer = (u16, Vec<(String, String)>, Vec<u8>);

/// A keep-alive HTTP/1.1 server on loopback answering with `respond`, keeping what it saw.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn start(respond: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (kept, respond) = (seen.clone(), Arc::new(respond));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let (kept, respond) = (kept.clone(), respond.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(30)));
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    while let Some(request) = read_request(&mut reader) {
                        let (status, headers, body) = respond(&request);
                        kept.lock().unwrap().push(request);
                        let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
                        for (k, v) in headers {
                            out.push_str(&format!("{k}: {v}\r\n"));
                        }
                        out.push_str("\r\n");
                        if stream.write_all(out.as_bytes()).and_then(|_| stream.write_all(&body)).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Server { port, seen }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

fn ok_json(_: &Seen) -> Answer {
    (200, vec![("content-type".into(), "application/json".into())], b"{}".to_vec())
}

/// Imports `file` (as `kind`, with `args`), points what it wrote at `origin` (its `baseUrl`
/// line), runs it with `env`; the JSON report.
fn import_and_run(kind: &str, file: &Path, args: &[&str], origin: &str, env: &[(&str, &str)]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let yaml = dir.path().join("s.yaml");
    let imported = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["import", kind])
        .arg(file)
        .args(args)
        .arg("-o")
        .arg(&yaml)
        .output()
        .unwrap();
    assert!(imported.status.success(), "{}: {}", file.display(), String::from_utf8_lossy(&imported.stderr));
    let text = std::fs::read_to_string(&yaml).unwrap();
    let text: String = text
        .lines()
        .map(|l| if l.starts_with("baseUrl: ") { format!("baseUrl: {origin}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&yaml, text).unwrap();
    let report = dir.path().join("r.json");
    let mut run = Command::new(env!("CARGO_BIN_EXE_stampede"));
    run.arg("run").arg(&yaml).arg("--quiet").arg("--out").arg(&report);
    for (k, v) in env {
        run.env(k, v);
    }
    let ran = run.output().unwrap();
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap_or_default())
        .unwrap_or_else(|_| panic!("{}: no report: {}", file.display(), String::from_utf8_lossy(&ran.stderr)));
    assert!(ran.status.success(), "{}: {}\n{report:#}", file.display(), String::from_utf8_lossy(&ran.stderr));
    report
}

fn totals(report: &Value) -> (u64, u64) {
    let t = &report["total"];
    (t["requests"].as_u64().unwrap_or(0), t["errors"].as_u64().unwrap_or(0))
}

fn method_and_path(seen: &[Seen]) -> Vec<(String, String)> {
    seen.iter().map(|s| (s.method.clone(), s.target.clone())).collect()
}

/// Chrome's recording of httpbin (HTTPolice's test data): every entry's recorded answer replayed;
/// the scenario sends each request once, in the recorded order (`--keep-static`: all of them).
#[test]
fn a_chrome_har_replays_against_its_recorded_answers_request_for_request() {
    let file = corpus().join("har/httpolice-httpbin_chrome.har");
    let har: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let entries = har["log"]["entries"].as_array().unwrap().clone();
    let path_of = |url: &str| {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        rest.find('/').map_or("/".to_string(), |at| rest[at..].to_string())
    };
    let expected: Vec<(String, String)> = entries
        .iter()
        .map(|e| (e["request"]["method"].as_str().unwrap().to_string(), path_of(e["request"]["url"].as_str().unwrap())))
        .collect();
    let recorded = entries.clone();
    let server = Server::start(move |seen| {
        let e = recorded
            .iter()
            .find(|e| {
                e["request"]["method"] == seen.method.as_str()
                    && path_of(e["request"]["url"].as_str().unwrap()) == seen.target
            })
            .expect("a request the recording holds");
        let mut status = e["response"]["status"].as_u64().unwrap() as u16;
        // As a server does: a 304 the browser's cache condition made is, without one, the whole
        // answer (httpbin's /status/304 is a 304 whatever is sent).
        let conditional = e["request"]["headers"].as_array().into_iter().flatten().any(|h| {
            h["name"]
                .as_str()
                .is_some_and(|n| n.eq_ignore_ascii_case("if-none-match") || n.eq_ignore_ascii_case("if-modified-since"))
        });
        if status == 304 && conditional && seen.header("if-none-match").is_none() {
            status = 200;
        }
        let body = e["response"]["content"]["text"].as_str().unwrap_or_default().as_bytes().to_vec();
        (status, vec![], if status == 204 || status == 304 { vec![] } else { body })
    });
    let report = import_and_run("har", &file, &["--keep-static"], &server.origin(), &[]);
    assert_eq!(totals(&report), (expected.len() as u64, 0), "{report:#}");
    assert_eq!(method_and_path(&server.take()), expected);
}

/// FastAPI's "bigger applications" app (its own OpenAPI output, no server URL): each operation
/// once, in the document's order, its path parameters filled, against BASE_URL.
#[test]
fn a_fastapi_description_calls_each_operation_once_in_order() {
    let file = corpus().join("openapi/fastapi-bigger_applications-app-main.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let mut expected = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in ["get", "put", "post", "delete", "options", "head", "patch", "trace"] {
            if item.get(method).is_some() {
                expected.push((method.to_ascii_uppercase(), path.clone()));
            }
        }
    }
    assert!(expected.len() >= 4, "{expected:?}");
    let server = Server::start(ok_json);
    let origin = server.origin();
    // Its security parameters, from the environment as the import says.
    let env = [("BASE_URL", origin.as_str()), ("TOKEN", "jessica"), ("X_TOKEN", "fake-super-secret-token")];
    let report = import_and_run("openapi", &file, &[], &origin, &env);
    let seen = method_and_path(&server.take());
    assert_eq!(totals(&report), (expected.len() as u64, 0), "{report:#}");
    assert_eq!(seen.len(), expected.len(), "{seen:?}");
    for ((m, target), (em, template)) in seen.iter().zip(&expected) {
        let path = target.split('?').next().unwrap();
        let same = path.split('/').count() == template.split('/').count()
            && path.split('/').zip(template.split('/')).all(|(a, b)| a == b || b.starts_with('{') && !a.is_empty());
        assert!(m == em && same, "{m} {target} is not {em} {template}");
    }
}

/// A shop collection (perfsage's fixture): its `{{base_url}}` and `{{token}}` from the
/// environment; every request once, in order, the token sent as the collection says.
#[test]
fn a_postman_collection_sends_its_requests_in_order_with_its_variables() {
    let file = corpus().join("postman/perfsage-shop_postman.json");
    let collection: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    fn flatten(items: &[Value], out: &mut Vec<(String, String)>) {
        for item in items {
            match item["item"].as_array() {
                Some(children) => flatten(children, out),
                None => {
                    let raw = item["request"]["url"]["raw"].as_str().or(item["request"]["url"].as_str()).unwrap();
                    let path = raw.split_once("}}").map_or(raw, |(_, p)| p);
                    out.push((item["request"]["method"].as_str().unwrap_or("GET").to_string(), path.to_string()));
                }
            }
        }
    }
    let mut expected = Vec::new();
    flatten(collection["item"].as_array().unwrap(), &mut expected);
    let server = Server::start(ok_json);
    let origin = server.origin();
    let report = import_and_run("postman", &file, &[], &origin, &[("BASE_URL", &origin), ("TOKEN", "t-42")]);
    let seen = server.take();
    assert_eq!(totals(&report), (expected.len() as u64, 0), "{report:#}");
    assert_eq!(method_and_path(&seen), expected);
    assert!(seen.iter().any(|s| s.header("authorization") == Some("Bearer t-42")), "{seen:?}");
}

/// JMeter's own "build a web test plan" tutorial plan: its thread group's threads × loops
/// iterations of its samplers, each request the sampler's method and path.
#[test]
fn jmeters_web_test_plan_runs_its_threads_times_loops() {
    let file = corpus().join("jmx/jmeter213-build-web-test-plan.jmx");
    let xml = std::fs::read_to_string(&file).unwrap();
    let prop = |name: &str| -> Vec<String> {
        let re =
            regex::Regex::new(&format!(r#"<stringProp name="{}">([^<]*)</stringProp>"#, regex::escape(name))).unwrap();
        re.captures_iter(&xml).map(|c| c[1].to_string()).collect()
    };
    let threads: u64 = prop("ThreadGroup.num_threads")[0].parse().unwrap();
    let loops: u64 = prop("LoopController.loops")[0].parse().unwrap();
    // Each enabled sampler's own path and method (HTTP Request Defaults hold a path too).
    let sampler =
        regex::Regex::new(r#"(?s)<HTTPSampler(?:Proxy)?\s[^>]*enabled="true"[^>]*>.*?</HTTPSampler(?:Proxy)?>"#)
            .unwrap();
    let field = |block: &str, name: &str| {
        let re = regex::Regex::new(&format!(r#"<stringProp name="{name}">([^<]*)</stringProp>"#)).unwrap();
        re.captures(block).map(|c| c[1].to_string()).unwrap_or_default()
    };
    let (methods, paths): (Vec<String>, Vec<String>) = sampler
        .find_iter(&xml)
        .map(|m| (field(m.as_str(), "HTTPSampler.method"), field(m.as_str(), "HTTPSampler.path")))
        .unzip();
    assert!(!paths.is_empty());
    let server = Server::start(|_| (200, vec![("content-type".into(), "text/html".into())], b"<html></html>".to_vec()));
    let report = import_and_run("jmx", &file, &[], &server.origin(), &[]);
    let seen = method_and_path(&server.take());
    let iterations = threads * loops;
    assert_eq!(totals(&report), (iterations * paths.len() as u64, 0), "{report:#}");
    // Every iteration sends the samplers in order (VUs interleave, each in its own order).
    let mut by_request: BTreeMap<(String, String), u64> = BTreeMap::new();
    for s in seen {
        *by_request.entry(s).or_default() += 1;
    }
    let mut expected: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (m, p) in methods.iter().zip(&paths) {
        *expected.entry((m.clone(), p.clone())).or_default() += iterations;
    }
    assert_eq!(by_request, expected);
}

/// A curl line from Ollama's API docs (a JSON body over several lines): one POST of that body.
#[test]
fn an_ollama_docs_curl_line_posts_its_json_body() {
    let root = corpus();
    let sources =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/SOURCES.tsv")).unwrap();
    let file = sources
        .lines()
        .filter_map(|l| l.split('\t').nth(1))
        .find(|f| {
            f.starts_with("curl/ollama")
                && std::fs::read_to_string(root.join(f))
                    .is_ok_and(|t| t.contains("/api/generate") && t.contains("-d '{"))
        })
        .expect("an ollama generate line");
    let text = std::fs::read_to_string(root.join(file)).unwrap();
    let body_text = text.split_once("-d '").unwrap().1.rsplit_once('\'').unwrap().0;
    let want: Value = serde_json::from_str(body_text).unwrap();
    let server = Server::start(ok_json);
    let report = import_and_run("curl", &root.join(file), &[], &server.origin(), &[]);
    assert_eq!(totals(&report), (1, 0), "{report:#}");
    let seen = server.take();
    assert_eq!(method_and_path(&seen), [("POST".to_string(), "/api/generate".to_string())]);
    assert_eq!(serde_json::from_slice::<Value>(&seen[0].body).unwrap(), want);
}
