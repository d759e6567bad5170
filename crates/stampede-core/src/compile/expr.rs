//! Expressions in template holes: `{{ uuid() }}`, `{{ randomInt(1, 3) }}`, `{{ vu.id * 1000 }}`.
//!
//! The language is CEL, the Common Expression Language of Kubernetes' own CRD validation rules
//! and admission policies, through the `cel` crate (its parser and interpreter): typed,
//! side-effect-free, and every expression is compiled and checked once, when the scenario is —
//! an unknown function, a wrong number of arguments or an unknown variable is a validation error
//! that says where, never a failed request. A hole that is a plain name (`{{token}}`) does not
//! come here: it keeps the template's direct path.
//!
//! Generated values (`uuid()`, `randomInt(a, b)`…) draw from the VU's own generator
//! ([`Gen`]): seeded from the run's seed and the VU, so a fixed seed repeats a run's choices.
//! The VU lends its generator to the thread while its step renders ([`Gen::lend`]); rendering
//! is synchronous, so no other VU can see it meanwhile.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::sync::Arc;

use cel::common::ast::{EntryExpr, Expr as Node, IdedExpr};
use cel::extractors::Arguments;
use cel::objects::{Key, Map};
use cel::{Context, ExecutionError, Program, Value};

use super::random::{self, Stream};

/// What renders a variable used in place (a template, which `template` implements): kept
/// abstract here so that expressions do not depend on templates, which use them.
pub trait Render: std::fmt::Debug + Send + Sync {
    /// The text, for a VU's `slots`.
    fn render_text(&self, slots: &[String]) -> String;
    /// The copies of other values one rendering holds ([`crate::compile::budget::EXPANSION`]).
    fn expansion(&self) -> u64;
}

/// The functions an expression may call besides CEL's own: name, the numbers of arguments it
/// takes, and what it gives. The reference of the scenario format lists them from here.
pub const FUNCTIONS: [(&str, &[usize], &str); 13] = [
    ("uuid", &[0], "a random UUID (version 4), fresh at each use"),
    ("randomInt", &[2], "a random integer from a to b, both included"),
    ("randomFloat", &[0, 2], "a random number in [0, 1), or in [a, b)"),
    ("randomString", &[1], "n random letters and digits"),
    ("randomItem", &[1], "a random element of a list"),
    ("uniqueId", &[0], "a value never given twice in the test: runner, VU (or `setup`, `teardown`) and a counter"),
    ("now", &[0], "the current time, RFC 3339 (UTC)"),
    ("unixMillis", &[0], "the current time in milliseconds since 1970"),
    ("base64", &[1], "a string or bytes, base64-encoded"),
    ("urlEncode", &[1], "a string, percent-encoded for a URL's query"),
    ("sha256", &[1], "the SHA-256 of a string, hexadecimal"),
    ("hmacSha256", &[2], "the HMAC-SHA-256 of a message (second) with a key (first), hexadecimal"),
    ("jsonEncode", &[1], "any value as JSON text"),
];

/// CEL's own functions and methods (the standard library without regular expressions and
/// time), with the numbers of arguments they take (a method's target not counted).
pub const CEL_FUNCTIONS: [(&str, &[usize]); 13] = [
    ("size", &[0, 1]),
    ("int", &[1]),
    ("uint", &[1]),
    ("double", &[1]),
    ("string", &[1]),
    ("bool", &[1]),
    ("bytes", &[1]),
    ("dyn", &[1]),
    ("type", &[1]),
    ("contains", &[1]),
    ("startsWith", &[1]),
    ("endsWith", &[1]),
    ("max", &[1, 2, 3, 4, 5, 6, 7, 8]),
];

/// Macros CEL expands into comprehensions before this module sees them (listed for the hint).
pub const CEL_MACROS: [&str; 6] = ["has", "all", "exists", "exists_one", "map", "filter"];

/// The variables every expression may read, with what they hold.
pub const VARIABLES: [(&str, &str); 6] = [
    ("vu.id", "this VU's number in the whole test, from 1 (distinct across runners)"),
    ("vu.iteration", "the VU's current iteration, from 0"),
    ("test.iteration", "the iteration's number in the whole test, from 0 (distinct across VUs and runners)"),
    ("response.status", "the status of the VU's last answer (0 before any, or when none came)"),
    ("runner.index", "this runner's index in the LoadTest, from 0 (0 on one machine)"),
    ("runner.count", "the LoadTest's number of runners (1 on one machine)"),
];

