//! Hostile scenario files: every size, depth and count a file controls has a budget, refused
//! when the file compiles with the field, its line and the budget's name, before any of it is
//! built; and what only a run can know (a computed count, a list from an answer) is refused or
//! taken lazily at run time. Loops whose steps are all skipped still yield, so a run stops at
//! its duration.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use stampede_engine::{CompileOptions, RunOptions, ScenarioError};
use stampede_target::TargetServer;

/// Validates `yaml` as a file on disk (so problems carry their lines): the problems, as
/// `location: message` with their line.
fn problems(yaml: &str) -> Vec<(String, Option<usize>)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hostile.yaml");
    std::fs::write(&path, yaml).unwrap();
    let file = stampede_engine::parse_str(yaml, &path).unwrap_or_else(|e| panic!("{e}"));
    let opts = CompileOptions { base_url: Some("http://127.0.0.1:9".into()), ..CompileOptions::default() };
    match stampede_engine::validate(&file, &path, &opts) {
        Ok(_) => Vec::new(),
        Err(ScenarioError::Invalid { problems, .. }) => problems
            .into_iter()
            .map(|p| (format!("{}: {}", p.location, p.message), p.position.map(|(l, _)| l)))
            .collect(),
        Err(e) => panic!("{e}"),
    }
}

fn one_problem(yaml: &str) -> (String, Option<usize>) {
    let mut found = problems(yaml);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.remove(0)
}

/// Ten variables, each repeating the one before ten times (743 bytes that once grew to 6 GB):
/// refused at the first variable whose text would pass the budget, before it is built. And a
/// constant within its template's budget used in many places: refused by the file's.
#[test]
fn variables_that_grow_exponentially_are_refused_at_the_first_one_over_the_budget() {
    let mut yaml =
        String::from("name: bomb\nload: {executor: constant-vus, vus: 1, iterations: 1}\nvars:\n  a: \"abcdefg\"\n");
    let names: Vec<char> = ('a'..='j').collect();
    for w in names.windows(2) {
        yaml.push_str(&format!("  {}: \"{}\"\n", w[1], format!("{{{{{}}}}}", w[0]).repeat(10)));
    }
    yaml.push_str(
        "scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {url: \"{{baseUrl}}/get?x={{j}}\"}\n",
    );
    let found = problems(&yaml);
    // 7 × 10⁷ bytes at `h` passes 16 MiB; the later ones are refused for it.
    let (first, line) = &found[0];
    assert!(first.starts_with("vars.h: "), "{found:#?}");
    assert!(first.contains("over the `template.bytes` budget of 16 MiB"), "{first}");
    assert_eq!(*line, Some(11), "the line of `h`");

    let mut yaml =
        String::from("name: many\nload: {executor: constant-vus, vus: 1, iterations: 1}\nvars:\n  a: \"abcdefgh\"\n");
    for w in ['a', 'b', 'c', 'd', 'e', 'f', 'g'].windows(2) {
        yaml.push_str(&format!("  {}: \"{}\"\n", w[1], format!("{{{{{}}}}}", w[0]).repeat(10)));
    }
    yaml.push_str("scenarios:\n  - name: s\n    steps:\n");
    for i in 0..12 {
        yaml.push_str(&format!(
            "      - name: get{i}\n        request: {{url: \"{{{{baseUrl}}}}/get?x={{{{g}}}}\"}}\n"
        ));
    }
    let found = problems(&yaml);
    // `g` is 8 MB; the file's templates pass 64 MiB at the eighth step.
    assert!(found.iter().all(|(p, _)| p.contains("`file.bytes` budget of 64 MiB")), "{found:#?}");
    assert!(found[0].0.starts_with("scenario `s`, step `get7`"), "{found:#?}");
}

/// The same graph of variables drawn anew (each holds `uuid()`, so nothing folds): used in
/// place, refused by the holes the template would hold; kept per iteration, by the copies it
/// would render. Both before any run.
#[test]
fn generated_variables_that_grow_exponentially_are_refused_by_their_holes_or_expansion() {
    for (scope, budget, at) in [("use", "`template.holes` budget of 10,000", "vars.f: "), ("iteration", "", "vars.f: ")]
    {
        let mut yaml = format!(
            "name: bomb\nload: {{executor: constant-vus, vus: 1, iterations: 1}}\nvars:\n  a: {{value: \"{{{{ uuid() }}}}\", scope: {scope}}}\n"
        );
        let names: Vec<char> = ('a'..='j').collect();
        for w in names.windows(2) {
            let value = format!("{{{{{}}}}}", w[0]).repeat(10);
            yaml.push_str(&format!("  {}: {{value: \"{value}\", scope: {scope}}}\n", w[1]));
        }
        yaml.push_str("scenarios:\n  - name: s\n    steps:\n      - name: get\n        request: {url: \"{{baseUrl}}/get?x={{j}}\"}\n");
        let found = problems(&yaml);
        // `e` holds 10⁴ copies of `a` (at the budget), `f` 10⁵.
        let (first, line) = &found[0];
        assert!(first.starts_with(at), "{found:#?}");
        let budget = if budget.is_empty() { "it expands to 100000 copies of other values" } else { budget };
        assert!(first.contains(budget), "{first}");
        assert_eq!(*line, Some(9), "the line of `f`");
    }
}

