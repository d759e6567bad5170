//! #33: typed values as a server sees them — a string that is one hole alone sends the value's
//! own type (an expression's, a var's, an extracted JSON value's), `vars` take numbers,
//! booleans and lists and may use what `init` extracted, `extract: {json: "$"}` keeps the
//! whole body, and a group whose steps were all skipped is no transaction.

use std::net::{Ipv4Addr, SocketAddr};

use serde_json::json;
use stampede_target::TargetServer;

use crate::flow::{Recorded, recording_proxy, requests, run_yaml};

/// The JSON bodies of the requests to `path`, in order, over all connections.
fn bodies(recorded: &Recorded, path: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    for conn in recorded.lock().unwrap().iter() {
        for r in requests(&conn.lock().unwrap()) {
            if r.target == path {
                out.push(serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {:?}", r.body)));
            }
        }
    }
    out
}

/// The `authorization` headers of the requests to `path`, in order.
fn authorizations(recorded: &Recorded, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    for conn in recorded.lock().unwrap().iter() {
        for r in requests(&conn.lock().unwrap()) {
            if r.target == path {
                out.push(r.headers.get("authorization").cloned().unwrap_or_default());
            }
        }
    }
    out
}

#[test]
fn a_lone_hole_sends_its_values_own_type_at_any_depth() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let (proxy, recorded) = recording_proxy(target.addr());
    let report = run_yaml(
        r#"
name: typed
load: {executor: constant-vus, vus: 1, iterations: 2}
vars:
  qty: 3
  on: true
  ids: [1, 2]
  text: "7"
  label: "n={{qty}}"
  sum: "{{ qty + 1 }}"
  who: {value: "{{ vu.id }}", scope: vu}
  name: {value: "{{ 'u' + string(vu.iteration) }}", scope: iteration}
  fresh: "{{ vu.iteration * 10 }}"
init:
  - name: login
    request:
      method: POST
      url: "{{baseUrl}}/post"
      json: {user: 5, code: "42", tags: ["a", 1], none: null}
    extract:
      uid: {json: "$.json.user"}
      code: {json: "$.json.code"}
      tags: {json: "$.json.tags"}
      none: {json: "json.none"}
      whole: {json: "$"}
scenarios:
  - name: s
    steps:
      - name: send
        request:
          method: POST
          url: "{{baseUrl}}/anything/typed"
          json:
            qty: "{{qty}}"
            on: "{{ on }}"
            ids: "{{ids}}"
            first: "{{ ids[1] }}"
            text: "{{text}}"
            label: "{{label}}"
            sum: "{{sum}}"
            id: "{{ vu.id }}"
            it: "{{vu.iteration}}"
            who: "{{who}}"
            name: "{{name}}"
            fresh: "{{fresh}}"
            uid: "{{uid}}"
            code: "{{code}}"
            tags: "{{ tags }}"
            none: "{{none}}"
            user: "{{ whole.json.user }}"
            nested: {deep: [{uid: "{{ uid }}", mixed: "u{{uid}}-{{code}}", spaced: " {{uid}}"}]}
            obj: "{{ {'k': qty, 'on': on} }}"
        check:
          json:
            $.json.qty: {equals: "{{qty}}"}
            $.json.code: {equals: "{{code}}"}
"#,
        &format!("http://{proxy}"),
    );
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    let sent = bodies(&recorded, "/anything/typed");
    assert_eq!(sent.len(), 2);
    for (it, body) in sent.iter().enumerate() {
        let it = it as i64;
        let want = json!({
            "qty": 3, "on": true, "ids": [1, 2], "first": 2, "text": "7", "label": "n=3", "sum": 4,
            "id": 1, "it": it, "who": 1, "name": format!("u{it}"), "fresh": it * 10,
            "uid": 5, "code": "42", "tags": ["a", 1], "none": null, "user": 5,
            "nested": {"deep": [{"uid": 5, "mixed": "u5-42", "spaced": " 5"}]},
            "obj": {"k": 3, "on": true},
        });
        assert_eq!(body, &want, "iteration {it}");
    }
    let checks: Vec<(u64, u64)> = report.checks.iter().map(|c| (c.passes, c.fails)).collect();
    assert_eq!(checks, [(2, 0), (2, 0)], "both checks passed in both iterations: {:?}", report.checks);
    target.stop();
}

