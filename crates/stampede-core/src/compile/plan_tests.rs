//! The compiler's tests: status patterns, targets, and `baseUrl` with `vars`.

use super::*;

#[test]
fn status_patterns() {
    let p = |s: &str| parse_status_item(&StatusItem::Pattern(s.into()));
    assert_eq!(p("2xx"), Ok((200, 299)));
    assert_eq!(p("200-204"), Ok((200, 204)));
    assert_eq!(p("404"), Ok((404, 404)));
    assert!(p("7xx").is_err());
    assert!(p("300-200").is_err());
    assert!(parse_status_item(&StatusItem::Code(42)).is_err());
}

#[test]
fn targets_keep_explicit_ports_in_the_host_header() {
    let t = HttpUrl::parse("http://127.0.0.1:8080/a/b?x=1").unwrap();
    assert_eq!(
        (t.host.as_str(), t.port, t.authority.as_str(), t.path_and_query.as_str()),
        ("127.0.0.1", 8080, "127.0.0.1:8080", "/a/b?x=1")
    );
    let t = HttpUrl::parse("http://localhost/").unwrap();
    assert_eq!((t.port, t.authority.as_str(), t.tls), (80, "localhost", false));
    let t = HttpUrl::parse("https://localhost/").unwrap();
    assert_eq!((t.port, t.authority.as_str(), t.tls), (443, "localhost", true));
    assert!(HttpUrl::parse("ftp://x/").is_err());
}

/// JMeter's `${host}` and Postman's `{{host}}` keep their meaning: `baseUrl` may use
/// constant `vars` (and they theirs); one that changes, or a circle, is refused by name.
#[test]
fn base_url_may_use_constant_vars() {
    let compiled = |yaml: &str| {
        let file: ScenarioFile = serde_yaml::from_str(yaml).unwrap();
        compile(&file, &CompileOptions { env: Some(HashMap::new()), ..CompileOptions::default() })
    };
    let ok = "name: t\nbaseUrl: 'http://{{host}}:{{port}}/{{prefix}}'\n\
              vars: {host: 127.0.0.1, port: 8080, prefix: 'api/{{version}}', version: v2, url: '{{baseUrl}}/x'}\n\
              load: {executor: constant-vus, vus: 1, iterations: 1}\n\
              scenarios: [{name: s, steps: [{name: a, request: {url: '{{url}}'}}]}]\n";
    let plan = compiled(ok).unwrap_or_else(|p| panic!("{p:?}"));
    assert_eq!(plan.base_url.as_deref(), Some("http://127.0.0.1:8080/api/v2"));
    let generated = ok.replace("port: 8080", "port: '{{ randomInt(1, 9) }}'");
    let problems = format!("{:?}", compiled(&generated).err().unwrap());
    assert!(problems.contains("`{{port}}` is not a constant"), "{problems}");
    let circle = ok.replace("version: v2", "version: '{{prefix}}'");
    let problems = format!("{:?}", compiled(&circle).err().unwrap());
    assert!(problems.contains("unknown variable `prefix`"), "{problems}");
}
