//! #23: flow control — `if`, `repeat` (count, forEach, while) and `group` — checked at the
//! server, and the shop example against the built-in target's shop. Every run is bounded by
//! its iteration count.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;

use stampede_engine::{CompileOptions, Report, RunOptions};
use stampede_target::TargetServer;

use crate::flow::{examples, recording_proxy, requests, run_yaml};

/// The paths the server got, in order, over all connections.
fn paths(recorded: &crate::flow::Recorded) -> Vec<String> {
    let mut out = Vec::new();
    for conn in recorded.lock().unwrap().iter() {
        out.extend(requests(&conn.lock().unwrap()).into_iter().map(|r| r.target));
    }
    out
}

fn count(paths: &[String], prefix: &str) -> usize {
    paths.iter().filter(|p| p.starts_with(prefix)).count()
}

/// Each block kind runs its steps exactly as often as it says; a step in a loop is one
/// report row however often it runs; a group's transactions are counted once per run of the
/// block, failed when one of its steps failed.
#[test]
fn conditions_and_loops_run_their_steps_exactly_as_often_as_they_say() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let (proxy, recorded) = recording_proxy(target.addr());
    let report = run_yaml(
        r#"
name: blocks
seed: 7
load: {executor: constant-vus, vus: 1, iterations: 6}
scenarios:
  - name: s
    steps:
      - name: first
        request: {url: "{{baseUrl}}/get?it={{ vu.iteration }}"}
        extract: {ids: {json: "args.it", all: true}}
      - repeat: {count: 3}
        steps:
          - name: counted
            request: {url: "{{baseUrl}}/anything/count?i={{index}}"}
      - repeat: {forEach: "['a', 'b', 'c', 'd']", max: 3, as: ids}
        steps:
          - name: each
            request: {url: "{{baseUrl}}/anything/each?l={{ids}}"}
      - repeat: {while: "index < 2 || response.status == 500", max: 4}
        steps:
          - name: looped
            request: {url: "{{baseUrl}}/anything/while?i={{index}}"}
      - repeat: {while: "true", max: 2}
        steps:
          - name: bounded
            request: {url: "{{baseUrl}}/anything/bounded"}
      - name: even
        if: vu.iteration % 2 == 0
        request: {url: "{{baseUrl}}/anything/even?it={{ vu.iteration }}"}
      - if: "{{ response.status == 200 && size(ids) == 1 }}"
        steps:
          - name: answered
            request: {url: "{{baseUrl}}/anything/answered"}
      - group: tx
        steps:
          - name: ok
            request: {url: "{{baseUrl}}/anything/tx"}
          - name: broken
            if: vu.iteration < 2
            request: {url: "{{baseUrl}}/status/503"}
      - repeat: {count: "randomInt(0, 2)", as: k}
        steps:
          - name: random
            request: {url: "{{baseUrl}}/anything/random?k={{k}}"}
      - name: after loops
        request: {url: "{{baseUrl}}/anything/after?first={{ ids[0] }}"}
thresholds:
  - requests{group:tx}.count == 6
  - errors{group:tx}.count == 2
"#,
        &format!("http://{proxy}"),
    );
    let seen = paths(&recorded);
    assert_eq!(count(&seen, "/get?it="), 6);
    let counted: Vec<&String> = seen.iter().filter(|p| p.starts_with("/anything/count")).collect();
    assert_eq!(counted.len(), 18, "3 per iteration");
    assert_eq!(counted[..3], ["/anything/count?i=0", "/anything/count?i=1", "/anything/count?i=2"]);
    let each: Vec<&String> = seen.iter().filter(|p| p.starts_with("/anything/each")).collect();
    assert_eq!(each.len(), 18, "forEach capped by max 3");
    assert_eq!(each[..3], ["/anything/each?l=a", "/anything/each?l=b", "/anything/each?l=c"]);
    assert_eq!(count(&seen, "/anything/while"), 12, "while index < 2");
    assert_eq!(count(&seen, "/anything/bounded"), 12, "a `while: true` stops at its max");
    let even: Vec<&String> = seen.iter().filter(|p| p.starts_with("/anything/even")).collect();
    assert_eq!(even, ["/anything/even?it=0", "/anything/even?it=2", "/anything/even?it=4"]);
    assert_eq!(count(&seen, "/anything/answered"), 6, "the last answer was a 200 and ids a one-item list");
    assert_eq!(count(&seen, "/status/503"), 2);
    let random = count(&seen, "/anything/random");
    assert!(random <= 12, "randomInt(0, 2) per iteration: {random}");

    // One row per step, whatever the loops; the rows count what the server saw.
    let rows: BTreeMap<&str, u64> = report.steps.iter().map(|s| (s.step.as_deref().unwrap(), s.requests)).collect();
    assert_eq!(rows.len(), 11, "{rows:?}");
    // A loop's variable lives in its block: `ids` after the loops is still the extracted list.
    let after: Vec<&String> = seen.iter().filter(|p| p.starts_with("/anything/after")).collect();
    assert_eq!(after.len(), 6);
    assert_eq!(after[..2], ["/anything/after?first=0", "/anything/after?first=1"]);
    assert_eq!((rows["counted"], rows["each"], rows["looped"], rows["random"]), (18, 18, 12, random as u64));
    assert_eq!(report.groups.len(), 1);
    let tx = &report.groups[0];
    assert_eq!((tx.step.as_deref(), tx.requests, tx.errors), (Some("tx"), 6, 2), "{tx:?}");
    assert_eq!(tx.errors_by_kind.get("check"), Some(&2));
    assert!(tx.latency_ms.max >= step_max(&report, "ok"), "a transaction lasts at least as long as its step");
    assert!(report.thresholds.iter().all(|v| v.passed), "{:?}", report.thresholds);

    // The same seed draws the same random counts.
    let seeded = |seed| rows_of(&run_yaml(&random_only(seed), &target.base_url()), "random");
    let first = seeded(7);
    assert!((20..=60).contains(&first), "randomInt(1, 3) for 20 iterations: {first}");
    assert_eq!(seeded(7), first);
    target.stop();
}

