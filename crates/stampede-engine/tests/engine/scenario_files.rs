//! Scenario files users write: every example validates, every malformed file gets the
//! message we promise (file, line and column, field path, scenario and step), and no
//! input makes the parser or the compiler panic.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use stampede_engine::{CompileOptions, compile};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// Parses and validates like `stampede validate`, returning the error text.
fn check(path: &Path, text: &str) -> Result<(), String> {
    check_in(path, text, None)
}

/// Like [`check`], with data and upload files relative to `base_dir` rather than to
/// `path`'s folder (so that `path` can be a bare file name in messages).
fn check_in(path: &Path, text: &str, base_dir: Option<&Path>) -> Result<(), String> {
    let file = stampede_engine::parse_str(text, path).map_err(|e| e.to_string())?;
    let opts = CompileOptions { base_dir: base_dir.map(Path::to_path_buf), ..CompileOptions::default() };
    stampede_engine::validate(&file, path, &opts).map(|_| ()).map_err(|e| e.to_string())
}

#[test]
fn every_example_validates() {
    let examples = yaml_files(&repo_root().join("examples"));
    assert!(!examples.is_empty());
    for path in examples {
        let text = std::fs::read_to_string(&path).unwrap();
        if let Err(e) = check(&path, &text) {
            panic!("{} does not validate: {e}", path.display());
        }
    }
}

#[test]
fn malformed_files_get_messages_naming_file_field_and_reason() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/invalid");
    let files = yaml_files(&dir);
    assert!(files.len() >= 40, "only {} malformed files", files.len());
    let mut located = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let expected: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("# expect: ")).collect();
        assert!(!expected.is_empty(), "{} has no `# expect:` line", path.display());
        let name = path.file_name().unwrap().to_str().unwrap();
        // Data and upload files (tests/invalid/data/) are found next to the fixture.
        let err = match check_in(&path, &text, Some(&dir)) {
            Ok(()) => panic!("{name} was accepted"),
            Err(e) => e,
        };
        let shown = path.display().to_string();
        assert!(err.starts_with(&shown), "{name}: the message does not start with the file name: {err}");
        for e in expected {
            assert!(err.contains(e), "{name}: expected `{e}` in:\n{err}");
        }
        // `# at: LINE:COLUMN`: the problem's place in the file, as `FILE:LINE:COLUMN: …`.
        if let Some(at) = text.lines().find_map(|l| l.strip_prefix("# at: ")) {
            assert!(err.contains(&format!("  - {shown}:{at}: ")), "{name}: expected it at {at} in:\n{err}");
            located += 1;
        }
    }
    assert!(located >= 18, "only {located} fixtures say where their problem is");
}

/// Every prefix of every file we have, and a few byte-level mutations of them, goes
/// through parsing and compilation without a panic.
#[test]
fn no_input_makes_the_parser_or_compiler_panic() {
    let root = repo_root();
    let mut files = yaml_files(&root.join("examples"));
    files.extend(yaml_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/invalid")));
    let mut inputs = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let cuts: Vec<usize> = (0..=text.len()).filter(|i| text.is_char_boundary(*i)).collect();
        for &cut in &cuts {
            let _ = check(&path, &text[..cut]);
            inputs += 1;
        }
        for (i, replacement) in cuts
            .iter()
            .step_by(7)
            .zip(["{", "}", "-", ":", "\"", "{{", "0", "\n  ", "[", "*a", "&a", "!!x "].iter().cycle())
        {
            let mut mutated = text.clone();
            if *i < mutated.len() {
                mutated.insert_str(*i, replacement);
                let _ = check(&path, &mutated);
                inputs += 1;
            }
        }
    }
    assert!(inputs > 1000, "only {inputs} inputs tried");
}

#[test]
fn compile_folds_constant_requests_into_bytes_once() {
    let text = r#"
name: fixed
baseUrl: http://127.0.0.1:8080/
load: {executor: constant-vus, vus: 1, iterations: 1}
vars: {item: tea}
scenarios:
  - name: s
    steps:
      - name: order
        request:
          method: post
          url: "{{baseUrl}}/post"
          query: {q: "a b"}
          json: {item: "{{item}}"}
"#;
    let file = stampede_engine::parse_str(text, Path::new("fixed.yaml")).unwrap();
    let plan = compile(&file, &CompileOptions::default()).unwrap();
    let req = &plan.scenarios[0].steps[0].request;
    let fixed = req.fixed.as_ref().expect("a request made of constants is serialized at compile time");
    let text = std::str::from_utf8(&fixed.bytes).unwrap();
    assert!(text.starts_with("POST /post?q=a+b HTTP/1.1\r\nhost: 127.0.0.1:8080\r\n"), "{text}");
    assert!(text.contains("content-type: application/json\r\n"), "{text}");
    assert!(text.ends_with("content-length: 14\r\n\r\n{\"item\":\"tea\"}"), "{text}");
}

