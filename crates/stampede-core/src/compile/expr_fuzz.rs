//! Fuzzing the expression language: token soups from CEL's alphabet and this module's names,
//! expressions built at random from its grammar, expressions right around the budgets
//! ([`budget::EXPRESSION_OPERATORS`], [`budget::EXPRESSION_BYTES`], CEL's bracket depth), and
//! mutated copies of all of these. Compiling may refuse an expression; whatever compiles is
//! evaluated. Neither may panic, overflow its stack or hang. They run on the stacks the engine
//! gives them: compiling on one of [`budget::COMPILE_STACK`], evaluating on a worker's
//! ([`budget::WORKER_STACK`]). The runner is the workspace's (`crate::fuzz_support`).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::budget;
use super::expr::{CEL_FUNCTIONS, CEL_MACROS, Expr, FUNCTIONS, Gen, Names, Render};
use crate::fuzz_support::{self as support, Rng};

#[derive(Debug)]
struct Fixed;

impl Render for Fixed {
    fn render_text(&self, _: &[String]) -> String {
        "in-place".into()
    }
    fn expansion(&self) -> u64 {
        1
    }
}

/// Names, literals, operators and brackets of the language, valid and not.
const ATOMS: &[&str] = &[
    "vu",
    "vu.id",
    "vu.iteration",
    "vu.idd",
    "runner",
    "runner.index",
    "runner.count",
    "test.iteration",
    "response.status",
    "host",
    "token",
    "products",
    "users",
    "users.email",
    "users.name",
    "users.mail",
    "m",
    "x",
    "y",
    "nosuch",
    "0",
    "1",
    "-1",
    "2",
    "1.5",
    "-0.0",
    "1u",
    "0x10",
    "99999999999999999999",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615u",
    "1e308",
    "1e309",
    "'a'",
    "\"b\"",
    "''",
    "'\\\\'",
    "'it\\'s'",
    "b'x'",
    "r'raw'",
    "'''tri'''",
    "'\\u00e9'",
    "'\\x00'",
    "'{{'",
    "'[1,2]'",
    "true",
    "false",
    "null",
    "+",
    "-",
    "*",
    "/",
    "%",
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "&&",
    "||",
    "!",
    "?",
    ":",
    ",",
    ".",
    " in ",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ".map(x, x)",
    ".map(x, x * 2)",
    ".filter(x, x > 1)",
    ".all(x, x)",
    ".exists(x, true)",
    ".exists_one(x, x == 1)",
    ".size()",
    "has(",
    ".contains('a')",
    ".startsWith(",
    ".endsWith(",
    "'",
    "\"",
    "\\",
    "$",
    "@",
    "#",
    "\n",
    " ",
    "\u{0}",
    "\u{feff}",
    "é",
];

fn function(rng: &mut Rng) -> &'static str {
    match rng.below(3) {
        0 => rng.pick(&FUNCTIONS).0,
        1 => rng.pick(&CEL_FUNCTIONS).0,
        _ => rng.word(&CEL_MACROS),
    }
}

/// Tokens of the language in any order.
fn soup(rng: &mut Rng) -> String {
    let mut out = String::new();
    while out.len() < rng.size(9) {
        if rng.one_in(5) {
            out.push_str(function(rng));
            out.push('(');
        } else {
            out.push_str(rng.word(ATOMS));
        }
        if rng.one_in(2) {
            out.push(' ');
        }
    }
    out
}

/// A well-formed expression of `depth` levels at most (its names and types may be wrong).
fn grammar(rng: &mut Rng, depth: usize) -> String {
    let leaf = |rng: &mut Rng| rng.pick(&ATOMS[..48]).to_string();
    if depth == 0 {
        return leaf(rng);
    }
    match rng.below(10) {
        0 | 1 => format!(
            "{} {} {}",
            grammar(rng, depth - 1),
            rng.pick(&["+", "-", "*", "/", "%", "==", "<", "&&", "||", " in "]),
            grammar(rng, depth - 1)
        ),
        2 => format!("{}{}", rng.pick(&["-", "!", "--", "!!"]), grammar(rng, depth - 1)),
        3 => {
            let f = function(rng);
            let args: Vec<String> = (0..rng.below(4)).map(|_| grammar(rng, depth - 1)).collect();
            format!("{f}({})", args.join(", "))
        }
        4 => format!("[{}]", (0..rng.below(4)).map(|_| grammar(rng, depth - 1)).collect::<Vec<_>>().join(", ")),
        5 => format!("{{{}: {}}}", grammar(rng, depth - 1), grammar(rng, depth - 1)),
        6 => format!("{}[{}]", grammar(rng, depth - 1), grammar(rng, depth - 1)),
        7 => format!("{} ? {} : {}", grammar(rng, depth - 1), grammar(rng, depth - 1), grammar(rng, depth - 1)),
        8 => format!("{}.{}(x, {})", grammar(rng, depth - 1), rng.pick(&CEL_MACROS[1..]), grammar(rng, depth - 1)),
        _ => format!("({})", grammar(rng, depth - 1)),
    }
}