/// Why an expression does not compile: what, and where in it (a byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    /// Byte offset in the expression's source where it went wrong (0 when the parser gives none).
    pub offset: usize,
    /// What is wrong, for the user (`syntax error: …`, an unknown name with the known ones).
    pub message: String,
}

/// The names an expression may refer to besides [`VARIABLES`]: constants (`vars`,
/// `baseUrl`) and per-VU values (extracted), with their slots.
pub struct Names<'a> {
    /// Constant values as text (`vars`, `baseUrl`), by name.
    pub consts: &'a HashMap<String, String>,
    /// The constants whose value is not text, as JSON (`vars: {qty: 3}`).
    pub typed: &'a HashMap<String, serde_json::Value>,
    /// Per-VU values (extracted values, data columns, loop variables) by name, with their slot index.
    pub slots: &'a HashMap<String, usize>,
    /// Variables used in place (`vars` with a generated value and no scope).
    pub macros: &'a HashMap<String, Arc<dyn Render>>,
    /// Slots whose values are JSON, read typed.
    pub json_slots: &'a std::collections::HashSet<usize>,
    /// The copies of other values the variable filling a slot holds (1 when not given).
    pub weights: &'a HashMap<usize, u64>,
}

/// The names of the variables every expression may read ([`VARIABLES`]' roots): no `vars`
/// entry or extracted value may take them.
pub const BUILTIN_ROOTS: [&str; 4] = ["vu", "runner", "test", "response"];

/// A name an expression reads, resolved when it compiled.
#[derive(Debug, Clone)]
enum Root {
    Vu,
    Runner,
    Test,
    Response,
    Const(String, Value),
    Slot(String, usize),
    /// A slot holding JSON: read as the value it spells (a string when it spells none).
    JsonSlot(String, usize),
    /// A data source's row: its columns (`users.email`) and their slots.
    Row(String, Vec<(String, usize)>),
    /// A variable used in place: its template, rendered at each use.
    Macro(String, Arc<dyn Render>),
}

/// A compiled expression.
#[derive(Clone)]
pub struct Expr {
    source: String,
    program: Arc<Program>,
    roots: Vec<Root>,
    /// The copies of other values one evaluation may hold: each use of a name counts that
    /// name's own expansion ([`crate::compile::budget::EXPANSION`]).
    expansion: u64,
    /// The bytes of constants one evaluation may hold (each use of a constant counts its length).
    const_bytes: u64,
}

impl std::fmt::Debug for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Expr({:?})", self.source)
    }
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for Expr {}

impl Expr {
    /// Parses and checks `source` against `names`.
    pub fn compile(source: &str, names: &Names<'_>) -> Result<Expr, ExprError> {
        crate::compile::budget::expression(source).map_err(|(offset, message)| ExprError { offset, message })?;
        let program = Program::compile(source).map_err(|e| {
            let first = e.errors.first();
            // Lines and columns from 1.
            let (line, column) = first.map_or((1, 1), |e| (e.pos.0.max(1) as usize, e.pos.1.max(1) as usize));
            let offset = source.split_inclusive('\n').take(line - 1).map(str::len).sum::<usize>() + column - 1;
            let message = first.map_or_else(|| e.to_string(), |e| e.msg.clone());
            let message = message.strip_prefix("Syntax error: ").unwrap_or(&message).to_string();
            ExprError { offset: offset.min(source.len()), message: format!("syntax error: {message}") }
        })?;
        let offset_of = |id: u64| program.source_info().offset_for(id).map_or(0, |(start, _)| start as usize);
        let mut check = Check { slots: names.slots, roots: BTreeSet::new(), bound: Vec::new(), problem: None };
        check.walk(program.expression());
        if let Some((id, message, name)) = check.problem {
            // A call's position is its `(`: point at its name instead.
            let mut offset = offset_of(id);
            if let Some(start) = offset.checked_sub(name.len())
                && source.get(start..offset) == Some(name.as_str())
            {
                offset = start;
            }
            return Err(ExprError { offset, message });
        }
        let mut roots = Vec::new();
        for (name, id) in check.roots {
            roots.push(match name.as_str() {
                "vu" => Root::Vu,
                "runner" => Root::Runner,
                "test" => Root::Test,
                "response" => Root::Response,
                _ => {
                    if let Some(value) = names.typed.get(&name) {
                        Root::Const(name.clone(), from_json(value))
                    } else if let Some(value) = names.consts.get(&name) {
                        Root::Const(name.clone(), Value::from(value.as_str()))
                    } else if let Some(&slot) = names.slots.get(&name) {
                        if names.json_slots.contains(&slot) {
                            Root::JsonSlot(name.clone(), slot)
                        } else {
                            Root::Slot(name.clone(), slot)
                        }
                    } else if let Some(t) = names.macros.get(&name) {
                        Root::Macro(name.clone(), t.clone())
                    } else if let Some(columns) = row_columns(names.slots, &name) {
                        Root::Row(name.clone(), columns)
                    } else {
                        let mut known: Vec<&str> = names.consts.keys().chain(names.slots.keys()).map(String::as_str).collect();
                        known.extend(VARIABLES.iter().map(|(n, _)| *n));
                        known.sort_unstable();
                        return Err(ExprError {
                            offset: offset_of(id),
                            message: format!(
                                "unknown variable `{name}` (known here: {}; define it under `vars`, or extract it in an earlier step)",
                                known.join(", ")
                            ),
                        });
                    }
                }
            });
        }
        let (expansion, const_bytes) = uses(program.expression(), &roots, names.weights);
        Ok(Expr { source: source.to_string(), program: Arc::new(program), roots, expansion, const_bytes })
    }

