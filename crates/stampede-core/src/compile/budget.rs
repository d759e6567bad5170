//! The budgets of a scenario: every size, depth and count a scenario file controls, with the
//! limit it may not pass. A file over one is refused when it compiles (`stampede validate`,
//! `stampede run`, the operator's validation), with the field, where, and the budget's name,
//! before any of it is built: a template that would expand past its budget is never rendered,
//! an expression too long or too deep for the stack is never parsed. What only a run can know
//! (a list an expression gives, a count it computes, a value rendered from answers) is checked
//! at run time, where going over fails that request or block with the same wording.
//!
//! The reference (`stampede docs`) lists them from [`ALL`].

/// Bytes of text one template may fold to when it compiles (its literal text with every
/// constant `vars` entry, `env.NAME` and constant expression put in).
pub const TEMPLATE_BYTES: usize = 16 << 20;

/// Bytes of text all the templates of one file may fold to, in all: a constant at its
/// template's budget used in many places would otherwise multiply.
pub const FILE_BYTES: usize = 64 << 20;

/// Holes (values filled in per VU) one template may hold once the variables it uses in place
/// are put in.
pub const TEMPLATE_HOLES: usize = 10_000;

/// Copies of other values one variable or template may expand to through the variables it
/// uses (`b: "{{a}}{{a}}"` holds 2 of `a`; `c: "{{b}}{{b}}"` 4): the variable graph, which
/// grows exponentially when each variable repeats the one before.
pub const EXPANSION: u64 = 10_000;

/// Bytes of one rendered value at run time (a body, a URL, a header built from extracted
/// values); a rendering past it fails its request.
pub const RENDERED_BYTES: usize = 64 << 20;

/// Bytes of one expression.
pub const EXPRESSION_BYTES: usize = 4096;

/// Operators, calls, member accesses and indexes in one expression: its tree is at most this
/// deep, so that evaluating it fits in a worker's stack ([`WORKER_STACK`]). CEL's interpreter
/// takes up to 64 KiB of stack a level in a debug build (measured: a left-deep chain of 254
/// `+` needs 16 MiB there), far less in a release build.
pub const EXPRESSION_OPERATORS: usize = 100;

/// The stack of the thread a scenario compiles on. CEL's parser takes up to 256 KiB a level of
/// brackets in a debug build, and it refuses past 96 levels.
pub const COMPILE_STACK: usize = 64 << 20;

/// The stack of each worker thread (and of setup and teardown): reserved, and touched only as
/// deep as an expression goes.
pub const WORKER_STACK: usize = 16 << 20;

/// Passes of one loop: `max`, a fixed `count`, and at run time a computed count or the
/// elements of a `forEach` list taken (a longer list with a smaller `max` is read only as far
/// as `max`).
pub const LOOP_PASSES: u64 = 1_000_000;

/// Nesting of blocks (`if`, `repeat`, `group`) inside one another.
pub const BLOCK_DEPTH: usize = 32;

/// Characters one `randomString(n)` may give (a rendered value's budget).
pub const RANDOM_STRING: usize = RENDERED_BYTES;

/// Bytes of one WebSocket message a session receives, all its frames together: one past it
/// fails the session with kind `protocol`, and the client closes with 1009 (message too big).
pub const WS_MESSAGE_BYTES: usize = 64 << 20;

/// VUs one load may run at once (`vus`, a stage target, `maxVUs`): each has a slot in its
/// worker from the start.
pub const VUS: u32 = 1_000_000;

/// Iterations per second one arrival-rate load may be asked for (`rate`, `startRate`, a stage's
/// `target`, per second; a live change's `rate`): its scheduler hands out every one.
pub const RATE: u32 = 10_000_000;

/// Every budget: its name as errors give it, its limit as text, and what it bounds.
pub const ALL: [(&str, &str, &str); 13] = [
    ("template.bytes", "16 MiB", "the text one template folds to when it compiles (constants put in)"),
    ("file.bytes", "64 MiB", "the text all the templates of one file fold to, in all"),
    ("template.holes", "10,000", "the per-VU values one template holds, variables used in place put in"),
    (
        "expansion",
        "10,000",
        "the copies of other values a variable or template expands to through the variables it uses",
    ),
    ("rendered.bytes", "64 MiB", "one value rendered at run time (a body, a URL, a header)"),
    ("expression.bytes", "4,096", "the length of one expression"),
    (
        "expression.operators",
        "100",
        "operators, calls, member accesses and indexes in one expression (brackets nest at most 96 deep)",
    ),
    (
        "loop.passes",
        "1,000,000",
        "passes of one loop: `max`, `count`, a computed count, the elements of a `forEach` list taken",
    ),
    ("block.depth", "32", "blocks (`if`, `repeat`, `group`) nested inside one another"),
    ("randomString", "64 MiB", "the length `randomString(n)` may ask for"),
    (
        "ws.message",
        "64 MiB",
        "one WebSocket message a session receives, all its frames together (past it: kind `protocol`, Close 1009)",
    ),
    ("vus", "1,000,000", "VUs one load may run at once: `vus`, a stage's `target`, `maxVUs`, `preAllocatedVUs`"),
    (
        "rate",
        "10,000,000/s",
        "iterations per second one arrival-rate load may be asked for: `rate`, `startRate`, a stage's `target` (per second), a live change's `rate`",
    ),
];