/// `make generate` writes the schemas and the language reference; the committed copies must
/// match the types and the expression compiler's tables.
#[test]
fn committed_json_schemas_match_the_types() {
    let root = repo_root();
    for (file, generated) in [
        ("schemas/scenario.schema.json", stampede_model::schema::scenario_schema()),
        ("schemas/report.schema.json", stampede_model::schema::report_schema()),
        ("docs/scenario-language.md", stampede_engine::language_reference()),
    ] {
        let committed = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        assert!(committed == generated, "{file} is out of date: run `make generate`");
    }
}

/// Every `*.yaml` under `dir`, its folders included.
fn yaml_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut files = yaml_files(dir);
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(yaml_files_under(&path));
        }
    }
    files
}

/// The scenario an example holds: the whole document, or a `LoadTest`'s `spec.scenario`.
/// `None` for other Kubernetes objects (anything with `apiVersion` and `kind`).
fn scenario_in(doc: &Value) -> Option<&Value> {
    match (doc.get("apiVersion"), doc.get("kind").and_then(Value::as_str)) {
        (Some(_), Some("LoadTest")) => doc.pointer("/spec/scenario"),
        (Some(_), Some(_)) => None,
        _ => Some(doc),
    }
}

fn yaml_document(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Why `validator` rejects `doc`, one line per error (empty: it conforms).
fn schema_errors(validator: &jsonschema::Validator, doc: &Value) -> Vec<String> {
    validator.iter_errors(doc).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

/// A mistake users make, and how to make it in a valid scenario.
type Mistake = (&'static str, fn(&mut Value));

/// What editors check as users type: every example (and the scenario inside every
/// `LoadTest` example) conforms to the committed schema, and the schema is strict enough
/// to reject the mistakes the engine rejects (so this test can fail).
#[test]
fn every_example_conforms_to_the_committed_json_schema() {
    let root = repo_root();
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("schemas/scenario.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the committed schema is a valid JSON Schema");
    let mut checked = Vec::new();
    for path in yaml_files_under(&root.join("examples")) {
        let doc = yaml_document(&path);
        let Some(scenario) = scenario_in(&doc) else { continue };
        let errors = schema_errors(&validator, scenario);
        assert!(errors.is_empty(), "{} does not conform to the schema:\n{}", path.display(), errors.join("\n"));
        checked.push(path);
    }
    assert!(checked.iter().any(|p| p.ends_with("kubernetes/loadtest.yaml")), "{checked:?}");
    assert!(checked.len() >= 3, "only {checked:?}");

    let quickstart = yaml_document(&root.join("examples/quickstart.yaml"));
    assert!(schema_errors(&validator, &quickstart).is_empty());
    let wrong: [Mistake; 6] = [
        ("an unknown top-level field", |d| d["scenarioz"] = json!([])),
        ("an unknown step field", |d| d["scenarios"][0]["steps"][0]["chek"] = json!({"status": 200})),
        ("a weight that is text", |d| d["scenarios"][0]["weight"] = json!("heavy")),
        ("a negative VU count", |d| d["load"]["vus"] = json!(-3)),
        ("an unknown executor", |d| d["load"]["executor"] = json!("constant-vu")),
        ("no scenarios", |d| drop(d.as_object_mut().unwrap().remove("scenarios"))),
    ];
    for (what, break_it) in wrong {
        let mut doc = quickstart.clone();
        break_it(&mut doc);
        assert!(!validator.is_valid(&doc), "the schema accepts {what}: {doc}");
    }
}

/// Scenario examples carry the schema modeline, with the path from their own folder, so
/// editors autocomplete them. (`LoadTest` examples are Kubernetes objects: the scenario
/// schema does not describe them.)
#[test]
fn examples_name_the_schema_for_editors() {
    let root = repo_root();
    let mut named = 0;
    for path in yaml_files_under(&root.join("examples")) {
        let doc = yaml_document(&path);
        if scenario_in(&doc).is_none_or(|s| !std::ptr::eq(s, &doc)) {
            continue;
        }
        let depth = path.strip_prefix(&root).unwrap().components().count() - 1;
        let schema = format!("{}schemas/scenario.schema.json", "../".repeat(depth));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(&format!("# yaml-language-server: $schema={schema}\n")),
            "{} does not start with `# yaml-language-server: $schema={schema}`",
            path.display()
        );
        assert!(path.parent().unwrap().join(&schema).is_file(), "{}: {schema} is not there", path.display());
        named += 1;
    }
    assert!(named >= 2, "only {named} scenario examples");
}