    /// The copies of other values one evaluation may hold.
    pub fn expansion(&self) -> u64 {
        self.expansion
    }

    /// The bytes of constants one evaluation may hold: an upper bound of a constant
    /// expression's folded value, but for the text its literals and functions add.
    pub fn const_bytes(&self) -> u64 {
        self.const_bytes
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether it reads nothing that changes from VU to VU or from use to use (it may be folded).
    pub fn is_const(&self) -> bool {
        self.roots.iter().all(|r| matches!(r, Root::Const(..))) && !calls_generator(self.program.expression())
    }

    /// Evaluates it with the VU's `slots` (and the generator lent to this thread, if any).
    pub fn eval(&self, slots: &[String]) -> Result<Value, String> {
        ROOT.with(|root| {
            let mut ctx = root.new_inner_scope();
            for r in &self.roots {
                match r {
                    Root::Const(name, value) => ctx.add_variable_from_value(name.as_str(), value.clone()),
                    Root::Slot(name, slot) => {
                        let value = slots.get(*slot).map_or("", String::as_str);
                        ctx.add_variable_from_value(name.as_str(), value)
                    }
                    Root::JsonSlot(name, slot) => {
                        let text = slots.get(*slot).map_or("", String::as_str);
                        ctx.add_variable_from_value(name.as_str(), json_slot(*slot, text))
                    }
                    Root::Macro(name, t) => ctx.add_variable_from_value(name.as_str(), t.render_text(slots)),
                    Root::Row(name, columns) => {
                        let row: HashMap<Key, Value> = columns
                            .iter()
                            .map(|(c, slot)| {
                                let v = slots.get(*slot).map_or("", String::as_str);
                                (Key::String(Arc::new(c.clone())), Value::from(v))
                            })
                            .collect();
                        ctx.add_variable_from_value(name.as_str(), Value::Map(Map { map: Arc::new(row) }))
                    }
                    Root::Vu => {
                        let (id, iteration) = Gen::with(|g| (g.vu, g.iteration));
                        ctx.add_variable_from_value(
                            "vu",
                            map([("id", Value::Int(id.into())), ("iteration", Value::Int(iteration as i64))]),
                        )
                    }
                    Root::Test => {
                        let n = Gen::with(|g| g.test_iteration);
                        ctx.add_variable_from_value("test", map([("iteration", Value::Int(n as i64))]))
                    }
                    Root::Response => {
                        let status = Gen::with(|g| g.status);
                        ctx.add_variable_from_value("response", map([("status", Value::Int(status.into()))]))
                    }
                    Root::Runner => {
                        let (index, count) = Gen::with(|g| (g.runner, g.runners));
                        ctx.add_variable_from_value(
                            "runner",
                            map([("index", Value::Int(index.into())), ("count", Value::Int(count.into()))]),
                        )
                    }
                }
            }
            self.program.execute(&ctx).map_err(|e| format!("`{}`: {e}", self.source))
        })
    }

    /// Evaluates it and writes the value as text: a string as it is, a list or map as JSON.
    pub fn render_into(&self, slots: &[String], out: &mut String) -> Result<(), String> {
        let value = self.eval(slots)?;
        write_text(&value, out);
        Ok(())
    }
}

/// The columns of data source `name` (slots named `name.column`), if it is one.
fn row_columns(slots: &HashMap<String, usize>, name: &str) -> Option<Vec<(String, usize)>> {
    let prefix = format!("{name}.");
    let mut columns: Vec<(String, usize)> =
        slots.iter().filter_map(|(k, &slot)| Some((k.strip_prefix(&prefix)?.to_string(), slot))).collect();
    columns.sort();
    (!columns.is_empty()).then_some(columns)
}

fn map<const N: usize>(entries: [(&str, Value); N]) -> Value {
    let map: HashMap<Key, Value> =
        entries.into_iter().map(|(k, v)| (Key::String(Arc::new(k.to_string())), v)).collect();
    Value::Map(Map { map: Arc::new(map) })
}

/// What the names `node` uses add up to: the copies of other values (each use of a per-VU
/// value counts that value's own expansion, 1 for a value of no variable) and the bytes of
/// constants (each use counts the constant's length). Saturating: a sum past the budgets only
/// needs to stay past them.
fn uses(node: &IdedExpr, roots: &[Root], weights: &HashMap<usize, u64>) -> (u64, u64) {
    let (mut copies, mut bytes) = (0u64, 0u64);
    let weight = |slot: &usize| weights.get(slot).copied().unwrap_or(1);
    visit(node, &mut |n| {
        let Node::Ident(name) = &n.expr else { return };
        for r in roots {
            let (c, b) = match r {
                Root::Const(n, Value::String(v)) if n == name => (0, v.len() as u64),
                Root::Const(n, v) if n == name => (0, to_json(v).to_string().len() as u64),
                Root::Slot(n, slot) | Root::JsonSlot(n, slot) if n == name => (weight(slot), 0),
                Root::Row(n, columns) if n == name => (columns.iter().map(|(_, s)| weight(s)).sum(), 0),
                Root::Macro(n, t) if n == name => (t.expansion(), 0),
                _ => continue,
            };
            copies = copies.saturating_add(c);
            bytes = bytes.saturating_add(b);
        }
    });
    (copies, bytes)
}

/// Whether `node` calls a function whose value changes from use to use.
fn calls_generator(node: &IdedExpr) -> bool {
    let mut found = false;
    visit(node, &mut |n| {
        if let Node::Call(call) = &n.expr
            && FUNCTIONS.iter().any(|(name, ..)| *name == call.func_name)
            && !matches!(call.func_name.as_str(), "base64" | "urlEncode" | "sha256" | "hmacSha256" | "jsonEncode")
        {
            found = true;
        }
    });
    found
}

fn visit(node: &IdedExpr, f: &mut dyn FnMut(&IdedExpr)) {
    f(node);
    match &node.expr {
        Node::Call(call) => {
            if let Some(t) = &call.target {
                visit(t, f);
            }
            call.args.iter().for_each(|a| visit(a, f));
        }
        Node::Comprehension(c) => {
            for e in [&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result] {
                visit(e, f);
            }
        }
        Node::List(l) => l.elements.iter().for_each(|e| visit(e, f)),
        Node::Map(m) => m.entries.iter().for_each(|e| visit_entry(&e.expr, f)),
        Node::Struct(s) => s.entries.iter().for_each(|e| visit_entry(&e.expr, f)),
        Node::Select(s) => visit(&s.operand, f),
        Node::Ident(_) | Node::Literal(_) | Node::Unspecified => {}
    }
}

fn visit_entry(entry: &EntryExpr, f: &mut dyn FnMut(&IdedExpr)) {
    match entry {
        EntryExpr::StructField(s) => visit(&s.value, f),
        EntryExpr::MapEntry(m) => {
            visit(&m.key, f);
            visit(&m.value, f);
        }
    }
}

/// Walks a parsed expression: the names it reads (not those a macro binds), and the first
/// unknown function or wrong number of arguments.
struct Check<'a> {
    /// Per-VU values by name, for the columns of data rows.
    slots: &'a HashMap<String, usize>,
    roots: BTreeSet<(String, u64)>,
    bound: Vec<String>,
    /// Where (a node and the function it calls, if any), and what.
    problem: Option<(u64, String, String)>,
}

