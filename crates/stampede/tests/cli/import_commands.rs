//! `stampede import` end to end: curl command lines, a Postman collection and OpenAPI
//! descriptions import to scenarios that validate and run clean against the built-in target;
//! every importer turns the credentials it meets into environment variables, never kept.

use std::process::Command;

use serde_json::Value;

use super::commands::{repo_root, stampede, text};

/// #24: `stampede import curl` of command lines as a browser copies them: a scenario that
/// validates, with each request a step, its secrets as `{{env.NAME}}` (never the recorded
/// values), and what it could not convert listed; run against the built-in target with those
/// variables set, every request answered.
#[test]
fn curl_commands_import_to_a_scenario_that_runs_clean() {
    let target = stampede_target::TargetServer::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), 1).unwrap();
    let port = target.base_url().rsplit(':').next().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::fs::read_to_string(repo_root().join("crates/stampede/tests/cli/fixtures/curl/shop.sh")).unwrap();
    let input = dir.path().join("shop.sh");
    std::fs::write(&input, fixture.replace("PORT", &port)).unwrap();
    let scenario = dir.path().join("shop.yaml");
    let import = stampede(&["import", "curl", input.to_str().unwrap(), "-o", scenario.to_str().unwrap()]);
    let stderr = text(&import.stderr);
    assert!(import.status.success(), "{stderr}");
    assert!(stderr.contains("option `--retry` is not converted"), "listed, not dropped: {stderr}");
    for var in ["HOST_127_0_0_1_AUTHORIZATION", "HOST_127_0_0_1_X_API_KEY", "HOST_127_0_0_1_PASSWORD"] {
        assert!(stderr.contains(&format!("note: set {var}")), "{stderr}");
    }
    let yaml = std::fs::read_to_string(&scenario).unwrap();
    assert!(!yaml.contains("recorded"), "no recorded secret in the file:\n{yaml}");
    assert!(yaml.contains("# from curl command 1: POST http://127.0.0.1:"), "{yaml}");
    assert!(yaml.contains("anné"), "ANSI-C quoting read as bash does:\n{yaml}");
    assert!(yaml.contains("{{env.HOST_127_0_0_1_PASSWORD}}"), "the body's password from the environment:\n{yaml}");

    let out = dir.path().join("r.json");
    let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", scenario.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .env("HOST_127_0_0_1_AUTHORIZATION", "from-env")
        .env("HOST_127_0_0_1_X_API_KEY", "k-env")
        .env("HOST_127_0_0_1_PASSWORD", "from-env")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}{}", text(&run.stdout), text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!((report["total"]["requests"].as_u64(), report["total"]["errors"].as_u64()), (Some(4), Some(0)));
    let steps: Vec<&str> = report["steps"].as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["POST /shop/login", "GET /shop/products", "GET /shop/products/3", "PUT /put"]);
    assert_eq!(target.stats().requests(), 4);
    assert_eq!(target.stats().shop().counts().logins, 1);
    target.stop();

    // Nothing usable, or broken shell text: exit 2 naming the input.
    for (text_in, says) in
        [("echo hello\n", "no curl command with an http(s) URL"), ("curl 'http://x/\n", "quote is not closed")]
    {
        let bad = dir.path().join("bad.sh");
        std::fs::write(&bad, text_in).unwrap();
        let out = stampede(&["import", "curl", bad.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains(says) && text(&out.stderr).contains("bad.sh"), "{}", text(&out.stderr));
    }
}