/// The message of a budget passed: `what` is how much was asked.
pub fn over(name: &str, what: impl std::fmt::Display) -> String {
    let (_, limit, _) = ALL.iter().find(|(n, ..)| *n == name).copied().unwrap_or((name, "?", ""));
    format!("{what}: over the `{name}` budget of {limit} (see `stampede docs`, Budgets)")
}

/// Checks an expression's size before it is parsed: its length and its count of operators,
/// calls, member accesses and indexes (outside string literals). The error is the byte offset
/// where the budget ran out, and why.
pub fn expression(source: &str) -> Result<(), (usize, String)> {
    if source.len() > EXPRESSION_BYTES {
        return Err((EXPRESSION_BYTES, over("expression.bytes", format!("an expression of {} bytes", source.len()))));
    }
    let bytes = source.as_bytes();
    let mut operators = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'"' | b'\'' => {
                // A string literal: skipped, escapes included (a triple quote ends at the
                // next triple quote, which the same rule finds one quote at a time).
                i += 1;
                while i < bytes.len() && bytes[i] != b {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'!' | b'?' | b'.' | b'(' | b'[' | b'{' | b'<' | b'>' | b'&' | b'|'
            | b'=' => {
                operators += 1;
                if operators > EXPRESSION_OPERATORS {
                    return Err((i, over("expression.operators", "an expression with more operators")));
                }
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same number of operators in each shape the parse tree can take: left-deep chains,
    /// member chains, calls in calls, brackets.
    fn at_the_limit() -> Vec<String> {
        let n = EXPRESSION_OPERATORS;
        vec![
            format!("1{}", " + 1".repeat(n)),
            format!("x{}", ".y".repeat(n)),
            format!("{}1{}", "(".repeat(90), ")".repeat(90)),
            format!("{}{}", "[".repeat(90), "]".repeat(90)),
            format!("a{}", "[0]".repeat(n / 2)),
        ]
    }

    #[test]
    fn an_expression_at_its_budget_passes_and_one_operator_more_is_refused_where_it_ran_out() {
        for e in at_the_limit() {
            assert_eq!(expression(&e), Ok(()), "{e}");
        }
        let over_by_one = format!("1{}", " + 1".repeat(EXPRESSION_OPERATORS + 1));
        let (offset, message) = expression(&over_by_one).unwrap_err();
        assert_eq!(offset, over_by_one.rfind('+').unwrap(), "the last `+` is where it ran out");
        assert!(message.contains("`expression.operators` budget of 100"), "{message}");
        let long = format!("'{}'", "a".repeat(EXPRESSION_BYTES));
        let (_, message) = expression(&long).unwrap_err();
        assert!(
            message.contains("an expression of 4098 bytes: over the `expression.bytes` budget of 4,096"),
            "{message}"
        );
    }

    #[test]
    fn operators_inside_string_literals_do_not_count() {
        let e = format!("'{}' + \"{}\" + 'it\\'s'", "+".repeat(1000), "-".repeat(1000));
        assert_eq!(expression(&e), Ok(()));
    }

    #[test]
    fn the_budgets_in_the_list_are_the_constants() {
        let n = |s: &str| s.replace(',', "").parse::<usize>().ok();
        let limit = |name: &str| ALL.iter().find(|(n, ..)| *n == name).unwrap().1;
        assert_eq!(n(limit("template.holes")), Some(TEMPLATE_HOLES));
        assert_eq!(n(limit("expansion")), Some(EXPANSION as usize));
        assert_eq!(n(limit("expression.bytes")), Some(EXPRESSION_BYTES));
        assert_eq!(n(limit("expression.operators")), Some(EXPRESSION_OPERATORS));
        assert_eq!(n(limit("loop.passes")), Some(LOOP_PASSES as usize));
        assert_eq!(n(limit("block.depth")), Some(BLOCK_DEPTH));
        assert_eq!((limit("template.bytes"), TEMPLATE_BYTES), ("16 MiB", 16 << 20));
        assert_eq!((limit("file.bytes"), FILE_BYTES), ("64 MiB", 64 << 20));
        assert_eq!((limit("rendered.bytes"), RENDERED_BYTES), ("64 MiB", 64 << 20));
        assert_eq!((limit("randomString"), RANDOM_STRING), ("64 MiB", 64 << 20));
        assert_eq!((limit("ws.message"), WS_MESSAGE_BYTES), ("64 MiB", 64 << 20));
    }
}