impl Check<'_> {
    fn fail(&mut self, id: u64, message: String) {
        self.fail_at(id, "", message);
    }

    fn fail_at(&mut self, id: u64, function: &str, message: String) {
        if self.problem.is_none() {
            self.problem = Some((id, message, function.to_string()));
        }
    }

    fn walk(&mut self, node: &IdedExpr) {
        match &node.expr {
            Node::Ident(name) => {
                if !self.bound.iter().any(|b| b == name) && !self.roots.iter().any(|(n, _)| n == name) {
                    self.roots.insert((name.clone(), node.id));
                }
            }
            Node::Call(call) => {
                self.call(node.id, &call.func_name, call.target.is_some(), call.args.len());
                if let Some(t) = &call.target {
                    self.walk(t);
                }
                for a in &call.args {
                    self.walk(a);
                }
            }
            Node::Comprehension(c) => {
                self.walk(&c.iter_range);
                self.walk(&c.accu_init);
                self.bound.push(c.iter_var.clone());
                if let Some(v) = &c.iter_var2 {
                    self.bound.push(v.clone());
                }
                self.bound.push(c.accu_var.clone());
                self.walk(&c.loop_cond);
                self.walk(&c.loop_step);
                self.walk(&c.result);
                self.bound.truncate(self.bound.len() - 2 - usize::from(c.iter_var2.is_some()));
            }
            Node::List(l) => l.elements.iter().for_each(|e| self.walk(e)),
            Node::Map(m) => m.entries.iter().for_each(|e| self.entry(&e.expr)),
            Node::Struct(s) => {
                self.fail(node.id, format!("`{}{{…}}`: message literals are not supported", s.type_name));
            }
            Node::Select(s) => {
                if let Node::Ident(root) = &s.operand.expr
                    && BUILTIN_ROOTS.contains(&root.as_str())
                    && !self.bound.iter().any(|b| b == root)
                {
                    let fields: Vec<&str> = VARIABLES
                        .iter()
                        .filter_map(|(n, _)| n.strip_prefix(root.as_str())?.strip_prefix('.'))
                        .collect();
                    if !fields.contains(&s.field.as_str()) {
                        let known: Vec<String> = fields.iter().map(|f| format!("{root}.{f}")).collect();
                        self.fail(s.operand.id, format!("`{root}` has no `{}` (it has {})", s.field, known.join(", ")));
                    }
                }
                if let Node::Ident(root) = &s.operand.expr
                    && !self.bound.iter().any(|b| b == root)
                    && !self.slots.contains_key(root)
                    && let Some(columns) = row_columns(self.slots, root)
                    && !columns.iter().any(|(c, _)| *c == s.field)
                {
                    let known: Vec<String> = columns.iter().map(|(c, _)| format!("{root}.{c}")).collect();
                    self.fail(
                        s.operand.id,
                        format!("`{root}` has no column `{}` (it has {})", s.field, known.join(", ")),
                    );
                }
                self.walk(&s.operand)
            }
            Node::Literal(_) | Node::Unspecified => {}
        }
    }

    fn entry(&mut self, entry: &EntryExpr) {
        match entry {
            EntryExpr::StructField(s) => self.walk(&s.value),
            EntryExpr::MapEntry(m) => {
                self.walk(&m.key);
                self.walk(&m.value);
            }
        }
    }

    fn call(&mut self, id: u64, name: &str, method: bool, args: usize) {
        // Operators (`_+_`, `!_`, `_[_]`, `_?_:_`…) are calls too.
        if name.starts_with('_') || name.starts_with('!') || name == "@in" || name == "@not_strictly_false" {
            return;
        }
        let ours = FUNCTIONS.iter().find(|(n, ..)| *n == name).map(|(_, arities, _)| *arities);
        let cel = CEL_FUNCTIONS.iter().find(|(n, _)| *n == name).map(|(_, arities)| *arities);
        let arities = match (ours, cel) {
            (Some(a), _) if !method => a,
            (Some(_), _) => {
                return self.fail_at(id, name, format!("`{name}` is a function, not a method: write `{name}(…)`"));
            }
            (None, Some(a)) => a,
            (None, None) => {
                let mut all: Vec<&str> = FUNCTIONS.iter().map(|(n, ..)| *n).collect();
                all.extend(CEL_FUNCTIONS.iter().map(|(n, _)| *n));
                all.extend(CEL_MACROS);
                let near =
                    all.iter().find(|n| close(n, name)).map(|n| format!(" — did you mean `{n}`?")).unwrap_or_default();
                return self.fail_at(
                    id,
                    name,
                    format!("unknown function `{name}`{near} (functions: {})", all.join(", ")),
                );
            }
        };
        if !arities.contains(&args) {
            let want: Vec<String> = arities.iter().map(usize::to_string).collect();
            self.fail_at(id, name, format!("`{name}` takes {} argument(s), not {args}", want.join(" or ")));
        }
    }
}