/// #24: `stampede import postman` of a v2.1 collection (folders, collection variables, bearer
/// auth from a variable, a JSON and a form body, a disabled header, a test script): every request
/// a step in order, secrets from the environment, the script listed as not converted; run against
/// the built-in target, 0 errors.
#[test]
fn a_postman_collection_imports_to_a_scenario_that_runs_clean() {
    let target = stampede_target::TargetServer::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), 1).unwrap();
    let port = target.base_url().rsplit(':').next().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let fixture = std::fs::read_to_string(
        repo_root().join("crates/stampede/tests/cli/fixtures/postman/shop.postman_collection.json"),
    )
    .unwrap();
    let input = dir.path().join("shop.postman_collection.json");
    std::fs::write(&input, fixture.replace("PORT", &port)).unwrap();
    let scenario = dir.path().join("shop.yaml");
    let import = stampede(&["import", "postman", input.to_str().unwrap(), "-o", scenario.to_str().unwrap()]);
    let stderr = text(&import.stderr);
    assert!(import.status.success(), "{stderr}");
    assert!(stderr.contains("`Account / Log in`: its test script (2 line(s)) is not converted"), "{stderr}");
    for var in ["SHOP_TOKEN", "HOST_127_0_0_1_PASSWORD"] {
        assert!(stderr.contains(&format!("note: set {var}")), "{stderr}");
    }
    let yaml = std::fs::read_to_string(&scenario).unwrap();
    assert!(!yaml.contains("recorded"), "no recorded secret in the file:\n{yaml}");
    assert!(!yaml.contains("X-Debug"), "a disabled header stays out:\n{yaml}");
    let file: stampede_model::scenario::ScenarioFile = serde_yaml::from_str(&yaml).unwrap();
    let steps: Vec<&str> = file.scenarios[0].steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        steps,
        ["Account / Log in", "Catalogue / List products", "Catalogue / One product", "Catalogue / Search (form)"]
    );
    let login = file.scenarios[0].steps[0].request.as_ref().unwrap();
    assert!(!login.headers.contains_key("Authorization"), "the request's noauth wins over the collection's bearer");
    let list = file.scenarios[0].steps[1].request.as_ref().unwrap();
    assert_eq!(list.headers["Authorization"], "Bearer {{shopToken}}");
    assert_eq!(file.vars.len(), 2, "productId and shopToken: {:?}", file.vars);

    let out = dir.path().join("r.json");
    let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", scenario.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .env("SHOP_TOKEN", "t-from-env")
        .env("HOST_127_0_0_1_PASSWORD", "from-env")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}{}", text(&run.stdout), text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!((report["total"]["requests"].as_u64(), report["total"]["errors"].as_u64()), (Some(4), Some(0)));
    assert_eq!((target.stats().requests(), target.stats().shop().counts().logins), (4, 1));
    target.stop();
}