fn random_only(seed: u64) -> String {
    format!(
        "name: r\nseed: {seed}\nload: {{executor: constant-vus, vus: 1, iterations: 20}}\nscenarios:\n  - name: s\n    \
         steps:\n      - repeat: {{count: \"randomInt(1, 3)\"}}\n        steps:\n          - name: random\n            \
         request: {{url: \"{{{{baseUrl}}}}/get\"}}\n"
    )
}

fn rows_of(report: &Report, name: &str) -> u64 {
    report.steps.iter().find(|s| s.step.as_deref() == Some(name)).map_or(0, |s| s.requests)
}

fn step_max(report: &Report, name: &str) -> f64 {
    report.steps.iter().find(|s| s.step.as_deref() == Some(name)).unwrap().latency_ms.max
}

/// Runs examples/shop.yaml (its text changed by `edit`) for `iterations` per VU against `target`.
fn run_shop(target: &TargetServer, vus: u32, iterations: u64, edit: impl Fn(String) -> String) -> Report {
    let path = examples().join("shop.yaml");
    let text = edit(std::fs::read_to_string(&path).unwrap()).replace(
        "load: {executor: constant-vus, vus: 10, duration: 10s}",
        &format!("load: {{executor: constant-vus, vus: {vus}, iterations: {}}}", iterations * u64::from(vus)),
    );
    let file = stampede_engine::parse_str(&text, &path).unwrap_or_else(|e| panic!("{e}"));
    let opts = CompileOptions { base_url: Some(target.base_url()), base_dir: Some(examples()), ..Default::default() };
    let prepared = stampede_engine::prepare(&file, &path, opts).unwrap_or_else(|e| panic!("{e}"));
    stampede_engine::execute(prepared, &RunOptions { threads: 2, ..RunOptions::default() }, &mut |_| {}).unwrap()
}