/// Whether two names differ by case or one or two letters (for a hint).
fn close(a: &str, b: &str) -> bool {
    if a.eq_ignore_ascii_case(b) {
        return true;
    }
    let (a, b): (Vec<char>, Vec<char>) = (a.to_lowercase().chars().collect(), b.to_lowercase().chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut row = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            row.push((prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(row[j] + 1));
        }
        prev = row;
    }
    prev[b.len()] <= 2
}

/// Writes `value` as text: strings as they are, numbers and booleans as CEL prints them,
/// lists and maps as JSON.
pub fn write_text(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => out.push_str(s),
        Value::Bytes(b) => out.push_str(&String::from_utf8_lossy(b)),
        Value::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Value::UInt(u) => {
            let _ = write!(out, "{u}");
        }
        Value::Float(f) => {
            let _ = write!(out, "{f}");
        }
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Null => out.push_str("null"),
        other => out.push_str(&to_json(other).to_string()),
    }
}

/// A JSON value as an expression's value.
fn from_json(json: &serde_json::Value) -> Value {
    use serde_json::Value as J;
    match json {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Value::Int(i),
            (None, Some(u)) => Value::UInt(u),
            _ => Value::Float(n.as_f64().unwrap_or(0.0)),
        },
        J::String(s) => Value::from(s.as_str()),
        J::Array(items) => Value::List(Arc::new(items.iter().map(from_json).collect())),
        J::Object(fields) => {
            let map: HashMap<Key, Value> =
                fields.iter().map(|(k, v)| (Key::String(Arc::new(k.clone())), from_json(v))).collect();
            Value::Map(Map { map: Arc::new(map) })
        }
    }
}