/// #32: every importer turns each credential it meets — headers, query keys, JSON and form body
/// fields, a URL's user-info, curl's `-u`, `--oauth2-bearer` and `-b`, variables — into
/// `{{env.NAME}}`, one variable per host and credential: no recorded value (all `s3cr3t-…` in
/// the fixtures) in the scenario, its comments, stderr or the LoadTest `--print-loadtest`
/// writes, whose `spec.env` takes every variable from a Secret by reference. stderr names the
/// variables; the scenario validates with them set, and the LoadTest as the operator validates it.
#[test]
fn imported_credentials_become_one_environment_variable_per_host_and_never_keep_their_values() {
    let fixtures = repo_root().join("crates/stampede/tests/cli/fixtures/secrets");
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "har",
            "secrets.har",
            &[
                "# recorded 2026-01-01T00:00:01Z: POST https://api.example.com/login?api_key={{env.API_EXAMPLE_COM_API_KEY}}&lang=en → 200",
                "url: https://api.example.com/login?api_key={{env.API_EXAMPLE_COM_API_KEY}}&lang=en",
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                "Authorization: Bearer {{env.OTHER_HOST_AUTHORIZATION}}",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                r#""password":"{{env.API_EXAMPLE_COM_PASSWORD}}""#,
                r#""session_id":"{{env.API_EXAMPLE_COM_SESSION_ID}}""#,
                "url: https://other.host/data?access_token={{env.OTHER_HOST_ACCESS_TOKEN}}",
                "# recorded 2026-01-01T00:00:03Z: POST https://api.example.com/form → 204",
                "Authorization: Basic {{env.API_EXAMPLE_COM_AUTHORIZATION_2}}",
                "body: q=kettle&client_secret={{env.API_EXAMPLE_COM_CLIENT_SECRET}}",
            ],
        ),
        (
            "jmx",
            "secrets.jmx",
            &[
                "url: https://api.example.com/login?api_key={{env.API_EXAMPLE_COM_API_KEY}}",
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                "Authorization: Bearer {{env.OTHER_HOST_AUTHORIZATION}}",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                "X-Api-Key: '{{env.OTHER_HOST_X_API_KEY}}'",
                // The body keeps its layout; the credential's value is replaced where it stands.
                r#""password": "{{env.API_EXAMPLE_COM_PASSWORD}}""#,
                "token: '{{env.OTHER_HOST_TOKEN}}'",
                "adminPassword: '{{env.ADMIN_PASSWORD}}'",
            ],
        ),
        (
            "curl",
            "secrets.sh",
            &[
                "# from curl command 1: POST https://api.example.com/v1/login?api_key={{env.API_EXAMPLE_COM_API_KEY}}&q=1",
                "Authorization: Basic {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                r#""password":"{{env.API_EXAMPLE_COM_PASSWORD}}""#,
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION_2}}",
                "Cookie: '{{env.API_EXAMPLE_COM_COOKIE}}'",
                "Authorization: Bearer {{env.OTHER_HOST_AUTHORIZATION}}",
                "Authorization: Basic {{env.OTHER_HOST_AUTHORIZATION_2}}",
                "url: https://other.host/y?token={{env.OTHER_HOST_TOKEN}}&page=2",
            ],
        ),
        (
            "postman",
            "secrets.postman_collection.json",
            &[
                "url: '{{baseUrl}}/items?api_key={{env.API_EXAMPLE_COM_API_KEY}}&sig={{env.API_EXAMPLE_COM_SIG}}&page=1'",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                "Authorization: Bearer {{env.OTHER_HOST_AUTHORIZATION}}",
                // The body keeps its layout; the credential's value is replaced where it stands.
                r#"{"user": "ann", "password": "{{env.OTHER_HOST_PASSWORD}}"}"#,
                "client_secret: '{{env.OTHER_HOST_CLIENT_SECRET}}'",
                "key: '{{env.OTHER_HOST_KEY}}'",
                "apiSecret: '{{env.API_SECRET}}'",
            ],
        ),
        (
            "openapi",
            "secrets.openapi.yaml",
            &[
                "api_key: '{{env.API_EXAMPLE_COM_API_KEY}}'",
                "X-Api-Key: '{{env.API_EXAMPLE_COM_X_API_KEY}}'",
                "Authorization: Bearer {{env.API_EXAMPLE_COM_AUTHORIZATION}}",
                r#""password":"{{env.API_EXAMPLE_COM_PASSWORD}}""#,
                r#""session":{"token":"{{env.API_EXAMPLE_COM_TOKEN}}"}"#,
            ],
        ),
    ];
    for (format, fixture, wanted) in cases {
        let input = fixtures.join(fixture);
        assert!(std::fs::read_to_string(&input).unwrap().contains("s3cr3t-"), "{fixture} holds the secrets");
        let import = stampede(&["import", format, input.to_str().unwrap()]);
        let (yaml, stderr) = (text(&import.stdout), text(&import.stderr));
        assert!(import.status.success(), "{format}: {stderr}");
        assert!(
            !yaml.contains("s3cr3t") && !stderr.contains("s3cr3t"),
            "{format}: a recorded secret:\n{yaml}\n{stderr}"
        );
        for w in wanted {
            assert!(yaml.contains(w), "{format}: `{w}` in\n{yaml}");
        }
        // stderr names every variable the file reads (and nothing else), each a valid name.
        let notes: std::collections::BTreeSet<String> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("note: set ")?.split(' ').next().map(str::to_string))
            .collect();
        let used: std::collections::BTreeSet<String> = yaml
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .flat_map(|l| l.split("{{env.").skip(1).map(|r| r.split("}}").next().unwrap().to_string()))
            .collect();
        assert_eq!(notes, used, "{format}: {stderr}");
        assert!(
            used.iter().all(|v| v.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
                && !v.starts_with(|c: char| c.is_ascii_digit())),
            "{format}: {used:?}"
        );
        if format != "openapi" {
            assert!(
                used.contains("API_EXAMPLE_COM_AUTHORIZATION") && used.contains("OTHER_HOST_AUTHORIZATION"),
                "{format}: two hosts' bearers, two variables: {used:?}"
            );
        }
        if format == "curl" {
            assert!(stderr.contains("option `--proxy-user` is not converted"), "{stderr}");
            assert!(!stderr.contains("a second URL"), "--oauth2-bearer and --proxy-user take their values: {stderr}");
        }

        // It validates with its variables set (and only then: they are what it needs).
        let file = dir.path().join(format!("{format}.yaml"));
        std::fs::write(&file, &yaml).unwrap();
        let validate = |env: &[(&str, &str)]| {
            Command::new(env!("CARGO_BIN_EXE_stampede"))
                .args(["validate", file.to_str().unwrap()])
                .envs(env.iter().copied())
                .output()
                .unwrap()
        };
        let set: Vec<(&str, &str)> = used.iter().map(|v| (v.as_str(), "x")).collect();
        let valid = validate(&set);
        assert!(valid.status.success(), "{format}: {}", text(&valid.stderr));
        let unset = validate(&[]);
        assert_eq!(unset.status.code(), Some(2), "{format}: {}", text(&unset.stdout));
        assert!(text(&unset.stderr).contains("is not set"), "{format}: {}", text(&unset.stderr));

        // --print-loadtest: every variable from the Secret by reference, no value inline.
        let printed = stampede(&["import", format, input.to_str().unwrap(), "--print-loadtest"]);
        let lt_yaml = text(&printed.stdout);
        assert!(printed.status.success(), "{format}: {}", text(&printed.stderr));
        assert!(!lt_yaml.contains("s3cr3t"), "{format}:\n{lt_yaml}");
        let lt: stampede_api::LoadTest = serde_yaml::from_str(&lt_yaml).unwrap();
        let secret = format!("{}-secrets", lt.metadata.name.as_deref().unwrap());
        assert!(lt_yaml.contains(&format!("kubectl create secret generic {secret} ")), "{lt_yaml}");
        let from_secret: std::collections::BTreeSet<String> = lt
            .spec
            .env
            .iter()
            .map(|e| {
                assert_eq!(e.value, None, "{format}: {} inline", e.name);
                let r = e.value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref()).expect("a secretKeyRef");
                assert_eq!((r.name.as_str(), r.key.as_str()), (secret.as_str(), e.name.as_str()));
                e.name.clone()
            })
            .collect();
        assert_eq!(from_secret, used, "{format}");
        let scenario = serde_yaml::to_string(lt.spec.scenario.as_ref().unwrap()).unwrap();
        stampede_operator::validation::validate(&lt, &scenario, "printed")
            .unwrap_or_else(|e| panic!("{format}: the operator refuses it: {e:?}"));
    }
}