fn expression_step(expr: &str) -> String {
    format!(
        "name: long\nload: {{executor: constant-vus, vus: 1, iterations: 1}}\nscenarios:\n  - name: s\n    steps:\n      \
         - name: get\n        request: {{url: \"{{{{baseUrl}}}}/anything/{{{{ {expr} }}}}\"}}\n"
    )
}

/// A left-deep expression of 2,000 and of 5,000 terms (which once validated and then overflowed
/// a worker's stack, or overflowed the compile's own): refused when it compiles.
#[test]
fn expressions_too_long_or_too_deep_are_refused_naming_their_budget() {
    let two_thousand = format!("1{}", "+1".repeat(1999));
    let (message, line) = one_problem(&expression_step(&two_thousand));
    assert!(message.contains("over the `expression.operators` budget of 100"), "{message}");
    assert_eq!(line, Some(7));
    let five_thousand = format!("1{}", " + 1".repeat(4999));
    let (message, _) = one_problem(&expression_step(&five_thousand));
    assert!(message.contains("an expression of 19997 bytes: over the `expression.bytes` budget of 4,096"), "{message}");
    // 99 brackets, within the operators' budget: CEL's parser refuses past 96.
    let nested = format!("{}1{}", "(".repeat(99), ")".repeat(99));
    let (message, _) = one_problem(&expression_step(&nested));
    assert!(message.contains("Recursion limit"), "{message}");
}

/// An expression at the budget, a left-deep chain and brackets nested 90 deep, compiles and
/// evaluates on a worker's stack to what it says.
#[test]
fn an_expression_at_its_budget_runs_on_a_worker_and_gives_its_value() {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let record = seen.clone();
    let addr = crate::common::raw_http_server(move |p| record.lock().unwrap().push(p.to_string()));
    // Reading `vu.id`, they are evaluated at each use, on the worker (a constant would be
    // folded when the file compiles). `.`, `*` and 98 `+`: 100 operators.
    let sum = format!("vu.id * 0{}", " + 1".repeat(98));
    let nested = format!("{}vu.id * 7{}", "(".repeat(90), ")".repeat(90));
    let yaml = format!(
        "name: deep\nload: {{executor: constant-vus, vus: 1, iterations: 2}}\nscenarios:\n  - name: s\n    steps:\n      \
         - name: get\n        request: {{url: \"{{{{baseUrl}}}}/n/{{{{ {sum} }}}}/{{{{ {nested} }}}}\"}}\n"
    );
    let path = Path::new("deep.yaml");
    let file = stampede_engine::parse_str(&yaml, path).unwrap();
    let opts = CompileOptions { base_url: Some(format!("http://{addr}")), ..CompileOptions::default() };
    let prepared = stampede_engine::prepare(&file, path, opts).unwrap_or_else(|e| panic!("{e}"));
    let report =
        stampede_engine::execute(prepared, &RunOptions { threads: 1, ..RunOptions::default() }, &mut |_| {}).unwrap();
    assert_eq!((report.total.requests, report.total.errors), (2, 0), "{:?}", report.error_samples);
    assert_eq!(*seen.lock().unwrap(), ["/n/98/7", "/n/98/7"]);
}

/// `max` and a fixed `count` over the loop budget, and blocks nested past their depth.
#[test]
fn loops_over_their_budget_and_blocks_nested_too_deep_are_refused() {
    let looped = |repeat: &str| {
        format!(
            "name: loops\nload: {{executor: constant-vus, vus: 1, iterations: 1}}\nscenarios:\n  - name: s\n    steps:\n      \
             - repeat: {repeat}\n        steps:\n          - name: get\n            request: {{url: \"{{{{baseUrl}}}}/get\"}}\n"
        )
    };
    let (message, line) = one_problem(&looped("{while: \"true\", max: 4000000000}"));
    assert!(message.contains("`max: 4000000000`: over the `loop.passes` budget of 1,000,000"), "{message}");
    assert_eq!(line, Some(6));
    let (message, _) = one_problem(&looped("{count: 1000001}"));
    assert!(message.contains("`count: 1000001`: over the `loop.passes` budget"), "{message}");
    assert_eq!(problems(&looped("{count: 1000000}")), Vec::new(), "at the budget");
    assert_eq!(problems(&looped("{count: 4000000000, max: 3}")), Vec::new(), "a smaller max bounds it");

    let mut nested = String::from(
        "name: nested\nload: {executor: constant-vus, vus: 1, iterations: 1}\nscenarios:\n  - name: s\n    steps:\n",
    );
    for depth in 0..33 {
        let pad = "  ".repeat(3 + 2 * depth);
        nested.push_str(&format!("{pad}- if: \"true\"\n{pad}  steps:\n"));
    }
    let pad = "  ".repeat(3 + 2 * 33);
    nested.push_str(&format!("{pad}- name: get\n{pad}  request: {{url: \"{{{{baseUrl}}}}/get\"}}\n"));
    let found = problems(&nested);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].0.contains("a block inside 32 others: over the `block.depth` budget of 32"), "{found:#?}");
}