/// The acceptance of #23 on one machine: the shop example runs clean; the shop saw one login
/// per VU, no duplicate order id (also on a second run against the same shop), carts of 1, 2
/// and 3 items, and never a checkout of an empty cart.
#[test]
fn the_shop_example_logs_in_once_per_vu_and_never_repeats_an_order_id() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 2).unwrap();
    let report = run_shop(&target, 6, 20, |t| t);
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    let shop = target.stats().shop().counts();
    assert_eq!((shop.logins, shop.users), (6, 6), "one login per VU, each its own user (vu.id)");
    assert_eq!((shop.setups, shop.teardowns), (1, 1), "setup and teardown once for the test");
    assert_eq!((shop.orders, shop.duplicate_order_ids, shop.unauthorized, shop.empty_checkouts), (120, 0, 0, 0));
    assert_eq!(shop.checkouts_by_items.keys().copied().collect::<Vec<_>>(), [1, 2, 3], "{shop:?}");
    assert_eq!(shop.checkouts_by_items.values().sum::<u64>(), 120);
    assert_eq!(shop.cart_adds, rows_of(&report, "add to cart"));
    let group = &report.groups[0];
    assert_eq!((group.step.as_deref(), group.requests, group.errors), (Some("checkout"), 120, 0));

    let again = run_shop(&target, 6, 20, |t| t);
    assert_eq!(again.total.errors, 0, "{:?}", again.error_samples);
    let shop = target.stats().shop().counts();
    assert_eq!((shop.logins, shop.orders, shop.duplicate_order_ids), (12, 240, 0), "a second run: fresh order ids");
    assert_eq!((shop.setups, shop.teardowns), (2, 2));
    target.stop();
}

/// A failed cart step (`onError: next-iteration`) ends the iteration: no checkout follows it.
/// One product in eleven is unknown to the shop (404).
#[test]
fn a_failed_cart_step_ends_the_iteration_before_its_checkout() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 2).unwrap();
    let report = run_shop(&target, 4, 30, |t| {
        t.replace("randomItem(productIds)", "randomItem(productIds + [99])")
            .replace("json: {items: {equals: \"{{ line + 1 }}\"}}", "json: {}")
    });
    let failed_adds = report.steps.iter().find(|s| s.step.as_deref() == Some("add to cart")).unwrap().errors;
    assert!(failed_adds > 0, "some adds hit the unknown product");
    let checkouts = rows_of(&report, "checkout");
    assert_eq!(checkouts + failed_adds, 120, "each iteration either checked out or stopped at its failed add");
    assert_eq!(rows_of(&report, "order"), checkouts, "nor read an order back");
    let group = &report.groups[0];
    assert_eq!((group.requests, group.errors), (120, failed_adds), "every transaction counted, the cut ones failed");
    target.stop();
}

/// `setup` runs once before the load and what it extracts reaches every VU as `setup.NAME`;
/// `teardown` runs once after it, also when the run is aborted; a failed setup stops the test
/// before any load (and runs no teardown).
#[test]
fn setup_and_teardown_run_once_around_the_load_and_a_failed_setup_sends_no_load() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let base = target.base_url();
    let file = |setup_status: u16, on_error: &str| {
        format!(
            r#"
name: once
load: {{executor: constant-vus, vus: 3, iterations: 30}}
setup:
  - name: coupon
    request: {{method: POST, url: "{{{{baseUrl}}}}/shop/admin/setup"}}
    extract: {{code: {{json: couponCode}}}}
  - name: probe
    request: {{url: "{{{{baseUrl}}}}/status/{setup_status}?code={{{{code}}}}"}}
teardown:
  - name: cleanup
    request: {{method: POST, url: "{{{{baseUrl}}}}/shop/admin/teardown?code={{{{setup.code}}}}"}}
scenarios:
  - name: s
    steps:
      - name: use
        request: {{url: "{{{{baseUrl}}}}/get?code={{{{setup.code}}}}&vu={{{{ vu.id }}}}"}}
        check: {{json: {{args.code: {{equals: "{{{{setup.code}}}}"}}}}}}
        onError: {on_error}
"#
        )
    };
    let report = run_yaml(&file(200, "continue"), &base);
    assert_eq!(report.total.errors, 0, "{:?}", report.error_samples);
    let rows: BTreeMap<(String, String), u64> =
        report.steps.iter().map(|s| ((s.scenario.clone().unwrap(), s.step.clone().unwrap()), s.requests)).collect();
    let row = |sc: &str, st: &str| rows[&(sc.to_string(), st.to_string())];
    assert_eq!(
        (row("setup", "coupon"), row("setup", "probe"), row("s", "use"), row("teardown", "cleanup")),
        (1, 1, 30, 1)
    );
    let shop = target.stats().shop().counts();
    assert_eq!((shop.setups, shop.teardowns), (1, 1));

    // An aborted run still tears down.
    let before = target.stats().requests();
    let aborted = run_yaml(&file(200, "abort-run").replace("/get?code=", "/status/500?code="), &base);
    assert!(aborted.run.aborted.is_some(), "aborted");
    assert_eq!(target.stats().shop().counts().teardowns, 2, "teardown after the abort");
    assert!(target.stats().requests() > before + 2);

    // A failed setup step: an error naming it, no load, no teardown.
    let before = target.stats().requests();
    let path = Path::new("inline.yaml");
    let parsed = stampede_engine::parse_str(&file(503, "continue"), path).unwrap();
    let opts = CompileOptions { base_url: Some(base.clone()), ..CompileOptions::default() };
    let prepared = stampede_engine::prepare(&parsed, path, opts).unwrap();
    let err = stampede_engine::execute(prepared, &RunOptions { threads: 1, ..RunOptions::default() }, &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, stampede_engine::RunError::Setup(_)), "{err}");
    assert!(err.to_string().contains("step `probe`"), "{err}");
    assert_eq!(target.stats().requests(), before + 2, "only the two setup requests reached the target");
    assert_eq!(target.stats().shop().counts().teardowns, 2, "no teardown after a failed setup");
    target.stop();
}