/// A value as JSON (what `jsonEncode` writes, and what a typed JSON body holds).
pub fn to_json(value: &Value) -> serde_json::Value {
    use serde_json::Value as J;
    match value {
        Value::String(s) => J::String(s.to_string()),
        Value::Bytes(b) => J::String(String::from_utf8_lossy(b).into_owned()),
        Value::Int(i) => J::from(*i),
        Value::UInt(u) => J::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::Bool(b) => J::Bool(*b),
        Value::List(items) => J::Array(items.iter().map(to_json).collect()),
        Value::Map(m) => {
            let mut entries: Vec<(String, J)> = m
                .map
                .iter()
                .map(|(k, v)| {
                    let key = match k {
                        Key::String(s) => s.to_string(),
                        Key::Int(i) => i.to_string(),
                        Key::Uint(u) => u.to_string(),
                        Key::Bool(b) => b.to_string(),
                    };
                    (key, to_json(v))
                })
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            J::Object(entries.into_iter().collect())
        }
        _ => J::Null,
    }
}

/// A generator: its random numbers (its [`Stream`]), its place in the run, and its `uniqueId`
/// counter. A VU's, or that of `setup`, `teardown` or the `test`-scoped variables.
#[derive(Clone, Debug)]
pub struct Gen {
    /// The random numbers, seeded from the run's seed and `stream`: `uuid()`, `randomInt` and the
    /// other random functions draw from it.
    pub rng: fastrand::Rng,
    /// Whose numbers it draws.
    pub stream: Stream,
    /// The VU's number in the whole test, from 1 (`vu.id`).
    pub vu: u32,
    /// The VU's current iteration, from 0 (`vu.iteration`).
    pub iteration: u64,
    /// This runner's index in the LoadTest, from 0 (`runner.index`).
    pub runner: u32,
    /// The LoadTest's number of runners, at least 1 (`runner.count`).
    pub runners: u32,
    /// `uniqueId` values given so far.
    pub unique: u64,
    /// The current iteration's number in the whole test (`test.iteration`).
    pub test_iteration: u64,
    /// The status of the VU's last answer (0 when none came).
    pub status: u16,
}

impl Default for Gen {
    fn default() -> Self {
        Gen::new(0, 1, 0, 1)
    }
}

