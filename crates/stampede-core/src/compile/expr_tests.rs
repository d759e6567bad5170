//! The expression language's tests: generated values and their seeds, variables, errors and
//! where they are, constants.

use super::*;

fn compile(src: &str) -> Result<Expr, ExprError> {
    let consts = HashMap::from([("host".to_string(), "shop".to_string()), ("ids".to_string(), "[1,2]".to_string())]);
    let typed = HashMap::from([("ids".to_string(), serde_json::json!([1, 2]))]);
    let slots = HashMap::from([
        ("token".to_string(), 0),
        ("products".to_string(), 1),
        ("users.email".to_string(), 2),
        ("users.name".to_string(), 3),
    ]);
    let json_slots = std::collections::HashSet::from([1]);
    let weights = HashMap::new();
    let names = Names {
        consts: &consts,
        typed: &typed,
        slots: &slots,
        macros: &HashMap::new(),
        json_slots: &json_slots,
        weights: &weights,
    };
    Expr::compile(src, &names)
}

fn eval(src: &str, g: &mut Gen) -> String {
    let expr = compile(src).unwrap_or_else(|e| panic!("{src}: {e:?}"));
    let slots = ["abc".to_string(), "[1,2]".to_string(), "a@b.c".to_string(), "Ann".to_string()];
    g.lend(|| {
        let mut out = String::new();
        expr.render_into(&slots, &mut out).unwrap();
        out
    })
}

#[test]
fn generated_values_are_fresh_at_each_use_and_repeat_with_the_seed() {
    let mut a = Gen::new(42, 1, 0, 1);
    let ids: Vec<String> = (0..3).map(|_| eval("uuid()", &mut a)).collect();
    assert!(ids.iter().all(|u| u.len() == 36 && u.as_bytes()[14] == b'4'), "{ids:?}");
    assert!(ids[0] != ids[1] && ids[1] != ids[2], "{ids:?}");
    let mut again = Gen::new(42, 1, 0, 1);
    assert_eq!((0..3).map(|_| eval("uuid()", &mut again)).collect::<Vec<_>>(), ids, "same seed, same VU");
    let mut other = Gen::new(42, 2, 0, 1);
    assert_ne!(eval("uuid()", &mut other), ids[0], "another VU");
    let ints: BTreeSet<String> = (0..200).map(|_| eval("randomInt(1, 3)", &mut a)).collect();
    assert_eq!(ints, BTreeSet::from(["1".into(), "2".into(), "3".into()]));
    assert_eq!(eval("randomString(12)", &mut a).len(), 12);
    let unique: Vec<String> = (0..3).map(|_| eval("uniqueId()", &mut a)).collect();
    assert_eq!(unique, ["0-1-1", "0-1-2", "0-1-3"]);
}

#[test]
fn setup_teardown_and_every_vu_draw_their_own_values_and_never_repeat_a_unique_id() {
    let mut setup = Gen::outside_load(42, Stream::Setup, 0, 1);
    let mut first_vu = Gen::new(42, 1, 0, 1);
    assert_ne!(eval("uuid()", &mut setup), eval("uuid()", &mut first_vu), "setup is not VU 1");
    let mut ids = Vec::new();
    for runner in 0..3 {
        let mut gens = vec![
            Gen::outside_load(42, Stream::Setup, runner, 3),
            Gen::outside_load(42, Stream::Teardown, runner, 3),
            Gen::outside_load(42, Stream::Test, runner, 3),
        ];
        gens.extend((1..=4).map(|vu| Gen::new(42, vu, runner, 3)));
        for g in &mut gens {
            ids.extend((0..3).map(|_| eval("uniqueId()", g)));
        }
    }
    let distinct: BTreeSet<&String> = ids.iter().collect();
    // `test` values are one test-wide set (the same on every runner), the rest distinct.
    assert_eq!(distinct.len(), ids.len() - 2 * 3, "{ids:?}");
    assert!(ids.contains(&"0-setup-1".to_string()) && ids.contains(&"2-teardown-3".to_string()), "{ids:?}");
}

#[test]
fn expressions_read_variables_and_compute() {
    let mut g = Gen::new(1, 7, 2, 5);
    g.iteration = 4;
    // VU 7 of runner 2 of 5 is VU 33 of the test (runner 2 numbers its VUs 3, 8, 13…).
    assert_eq!(eval("vu.id * 1000 + vu.iteration", &mut g), "33004");
    g.test_iteration = 17;
    g.status = 404;
    assert_eq!(eval("[test.iteration, response.status]", &mut g), "[17,404]");
    assert_eq!(eval("runner.index + 1 == runner.count - 2", &mut g), "true");
    assert_eq!(eval("'Bearer ' + token", &mut g), "Bearer abc");
    assert_eq!(eval("host + '-' + string(size(token))", &mut g), "shop-3");
    assert_eq!(eval("users.name + ' <' + users.email + '>'", &mut g), "Ann <a@b.c>");
    // An extracted JSON list is a list.
    assert_eq!(eval("size(products) * 10 + products[1]", &mut g), "22");
    let item = eval("randomItem(products)", &mut g);
    assert!(item == "1" || item == "2", "{item}");
    assert_eq!(eval("base64('hi')", &mut g), "aGk=");
    assert_eq!(eval("urlEncode('a b&c')", &mut g), "a+b%26c");
    assert_eq!(eval("sha256('abc')", &mut g), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    assert_eq!(
        eval("hmacSha256('key', 'The quick brown fox jumps over the lazy dog')", &mut g),
        "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
    );
    assert_eq!(eval("jsonEncode({'a': [1, true, 'x']})", &mut g), r#"{"a":[1,true,"x"]}"#);
    assert_eq!(eval("[1, 2, 3].map(x, x * 2)", &mut g), "[2,4,6]");
    let pick = eval("randomItem(['red', 'green'])", &mut g);
    assert!(pick == "red" || pick == "green", "{pick}");
}

#[test]
fn a_bad_expression_says_what_and_where() {
    let cases = [
        ("uuidd()", 0, "unknown function `uuidd` — did you mean `uuid`?"),
        ("randomInt(1)", 0, "`randomInt` takes 2 argument(s), not 1"),
        ("1 + nosuch", 4, "unknown variable `nosuch`"),
        ("token.uuid()", 6, "`uuid` is a function, not a method"),
        ("randomInt(1, ", 13, "syntax error"),
        ("1 + $", 4, "syntax error"),
        ("x.exists(y, y > z)", 0, "unknown variable `x`"),
        ("vu.idd + 1", 0, "`vu` has no `idd` (it has vu.id, vu.iteration)"),
        ("${user}", 0, "syntax error"),
        ("users.mail + 'x'", 0, "`users` has no column `mail` (it has users.email, users.name)"),
    ];
    for (src, offset, want) in cases {
        let e = compile(src).expect_err(src);
        assert!(e.message.contains(want), "{src}: {}", e.message);
        assert_eq!(e.offset, offset, "{src}: {}", e.message);
    }
    // Names a macro binds are not variables to resolve.
    compile("[1, 2].exists(y, y > 1)").unwrap();
}

#[test]
fn only_expressions_without_generators_or_vu_values_are_constant() {
    assert!(compile("host + '/x'").unwrap().is_const());
    assert!(compile("sha256(host)").unwrap().is_const());
    assert!(!compile("uuid()").unwrap().is_const());
    assert!(!compile("vu.id").unwrap().is_const());
    assert!(!compile("token").unwrap().is_const());
}