#[test]
fn vars_of_a_vu_or_an_iteration_may_use_what_init_extracted() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let (proxy, recorded) = recording_proxy(target.addr());
    let report = run_yaml(
        r#"
name: after-init
load: {executor: constant-vus, vus: 2, iterations: 4}
vars:
  auth: {value: "Bearer {{token}}", scope: vu}
  order: {value: "{{ token + '-' + string(vu.iteration) }}", scope: iteration}
  user: {value: "{{ 'u' + string(vu.id) }}", scope: vu}
  tokenAgain: "{{token}}"
init:
  - name: login
    request: {method: POST, url: "{{baseUrl}}/post", json: {token: "t{{ vu.id }}", user: "{{user}}"}}
    extract: {token: {json: json.token}}
scenarios:
  - name: s
    steps:
      - name: order
        request:
          method: POST
          url: "{{baseUrl}}/anything/order"
          headers: {authorization: "{{auth}}"}
          json: {order: "{{order}}", again: "{{tokenAgain}}"}
"#,
        &format!("http://{proxy}"),
    );
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    let mut logins: Vec<String> =
        bodies(&recorded, "/post").iter().map(|b| b["user"].as_str().unwrap().to_string()).collect();
    logins.sort();
    assert_eq!(logins, ["u1", "u2"], "a var not using init is there for init");
    let orders: Vec<(String, String)> = authorizations(&recorded, "/anything/order")
        .into_iter()
        .zip(bodies(&recorded, "/anything/order"))
        .map(|(auth, body)| (auth, format!("{} {}", body["order"].as_str().unwrap(), body["again"].as_str().unwrap())))
        .collect();
    assert_eq!(orders.len(), 4);
    // Each VU's own token, its iterations numbered from 0.
    for vu in ["t1", "t2"] {
        let mine: Vec<&str> =
            orders.iter().filter(|(auth, _)| *auth == format!("Bearer {vu}")).map(|(_, o)| o.as_str()).collect();
        let want: Vec<String> = (0..mine.len()).map(|i| format!("{vu}-{i} {vu}")).collect();
        assert_eq!(mine, want, "{orders:?}");
    }
    target.stop();
}

#[test]
fn a_var_that_cannot_be_known_in_time_is_refused_naming_it() {
    let compile = |yaml: &str| {
        let path = std::path::Path::new("inline.yaml");
        let file = stampede_engine::parse_str(yaml, path).unwrap_or_else(|e| panic!("{e}"));
        let opts = stampede_engine::CompileOptions {
            base_url: Some("http://127.0.0.1:9".into()),
            ..stampede_engine::CompileOptions::default()
        };
        stampede_engine::compile(&file, &opts).map(|_| ()).unwrap_err()
    };
    let head = "name: x\nload: {executor: constant-vus, vus: 1, iterations: 1}\n";
    let init =
        "init:\n  - name: login\n    request: {url: \"{{baseUrl}}/get\"}\n    extract: {token: {status: true}}\n";
    let steps = "scenarios:\n  - name: s\n    steps:\n      - name: a\n        request: {url: \"{{baseUrl}}/get\"}\n";
    let problems = compile(&format!("{head}vars:\n  t: {{value: \"{{{{token}}}}\", scope: test}}\n{init}{steps}"));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].location, "vars.t");
    assert!(problems[0].message.contains("a `test` variable is computed once before any VU runs"), "{problems:?}");
    let problems = compile(&format!("{head}vars:\n  t: {{value: \"{{{{tokn}}}}\", scope: vu}}\n{init}{steps}"));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].location, "vars.t");
    assert!(problems[0].message.contains("unknown variable `tokn`"), "{problems:?}");
    // Init cannot use a var made of what it extracts.
    let init_uses = init.replace("/get\"}", "/get?a={{auth}}\"}");
    let problems =
        compile(&format!("{head}vars:\n  auth: {{value: \"{{{{token}}}}\", scope: vu}}\n{init_uses}{steps}"));
    let init_problem = problems.iter().find(|p| p.location == "init, step `login`: request.url");
    assert!(init_problem.is_some_and(|p| p.message.contains("unknown variable `auth`")), "{problems:?}");
    // An object is not a var's shape.
    let e = stampede_engine::parse_str(
        &format!("{head}vars:\n  o: {{a: 1}}\n{steps}"),
        std::path::Path::new("inline.yaml"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("a variable is a text, a number, true or false, a list, or {value, scope}"), "{e}");
}