/// The value a JSON slot's text spells (a string when it spells none). The last one read of
/// each slot is kept per thread: a list extracted once is read by many expressions (a
/// condition, a count, `randomItem` in each request of a loop), by every VU of the thread that
/// extracted the same text, and parsing it again each time cost more than comparing the text.
fn json_slot(slot: usize, text: &str) -> Value {
    JSON_SLOTS.with(|cache| {
        let mut cache = cache.borrow_mut();
        if let Some(Some((seen, value))) = cache.get(slot)
            && seen == text
        {
            return value.clone();
        }
        let value = match serde_json::from_str::<serde_json::Value>(text) {
            Ok(json) => from_json(&json),
            Err(_) => Value::from(text),
        };
        if cache.len() <= slot {
            cache.resize(slot + 1, None);
        }
        cache[slot] = Some((text.to_string(), value.clone()));
        value
    })
}

thread_local! {
    /// Each JSON slot's last text and value, read on this thread (see [`json_slot`]).
    static JSON_SLOTS: RefCell<Vec<Option<(String, Value)>>> = const { RefCell::new(Vec::new()) };
    /// The generator lent by the VU whose step renders now (a default one otherwise).
    static LENT: RefCell<Gen> = RefCell::new(Gen::default());
    /// The functions, registered once per thread.
    static ROOT: Context<'static, 'static> = root();
}

impl Gen {
    /// The generator of VU `vu` (from 1 in its runner) of runner `runner` of `runners`, from
    /// the run's `seed`. Its `vu.id` is its number in the whole test
    /// ([`random::fleet_vu_id`]), and its stream that number's.
    pub fn new(seed: u64, vu: u32, runner: u32, runners: u32) -> Gen {
        let id = random::fleet_vu_id(vu, runner, runners);
        Gen::of(seed, Stream::Vu(id), id, runner, runners)
    }

    /// The generator of `setup`, `teardown` or the `test`-scoped variables (`stream`) on
    /// runner `runner` of `runners`: its own stream, `uniqueId` values no VU gives, and the
    /// `vu.id` of the runner's first VU.
    pub fn outside_load(seed: u64, stream: Stream, runner: u32, runners: u32) -> Gen {
        Gen::of(seed, stream, random::fleet_vu_id(1, runner, runners), runner, runners)
    }

    fn of(seed: u64, stream: Stream, vu: u32, runner: u32, runners: u32) -> Gen {
        Gen {
            rng: random::rng(seed, stream),
            stream,
            vu,
            iteration: 0,
            runner,
            runners: runners.max(1),
            unique: 0,
            test_iteration: 0,
            status: 0,
        }
    }

    /// The next `uniqueId()`: runner, VU (or `setup`, `teardown`, `test`) and a counter.
    fn unique_id(&mut self) -> String {
        self.unique += 1;
        match self.stream {
            Stream::Vu(_) => format!("{}-{}-{}", self.runner, self.vu, self.unique),
            Stream::Setup => format!("{}-setup-{}", self.runner, self.unique),
            Stream::Teardown => format!("{}-teardown-{}", self.runner, self.unique),
            Stream::Test => format!("test-{}", self.unique),
        }
    }

    /// Runs `f` (which renders templates) with this generator lent to the thread, and takes
    /// it back after, with the state `f` left it in.
    pub fn lend<T>(&mut self, f: impl FnOnce() -> T) -> T {
        LENT.with(|lent| std::mem::swap(&mut *lent.borrow_mut(), self));
        let out = f();
        LENT.with(|lent| std::mem::swap(&mut *lent.borrow_mut(), self));
        out
    }

    fn with<T>(f: impl FnOnce(&mut Gen) -> T) -> T {
        LENT.with(|lent| f(&mut lent.borrow_mut()))
    }
}

fn fail(function: &str, why: impl ToString) -> ExecutionError {
    ExecutionError::function_error(function, why)
}

fn int(function: &str, v: &Value) -> Result<i64, ExecutionError> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::UInt(u) => i64::try_from(*u).map_err(|_| fail(function, "a number too large")),
        Value::Float(f) if f.fract() == 0.0 => Ok(*f as i64),
        other => Err(fail(function, format!("wants a whole number, not {}", type_name(other)))),
    }
}

fn float(function: &str, v: &Value) -> Result<f64, ExecutionError> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::UInt(u) => Ok(*u as f64),
        Value::Float(f) => Ok(*f),
        other => Err(fail(function, format!("wants a number, not {}", type_name(other)))),
    }
}