/// A `forEach` with `max: 3` over a list of a million and one elements (from an answer) runs
/// three passes and writes out only those; without `max` the same list is refused at run time
/// with the budget, as a counted failure of the block's step.
#[test]
fn a_for_each_takes_its_list_lazily_and_refuses_one_past_the_budget() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let list = format!("[{}0]", "0,".repeat(1_000_000));
    let run = |max: &str| {
        let yaml = format!(
            "name: lazy\nload: {{executor: constant-vus, vus: 1, iterations: 1}}\nscenarios:\n  - name: s\n    steps:\n      \
             - name: list\n        request: {{method: POST, url: \"{{{{baseUrl}}}}/post\", json: {list}}}\n        \
             extract: {{items: {{json: \"$.json\"}}}}\n      \
             - repeat: {{forEach: items{max}}}\n        steps:\n          \
             - name: each\n            request: {{url: \"{{{{baseUrl}}}}/get?i={{{{item}}}}\"}}\n"
        );
        let path = Path::new("lazy.yaml");
        let file = stampede_engine::parse_str(&yaml, path).unwrap();
        let opts = CompileOptions { base_url: Some(target.base_url()), ..CompileOptions::default() };
        let prepared = stampede_engine::prepare(&file, path, opts).unwrap_or_else(|e| panic!("{e}"));
        stampede_engine::execute(prepared, &RunOptions { threads: 1, ..RunOptions::default() }, &mut |_| {}).unwrap()
    };
    let row = |r: &stampede_engine::Report, name: &str| {
        let s = r.steps.iter().find(|s| s.step.as_deref() == Some(name)).unwrap();
        (s.requests, s.errors)
    };
    let limited = run(", max: 3");
    assert_eq!(row(&limited, "each"), (3, 0));
    let unlimited = run("");
    assert_eq!(row(&unlimited, "each"), (1, 1), "one counted failure, nothing sent");
    let message = &unlimited.error_samples.iter().find(|e| e.step == "each").unwrap().message;
    assert!(message.contains("a list of 1000001 elements: over the `loop.passes` budget"), "{message}");
    target.stop();
}

/// `repeat: {while: "true"}` around a step whose `if` never holds awaits nothing: each pass
/// yields, so the run ends at its duration (its graceful stop) by itself, with its report.
#[test]
fn a_loop_whose_steps_are_all_skipped_still_lets_the_run_end_at_its_duration() {
    let target = TargetServer::start(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1).unwrap();
    let yaml = "name: spin\nload: {executor: constant-vus, vus: 2, duration: 1s, gracefulStop: 1s}\nscenarios:\n  - name: s\n    \
                steps:\n      - name: first\n        request: {url: \"{{baseUrl}}/get\"}\n      \
                - repeat: {while: \"true\", max: 1000000}\n        steps:\n          \
                - name: never\n            if: \"false\"\n            request: {url: \"{{baseUrl}}/get\"}\n";
    let path = Path::new("spin.yaml");
    let file = stampede_engine::parse_str(yaml, path).unwrap();
    let opts = CompileOptions { base_url: Some(target.base_url()), ..CompileOptions::default() };
    let prepared = stampede_engine::prepare(&file, path, opts).unwrap_or_else(|e| panic!("{e}"));
    // Bounded by a watchdog rather than hoping: a run that never ends fails the test.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let report =
            stampede_engine::execute(prepared, &RunOptions { threads: 1, ..RunOptions::default() }, &mut |_| {});
        let _ = tx.send(report);
    });
    let report = rx.recv_timeout(Duration::from_secs(120)).expect("the run ended by itself").unwrap();
    target.stop();
    let first = report.steps.iter().find(|s| s.step.as_deref() == Some("first")).unwrap();
    assert!(first.requests >= 2, "each VU started an iteration: {}", first.requests);
    assert_eq!(report.steps.iter().find(|s| s.step.as_deref() == Some("never")).map(|s| s.requests), Some(0));
}

/// YAML aliases that expand to 9¹⁰ strings (a "billion laughs" in a JSON body): refused while
/// parsing, by the YAML reader's own repetition limit, naming where.
#[test]
fn yaml_aliases_that_expand_exponentially_are_refused_while_parsing() {
    let mut yaml = String::from(
        "name: lol\nload: {executor: constant-vus, vus: 1, iterations: 1}\nscenarios:\n  - name: s\n    steps:\n      \
         - name: g\n        request:\n          url: \"{{baseUrl}}/get\"\n          json:\n            \
         a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for i in 1..10 {
        yaml.push_str(&format!("            a{i}: &a{i} [{}]\n", vec![format!("*a{}", i - 1); 9].join(",")));
    }
    let err = stampede_engine::parse_str(&yaml, Path::new("lol.yaml")).unwrap_err().to_string();
    assert!(err.contains("repetition limit exceeded") && err.contains("request.json"), "{err}");
}