#[test]
fn a_websocket_json_message_keeps_types_and_the_root_path_extracts_the_whole_answer() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let (proxy, recorded) = recording_proxy(target.addr());
    let report = run_yaml(
        r#"
name: ws-typed
load: {executor: constant-vus, vus: 1, iterations: 1}
vars: {qty: 3}
scenarios:
  - name: s
    steps:
      - name: echo
        ws:
          url: "{{baseUrl}}/ws/echo"
          actions:
            - sendJson: {id: "{{ vu.id }}", qty: "{{qty}}", items: ["{{ qty * 2 }}", "x{{qty}}"]}
            - receive: {json: {$.id: {exists: true}}}
        extract: {echoed: {json: "$"}}
      - name: forward
        request: {method: POST, url: "{{baseUrl}}/anything/forward", json: {got: "{{echoed}}", id: "{{ echoed.id }}"}}
"#,
        &format!("http://{proxy}"),
    );
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    let sent = bodies(&recorded, "/anything/forward");
    assert_eq!(sent, [json!({"got": {"id": 1, "qty": 3, "items": [6, "x3"]}, "id": 1})]);
    target.stop();
}

/// A group counts one transaction per pass in which one of its steps ran: a pass whose steps
/// were all skipped by their `if` (or a loop of no pass) records nothing.
#[test]
fn a_group_whose_steps_were_all_skipped_is_no_transaction() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let report = run_yaml(
        r#"
name: skipped
load: {executor: constant-vus, vus: 1, iterations: 6}
scenarios:
  - name: s
    steps:
      - group: every-third
        steps:
          - name: a
            if: vu.iteration % 3 == 0
            request: {url: "{{baseUrl}}/get"}
          - name: b
            if: vu.iteration % 3 == 0
            request: {url: "{{baseUrl}}/status/503"}
      - group: odd
        steps:
          - repeat: {count: "vu.iteration % 2"}
            steps:
              - name: c
                request: {url: "{{baseUrl}}/get"}
      - group: never
        steps:
          - name: d
            if: "false"
            request: {url: "{{baseUrl}}/get"}
      - name: always
        request: {url: "{{baseUrl}}/get"}
thresholds:
  - requests{group:every-third}.count == 2
  - requests{group:odd}.count == 3
"#,
        &target.base_url(),
    );
    let groups: Vec<(Option<&str>, u64, u64)> =
        report.groups.iter().map(|g| (g.step.as_deref(), g.requests, g.errors)).collect();
    assert_eq!(groups, [(Some("every-third"), 2, 2), (Some("odd"), 3, 0), (Some("never"), 0, 0)], "{groups:?}");
    let rows: Vec<(&str, u64)> = report.steps.iter().map(|s| (s.step.as_deref().unwrap(), s.requests)).collect();
    assert_eq!(rows, [("a", 2), ("b", 2), ("c", 3), ("d", 0), ("always", 6)]);
    assert!(report.thresholds.iter().all(|v| v.passed), "{:?}", report.thresholds);
    target.stop();
}