/// A GET of `path` from `addr` with HTTP/1.1 (`Connection: close`): the body.
fn http_body(addr: &str, path: &str) -> String {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// #24: `stampede import openapi`: the built-in target's own description (served by it) imports
/// to a scenario that runs against it with 0 errors, one request per operation; the Swagger
/// Petstore 3 description (a fixture) imports to one that validates; a broken `$ref` is a
/// warning naming it.
#[test]
fn openapi_descriptions_import_to_scenarios_that_validate_and_run_clean() {
    let target = stampede_target::TargetServer::start(std::net::SocketAddr::from(([127, 0, 0, 1], 0)), 1).unwrap();
    let addr = target.base_url().trim_start_matches("http://").to_string();
    let dir = tempfile::tempdir().unwrap();
    let described = dir.path().join("target.openapi.yaml");
    let text_in = http_body(&addr, "/openapi.yaml");
    assert!(text_in.contains(&format!("url: http://{addr}")), "the server's own address");
    std::fs::write(&described, &text_in).unwrap();
    let operations = |doc: &str| -> usize {
        let v: serde_yaml::Value = serde_yaml::from_str(doc).unwrap();
        v["paths"].as_mapping().unwrap().values().map(|p| p.as_mapping().unwrap().len()).sum()
    };
    let scenario = dir.path().join("target.yaml");
    let import = stampede(&["import", "openapi", described.to_str().unwrap(), "-o", scenario.to_str().unwrap()]);
    assert!(import.status.success(), "{}", text(&import.stderr));
    let out = dir.path().join("r.json");
    assert!(text(&import.stderr).contains("note: set HOST_127_0_0_1_PASSWORD"), "the login's password example");
    let run = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["run", scenario.to_str().unwrap(), "--quiet", "--out", out.to_str().unwrap()])
        .env("HOST_127_0_0_1_PASSWORD", "pw")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}{}", text(&run.stdout), text(&run.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let n = operations(&text_in) as u64;
    assert_eq!((report["total"]["requests"].as_u64(), report["total"]["errors"].as_u64()), (Some(n), Some(0)));
    assert_eq!(target.stats().requests(), n + 1, "one request per operation, and the description's");
    assert_eq!(target.stats().shop().counts().logins, 1);
    target.stop();

    // The Petstore: every operation a step; it validates with its secrets' variables set.
    let petstore = repo_root().join("crates/stampede/tests/cli/fixtures/openapi/petstore3.yaml");
    let pet_yaml = dir.path().join("petstore.yaml");
    let import = stampede(&["import", "openapi", petstore.to_str().unwrap(), "-o", pet_yaml.to_str().unwrap()]);
    let stderr = text(&import.stderr);
    assert!(import.status.success(), "{stderr}");
    let vars = ["PETSTORE3_SWAGGER_IO_AUTHORIZATION", "PETSTORE3_SWAGGER_IO_API_KEY", "PETSTORE3_SWAGGER_IO_PASSWORD"];
    for var in vars {
        assert!(stderr.contains(&format!("note: set {var} ")), "{stderr}");
    }
    let file: stampede_model::scenario::ScenarioFile =
        serde_yaml::from_str(&std::fs::read_to_string(&pet_yaml).unwrap()).unwrap();
    let fixture = std::fs::read_to_string(&petstore).unwrap();
    assert_eq!(file.scenarios[0].steps.len(), operations(&fixture));
    assert_eq!(file.base_url.as_deref(), Some("https://petstore3.swagger.io/api/v3"));
    let add_pet = file.scenarios[0].steps.iter().find(|s| s.name == "addPet").unwrap().request.as_ref().unwrap();
    assert_eq!(add_pet.json.as_ref().unwrap()["name"], "doggie", "the schema's example");
    let valid = Command::new(env!("CARGO_BIN_EXE_stampede"))
        .args(["validate", pet_yaml.to_str().unwrap()])
        .envs(vars.map(|v| (v, "x")))
        .output()
        .unwrap();
    assert!(valid.status.success(), "{}", text(&valid.stderr));

    // A broken `$ref`: a warning naming it, the rest imported.
    let broken = dir.path().join("broken.yaml");
    let broken_doc = "openapi: 3.0.3\ninfo: {title: b, version: '1'}\nservers: [{url: 'http://127.0.0.1:9'}]\npaths:\n  /a:\n    post:\n      requestBody: {content: {application/json: {schema: {$ref: '#/components/schemas/Gone'}}}}\n      responses: {'204': {description: ok}}\n  /b:\n    get:\n      responses: {'200': {description: ok}}\n";
    std::fs::write(&broken, broken_doc).unwrap();
    let import = stampede(&["import", "openapi", broken.to_str().unwrap()]);
    assert!(import.status.success(), "{}", text(&import.stderr));
    assert!(
        text(&import.stderr).contains("`$ref: #/components/schemas/Gone` leads nowhere"),
        "{}",
        text(&import.stderr)
    );
    assert_eq!(text(&import.stdout).matches("      - name: ").count(), 2);
    // Not a description at all: exit 2 naming the file.
    std::fs::write(&broken, "swagger: '1.2'\n").unwrap();
    let import = stampede(&["import", "openapi", broken.to_str().unwrap()]);
    assert_eq!(import.status.code(), Some(2));
    assert!(
        text(&import.stderr).contains("broken.yaml: `swagger: 1.2` is not Swagger 2.0"),
        "{}",
        text(&import.stderr)
    );
}