/// An expression of about the budgets' size: operator chains, member chains, calls in calls,
/// brackets and literals, each a few short of the limit, at it, or a few past.
fn at_budget(rng: &mut Rng) -> String {
    let near = |rng: &mut Rng, limit: usize| (limit + rng.below(9)).saturating_sub(4);
    let n = near(rng, budget::EXPRESSION_OPERATORS);
    let k = near(rng, 96);
    match rng.below(10) {
        0 => format!("1{}", " + 1".repeat(n)),
        1 => format!("vu{}", ".id".repeat(n)),
        2 => format!("{}1{}", "(".repeat(k), ")".repeat(k)),
        3 => format!("{}{}", "[".repeat(k), "]".repeat(k)),
        4 => format!("products{}", "[0]".repeat(n / 2)),
        5 => format!("{}1{}", "string(".repeat(n / 2), ")".repeat(n / 2)),
        6 => format!("{}1", "-".repeat(n)),
        7 => format!("{}true", "!".repeat(n)),
        8 => format!("'{}'", "a".repeat(near(rng, budget::EXPRESSION_BYTES - 2))),
        _ => format!("[{}]", vec!["[1].map(x, x + 1)"; n / 6].join(", ")),
    }
}

/// The input: the expression, then a 0xFF byte and the JSON the `products` slot holds.
fn generate(rng: &mut Rng) -> Vec<u8> {
    let corpus: Vec<Vec<u8>> = [
        "vu.id * 1000 + vu.iteration",
        "size(products) * 10 + products[1]",
        "[1, 2, 3].map(x, x * 2)",
        "randomItem(['red', 'green'])",
        "hmacSha256('key', token)",
        "jsonEncode({'a': [1, true, 'x']})",
        "users.name + ' <' + users.email + '>'",
        "randomInt(1, 3)",
        "m + host",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let expr = match rng.below(5) {
        0 => soup(rng),
        1 => {
            let depth = rng.below(6);
            grammar(rng, depth)
        }
        2 => at_budget(rng),
        _ => {
            let seed = match rng.below(3) {
                0 => soup(rng),
                1 => {
                    let depth = rng.below(5);
                    grammar(rng, depth)
                }
                _ => String::from_utf8_lossy(&rng.pick(&corpus)[..]).into_owned(),
            };
            support::mutate_text(rng, &seed, &corpus, &ATOMS[48..], budget::EXPRESSION_BYTES + 64)
        }
    };
    let products =
        *rng.pick(&["[1,2]", "[]", "{\"a\":1}", "\"x\"", "99999999999999999999", "[[[[1]]]]", "not json", ""]);
    let mut input = expr.into_bytes();
    input.push(0xff);
    input.extend_from_slice(products.as_bytes());
    input
}

/// Expressions that compiled (and so were evaluated) in this process.
static EVALUATED: AtomicU64 = AtomicU64::new(0);

/// Compiles the expression of `input` and evaluates it if it compiled, on a worker's stack.
fn check(input: &[u8]) {
    let split = input.iter().rposition(|&b| b == 0xff).unwrap_or(input.len());
    let source = String::from_utf8_lossy(&input[..split]);
    let products = String::from_utf8_lossy(input.get(split + 1..).unwrap_or_default()).into_owned();
    let consts = HashMap::from([("host".to_string(), "shop".to_string())]);
    let slots = HashMap::from([
        ("token".to_string(), 0),
        ("products".to_string(), 1),
        ("users.email".to_string(), 2),
        ("users.name".to_string(), 3),
    ]);
    let macros = HashMap::from([("m".to_string(), Arc::new(Fixed) as Arc<dyn Render>)]);
    let json_slots = HashSet::from([1]);
    let weights = HashMap::new();
    let typed = HashMap::new();
    let names = Names {
        consts: &consts,
        typed: &typed,
        slots: &slots,
        macros: &macros,
        json_slots: &json_slots,
        weights: &weights,
    };
    let Ok(expr) = Expr::compile(&source, &names) else { return };
    EVALUATED.fetch_add(1, Ordering::Relaxed);
    let values = ["abc".to_string(), products, "a@b.c".to_string(), "Ann".to_string()];
    std::thread::scope(|s| {
        let worker = std::thread::Builder::new()
            .stack_size(budget::WORKER_STACK)
            .spawn_scoped(s, || {
                let mut g = Gen::new(7, 3, 1, 2);
                g.lend(|| {
                    let _ = expr.eval(&values);
                    let mut out = String::new();
                    let _ = expr.render_into(&values, &mut out);
                });
            })
            .unwrap();
        if let Err(panic) = worker.join() {
            std::panic::resume_unwind(panic);
        }
    });
}

/// Whatever the expression, compiling it refuses or accepts it, and evaluating what compiled
/// gives a value or an error, without a panic, a stack overflow or a hang.
#[test]
fn no_expression_makes_compiling_or_evaluating_it_panic() {
    let cases = std::thread::Builder::new()
        .stack_size(budget::COMPILE_STACK)
        .spawn(|| support::run("expression", generate, check))
        .unwrap()
        .join()
        .unwrap_or_else(|e| std::panic::resume_unwind(e));
    // The generators reach evaluation, not only the parser's errors.
    let evaluated = EVALUATED.load(Ordering::Relaxed);
    println!("{evaluated} of {cases} expressions compiled and were evaluated");
    assert!(evaluated * 10 >= cases, "only {evaluated} of {cases} expressions compiled");
}