fn text(function: &str, v: &Value) -> Result<String, ExecutionError> {
    match v {
        Value::String(s) => Ok(s.to_string()),
        Value::Bytes(b) => Ok(String::from_utf8_lossy(b).into_owned()),
        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Bool(_) => {
            let mut s = String::new();
            write_text(v, &mut s);
            Ok(s)
        }
        other => Err(fail(function, format!("wants a string, not {}", type_name(other)))),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::List(_) => "a list",
        Value::Map(_) => "a map",
        Value::Int(_) | Value::UInt(_) => "an integer",
        Value::Float(_) => "a number",
        Value::String(_) => "a string",
        Value::Bytes(_) => "bytes",
        Value::Bool(_) => "a boolean",
        Value::Null => "null",
        _ => "a value",
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

fn uuid(rng: &mut fastrand::Rng) -> String {
    let mut b = rng.u128(..).to_be_bytes();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

type Call = Result<Value, ExecutionError>;

/// The root context: CEL's standard functions and ours.
fn root() -> Context<'static, 'static> {
    let mut ctx = Context::default();
    let mut add = |name: &'static str, f: fn(&[Value]) -> Call| {
        let added = ctx.add_function(name, move |Arguments(args): Arguments| f(&args));
        debug_assert!(added.is_ok(), "{name} clashes with a CEL function");
    };
    add("uuid", |_| Ok(Gen::with(|g| uuid(&mut g.rng)).into()));
    add("randomInt", |a| {
        let (lo, hi) = (int("randomInt", &a[0])?, int("randomInt", &a[1])?);
        if lo > hi {
            return Err(fail("randomInt", format!("its range {lo}..{hi} is empty")));
        }
        Ok(Value::Int(Gen::with(|g| g.rng.i64(lo..=hi))))
    });
    add("randomFloat", |a| {
        let (lo, hi) = match a {
            [lo, hi] => (float("randomFloat", lo)?, float("randomFloat", hi)?),
            _ => (0.0, 1.0),
        };
        Ok(Value::Float(lo + Gen::with(|g| g.rng.f64()) * (hi - lo)))
    });
    add("randomString", |a| {
        let n = usize::try_from(int("randomString", &a[0])?).map_err(|_| fail("randomString", "a negative length"))?;
        if n > crate::compile::budget::RANDOM_STRING {
            return Err(fail("randomString", crate::compile::budget::over("randomString", format!("a length of {n}"))));
        }
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let s: String = Gen::with(|g| (0..n).map(|_| char::from(ALPHABET[g.rng.usize(..ALPHABET.len())])).collect());
        Ok(s.into())
    });
    add("randomItem", |a| match &a[0] {
        Value::List(items) if !items.is_empty() => Ok(items[Gen::with(|g| g.rng.usize(..items.len()))].clone()),
        Value::List(_) => Err(fail("randomItem", "the list is empty")),
        other => Err(fail("randomItem", format!("wants a list, not {}", type_name(other)))),
    });
    add("uniqueId", |_| Ok(Gen::with(Gen::unique_id).into()));
    add("now", |_| {
        let now = time::OffsetDateTime::now_utc();
        Ok(now.format(&time::format_description::well_known::Rfc3339).unwrap_or_default().into())
    });
    add("unixMillis", |_| {
        let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
        Ok(Value::Int(ms as i64))
    });
    add("base64", |a| {
        use base64::Engine as _;
        let bytes = match &a[0] {
            Value::Bytes(b) => b.to_vec(),
            v => text("base64", v)?.into_bytes(),
        };
        Ok(base64::engine::general_purpose::STANDARD.encode(bytes).into())
    });
    add("urlEncode", |a| {
        let s = text("urlEncode", &a[0])?;
        Ok(form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>().into())
    });
    add("sha256", |a| {
        let s = text("sha256", &a[0])?;
        Ok(hex(ring::digest::digest(&ring::digest::SHA256, s.as_bytes()).as_ref()).into())
    });
    add("hmacSha256", |a| {
        let (key, message) = (text("hmacSha256", &a[0])?, text("hmacSha256", &a[1])?);
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key.as_bytes());
        Ok(hex(ring::hmac::sign(&key, message.as_bytes()).as_ref()).into())
    });
    add("jsonEncode", |a| Ok(to_json(&a[0]).to_string().into()));
    ctx
}

#[cfg(test)]
#[path = "expr_tests.rs"]
mod tests;
