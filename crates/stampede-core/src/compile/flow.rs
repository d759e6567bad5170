//! A scenario's flow: its steps in order, and the blocks among them — run under a condition
//! (`if:`), repeated (`repeat:` count, forEach, while), or timed as one transaction (`group:`).
//!
//! Steps are compiled once each (a step inside a loop is one report row, however often it
//! runs); the flow refers to them by index.

use cel::Value;

use crate::compile::budget;
use crate::compile::expr::{Expr, write_text};
use crate::compile::template::{Scope, expression};

/// One element of a flow.
#[derive(Debug)]
pub enum Node {
    /// A step: its index in its scenario's steps.
    Step(usize),
    /// A block of nodes.
    Block(Box<BlockPlan>),
}

/// A block: `if`, `repeat` and `group` around its nodes.
#[derive(Debug)]
pub struct BlockPlan {
    /// For messages: where it is in the file.
    pub at: String,
    /// Runs only when this holds (checked once, before the first run).
    pub when: Option<Expr>,
    /// How often the block runs; `None`: once.
    pub repeat: Option<RepeatPlan>,
    /// Its transaction's index (the plan's group keys), when it is a `group`.
    pub group: Option<usize>,
    /// The steps and blocks inside it, in order.
    pub body: Vec<Node>,
}

/// How often a block runs.
#[derive(Debug)]
pub enum RepeatPlan {
    /// A count, computed when the block starts; the run's number (from 0) in `slot`.
    Count {
        /// How many runs: a number, or an expression computed when the block starts.
        count: Count,
        /// Most runs (`max`); `None`: only [`budget::LOOP_PASSES`] bounds a computed count.
        max: Option<u32>,
        /// The VU slot of the loop variable (`as`, default `index`).
        slot: usize,
    },
    /// Once per element of a list; the element in `slot`.
    ForEach {
        /// The expression giving the list (`forEach`), evaluated when the block starts.
        list: Expr,
        /// Most elements taken (`max`); `None`: the whole list, up to [`budget::LOOP_PASSES`].
        max: Option<u32>,
        /// The VU slot of the loop variable (`as`, default `item`): the element, as JSON.
        slot: usize,
    },
    /// While the expression holds, at most `max` times; the run's number in `slot`.
    While {
        /// The condition (`while`), checked before each run; the loop ends when it is false.
        cond: Expr,
        /// Most runs (`max`, required with `while`).
        max: u32,
        /// The VU slot of the loop variable (`as`, default `index`).
        slot: usize,
    },
}

/// A `repeat.count`: a number, or an expression computed when the block starts.
#[derive(Debug)]
pub enum Count {
    /// A number written in the file (`count: 3`).
    Fixed(u64),
    /// An expression giving a whole number (`count: "{{ randomInt(1, 3) }}"`); negative counts as 0.
    Expr(Expr),
}

/// Compiles a condition or a computed count, `src` as written (`size(items) > 0`, or the same
/// in a template hole `{{ … }}`). The error says where (a column, from 1) and why.
pub fn compile(src: &str, scope: &Scope) -> Result<Expr, String> {
    let trimmed = src.trim();
    let inner = trimmed.strip_prefix("{{").and_then(|s| s.strip_suffix("}}")).unwrap_or(trimmed);
    let before = src.find(inner).unwrap_or(0);
    expression(inner, scope).map_err(|(offset, message)| {
        let column = src[..before].chars().count() + inner[..offset.min(inner.len())].chars().count() + 1;
        format!("at column {column}: {message}")
    })
}

/// A condition's value: true or false, or why it is neither.
pub fn truth(expr: &Expr, slots: &[String]) -> Result<bool, String> {
    match expr.eval(slots)? {
        Value::Bool(b) => Ok(b),
        other => Err(format!("`{}` gives {}, not true or false", expr.source(), shown(&other))),
    }
}

/// A count's value: a whole number (a negative one counts as 0), at most `max`; a computed
/// count past [`budget::LOOP_PASSES`] without a smaller `max` is refused.
pub fn count(count: &Count, slots: &[String], max: Option<u32>) -> Result<u64, String> {
    let expr = match count {
        Count::Fixed(n) => return Ok(max.map_or(*n, |m| (*n).min(u64::from(m)))),
        Count::Expr(expr) => expr,
    };
    let n = match expr.eval(slots)? {
        Value::Int(i) => i.max(0) as u64,
        Value::UInt(u) => u,
        Value::Float(f) if f.fract() == 0.0 => f.max(0.0) as u64,
        other => return Err(format!("`{}` gives {}, not a whole number", expr.source(), shown(&other))),
    };
    let n = max.map_or(n, |m| n.min(u64::from(m)));
    if n > budget::LOOP_PASSES {
        return Err(budget::over("loop.passes", format!("`{}` gives a count of {n}", expr.source())));
    }
    Ok(n)
}

/// A list's elements, each as a JSON slot holds it (as JSON: a string quoted), as a loop takes them: the first `max` only (only those are written
/// out), and a list longer than [`budget::LOOP_PASSES`] without a smaller `max` refused.
pub fn elements(list: &Expr, slots: &[String], max: Option<u32>) -> Result<Elements, String> {
    match list.eval(slots)? {
        Value::List(items) => {
            let taken = max.map_or(items.len(), |m| items.len().min(m as usize));
            if taken as u64 > budget::LOOP_PASSES {
                return Err(budget::over(
                    "loop.passes",
                    format!("`{}` gives a list of {} elements", list.source(), items.len()),
                ));
            }
            Ok(Elements { items, next: 0, taken })
        }
        other => Err(format!("`{}` gives {}, not a list", list.source(), shown(&other))),
    }
}

/// A `forEach` list's elements, written out one at a time as the loop takes them.
pub struct Elements {
    items: std::sync::Arc<Vec<Value>>,
    next: usize,
    taken: usize,
}

impl Iterator for Elements {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        if self.next >= self.taken {
            return None;
        }
        // As JSON, which the loop variable's slot holds: a string element stays a string.
        let s = crate::compile::expr::to_json(&self.items[self.next]).to_string();
        self.next += 1;
        Some(s)
    }
}

fn shown(v: &Value) -> String {
    let mut s = String::new();
    write_text(v, &mut s);
    if s.chars().count() > 60 { format!("{}…", s.chars().take(60).collect::<String>()) } else { format!("`{s}`") }
}