/// `test.iteration` numbers the iterations of the whole test: over VUs on two worker threads,
/// each number once, none missing (on one machine: 0 to n - 1); `vu.id` runs 1 to the VU count.
#[test]
fn test_iteration_numbers_every_iteration_once_and_vu_ids_are_distinct() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let (proxy, recorded) = recording_proxy(target.addr());
    let path = Path::new("inline.yaml");
    let yaml = r#"
name: numbered
load: {executor: constant-vus, vus: 4, iterations: 40}
scenarios:
  - name: s
    steps:
      - name: n
        request: {url: "{{baseUrl}}/anything/n?i={{ test.iteration }}&vu={{ vu.id }}"}
"#;
    let file = stampede_engine::parse_str(yaml, path).unwrap();
    let opts = CompileOptions { base_url: Some(format!("http://{proxy}")), ..CompileOptions::default() };
    let prepared = stampede_engine::prepare(&file, path, opts).unwrap();
    let report =
        stampede_engine::execute(prepared, &RunOptions { threads: 2, ..RunOptions::default() }, &mut |_| {}).unwrap();
    target.stop();
    assert_eq!(report.total.errors, 0);
    let seen = paths(&recorded);
    let mut numbers: Vec<u64> = Vec::new();
    let mut vus = std::collections::BTreeSet::new();
    for p in &seen {
        let (i, vu) = p.trim_start_matches("/anything/n?i=").split_once("&vu=").unwrap();
        numbers.push(i.parse().unwrap());
        vus.insert(vu.parse::<u32>().unwrap());
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (0..40).collect::<Vec<u64>>());
    assert_eq!(vus, (1..=4).collect());
}

/// An expression of a block or condition that fails while running (a `forEach` over what is not
/// a list, an `if` that gives no boolean) is a failure of the step it guards, counted and sampled
/// with the reason; the block does not run, and the iteration goes on (its `onError`).
#[test]
fn a_condition_or_loop_that_fails_while_running_is_a_counted_failure_with_its_reason() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let report = run_yaml(
        r#"
name: failing-blocks
load: {executor: constant-vus, vus: 1, iterations: 3}
vars:
  word: hello
scenarios:
  - name: s
    steps:
      - repeat: {forEach: word}
        steps:
          - name: looped
            request: {url: "{{baseUrl}}/get?l={{item}}"}
      - name: guarded
        if: size(word)
        request: {url: "{{baseUrl}}/get"}
      - name: after
        request: {url: "{{baseUrl}}/get"}
"#,
        &target.base_url(),
    );
    let stats = target.stats();
    target.stop();
    let row = |name: &str| report.steps.iter().find(|s| s.step.as_deref() == Some(name)).unwrap();
    assert_eq!((row("looped").requests, row("looped").errors), (3, 3), "counted, never sent");
    assert_eq!((row("guarded").requests, row("guarded").errors), (3, 3));
    assert_eq!((row("after").requests, row("after").errors), (3, 0), "the iteration went on");
    assert_eq!(stats.requests(), 3, "only `after` reached the server");
    let message = |step: &str| {
        report.error_samples.iter().find(|e| e.step == step).map(|e| e.message.clone()).unwrap_or_default()
    };
    assert!(
        message("looped").contains("`repeat.forEach` failed") && message("looped").contains("not a list"),
        "{}",
        message("looped")
    );
    assert!(
        message("guarded").contains("its `if` failed") && message("guarded").contains("not true or false"),
        "{}",
        message("guarded")
    );
}
