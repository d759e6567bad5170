//! `{{name}}` and `{{ expression }}` templates, compiled once.
//!
//! Constants (`vars`, `baseUrl`, `{{env.NAME}}`) are folded in at compile time, so a
//! template made only of constants renders to a fixed string with no work per request.
//! Per-VU values (extracted from responses) become numbered slots. A hole that is not a plain
//! name is an expression ([`crate::compile::expr`]): evaluated at each use, unless it reads
//! only constants, when it is folded too.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::compile::budget;
use crate::compile::expr::{self, Expr, Names, Render};

/// How substituted values are escaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Escape {
    /// Inserted as they are.
    None,
    /// Escaped for the inside of a JSON string literal.
    JsonString,
}

/// Names a template may refer to.
#[derive(Debug, Default)]
pub struct Scope {
    /// Constant values: `vars`, `baseUrl`, as text.
    pub consts: HashMap<String, String>,
    /// The constants whose value is not text (`vars: {qty: 3}`, or a var that is one
    /// expression alone): a hole holding one alone in a JSON value writes it with its type.
    pub typed: HashMap<String, serde_json::Value>,
    /// Per-VU values and their slot numbers.
    pub slots: HashMap<String, usize>,
    /// Environment lookups (`{{env.NAME}}`); `None` reads the process environment.
    pub env: Option<HashMap<String, String>>,
    /// Variables whose template is used in place, fresh at each use (`vars` with a generated
    /// value and no scope).
    pub macros: HashMap<String, std::sync::Arc<Template>>,
    /// Slots holding JSON (from `json:` extractors, or any with `all: true`, a loop's variable,
    /// a `vu` or `iteration` var that is one hole alone): each holds its value as JSON text
    /// (a string quoted), which expressions and lone holes read typed and text reads unquoted.
    pub json_slots: std::collections::HashSet<usize>,
    /// The copies of other values the variable filling a slot holds (a slot of no variable,
    /// such as an extracted value, holds 1): the variable graph's weights.
    pub weights: HashMap<usize, u64>,
    /// The bytes of text every template compiled in this scope folded to, in all
    /// ([`budget::FILE_BYTES`]).
    pub folded: std::cell::Cell<usize>,
    /// Every environment value a template read, with its name: secrets to keep out of reports
    /// ([`crate::compile::secrets::Redactor`]).
    pub env_read: RefCell<Vec<(String, String)>>,
}

impl Scope {
    fn env_var(&self, name: &str) -> Option<String> {
        let value = match &self.env {
            Some(map) => map.get(name).cloned(),
            None => std::env::var(name).ok(),
        }?;
        self.env_read.borrow_mut().push((value.clone(), format!("env.{name}")));
        Some(value)
    }
}

/// Why a template does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// A hole names no variable: not in `vars`, extracted, a data column or built in (the hole's text).
    #[error("unknown variable `{0}` in template (define it under `vars`, or extract it in an earlier step)")]
    UnknownVariable(String),
    /// `{{env.NAME}}` without a `:-default` names an unset environment variable (`NAME`).
    #[error("environment variable `{0}` is not set")]
    EnvNotSet(String),
    /// `baseUrl` names a variable whose value changes (a generated one, an extracted one).
    #[error("`{{{{{0}}}}}` is not a constant: `baseUrl` may use `vars` of constant values and `env` only")]
    NotConstant(String),
    /// A `{{` with no `}}` after it.
    #[error("unclosed `{{{{` in template")]
    Unclosed,
    /// A hole with nothing in it (`{{ }}`).
    #[error("empty `{{{{}}}}` in template")]
    EmptyName,
    /// An expression that does not compile: the hole as written, where in the template it
    /// went wrong (a character column, from 1), and why.
    #[error("in `{{{{{hole}}}}}` at column {column}: {message}")]
    Expression {
        /// The hole's text, trimmed.
        hole: String,
        /// Where in the template it went wrong: a character column, from 1.
        column: usize,
        /// Why, as the expression compiler says.
        message: String,
    },
    /// A budget passed ([`crate::compile::budget`]): what and which.
    #[error("{0}")]
    Budget(String),
    /// A value used where it cannot be known yet.
    #[error("{0}")]
    Misplaced(String),
    /// Another tool's syntax, which would be sent as it is.
    #[error("`${{{0}}}` is not a Stampede template: write `{{{{{0}}}}}`")]
    ForeignSyntax(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Lit(String),
    Slot(usize),
    /// A slot holding JSON, written as text (a string unquoted, see [`slot_text`]).
    SlotText(usize),
    /// A slot holding JSON, written as JSON (a typed value in a JSON body).
    SlotJson(usize),
    /// Evaluated at each use, written as text.
    Expr(Box<Expr>),
    /// Evaluated at each use, written as JSON (a typed value in a JSON body).
    Json(Box<Expr>),
}

thread_local! {
    /// The first expression that failed while rendering on this thread, since it was taken.
    static RENDER_ERROR: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Takes the first error of an expression rendered since the last call (rendering writes
/// nothing for an expression that fails, and goes on): the caller fails the request with it.
pub fn take_render_error() -> Option<String> {
    RENDER_ERROR.with(|e| e.borrow_mut().take())
}

fn render_failed(message: String) {
    RENDER_ERROR.with(|e| {
        e.borrow_mut().get_or_insert(message);
    });
}

/// The text of a JSON slot's value: a string without its quotes, anything else as it is
/// (a number's digits, a list's JSON). A value that is not JSON (a slot not filled yet, or
/// filled by another kind of extractor) is its own text.
pub fn slot_text(stored: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    if let Some(inner) = stored.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        if !inner.contains(['"', '\\']) && !inner.contains(|c: char| c.is_control()) {
            return Cow::Borrowed(inner);
        }
        if let Ok(s) = serde_json::from_str::<String>(stored) {
            return Cow::Owned(s);
        }
    }
    Cow::Borrowed(stored)
}

/// The hole of `s` when `s` is one hole alone (`"{{ vu.id }}"`, spaces inside allowed).
pub fn lone_hole(s: &str) -> Option<&str> {
    let hole = s.strip_prefix("{{")?.strip_suffix("}}")?.trim();
    (!hole.is_empty() && !hole.contains("{{") && !hole.contains("}}")).then_some(hole)
}

/// A string of a JSON value with its text outside `{{…}}` holes escaped for the inside of a JSON
/// string (quotes, backslashes, control characters): the holes' values are escaped as they are
/// filled in, the text around them here.
fn json_literals(s: &str) -> std::borrow::Cow<'_, str> {
    let needs = |t: &str| t.chars().any(|c| c == '"' || c == '\\' || c < ' ');
    if !needs(s) {
        return std::borrow::Cow::Borrowed(s);
    }
    let escape = |t: &str, out: &mut String| {
        let quoted = serde_json::to_string(t).unwrap_or_default();
        out.push_str(&quoted[1..quoted.len() - 1]);
    };
    let mut out = String::with_capacity(s.len() + 8);
    let mut rest = s;
    while let Some(open) = rest.find("{{") {
        escape(&rest[..open], &mut out);
        match rest[open..].find("}}") {
            Some(close) => {
                out.push_str(&rest[open..open + close + 2]);
                rest = &rest[open + close + 2..];
            }
            None => {
                out.push_str(&rest[open..]);
                return std::borrow::Cow::Owned(out);
            }
        }
    }
    escape(rest, &mut out);
    std::borrow::Cow::Owned(out)
}

/// Whether `hole` is a plain name (`token`, `env.HOME`, `user.name`), not an expression.
fn is_plain_name(hole: &str) -> bool {
    hole.starts_with(|c: char| c.is_alphabetic() || c == '_')
        && hole.chars().all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A compiled template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
    escape: Escape,
    /// The copies of other values one rendering holds ([`budget::EXPANSION`]).
    expansion: u64,
    /// The bytes of literal text in `parts` so far, while it compiles.
    text: usize,
}

impl Template {
    /// Compiles `src`, resolving every name against `scope`.
    pub fn compile(src: &str, scope: &Scope, escape: Escape) -> Result<Template, TemplateError> {
        let mut t = Template { parts: Vec::new(), escape, expansion: 0, text: 0 };
        let mut lit = String::new();
        let mut rest = src;
        if let Some(at) = src.find("${") {
            let name: String = src[at + 2..].chars().take_while(|c| *c != '}').collect();
            return Err(TemplateError::ForeignSyntax(name.trim().to_string()));
        }
        while let Some(open) = rest.find("{{") {
            lit.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or(TemplateError::Unclosed)?;
            let raw = &after[..close];
            let name = raw.trim();
            if name.is_empty() {
                return Err(TemplateError::EmptyName);
            }
            if let Some(env_name) = name.strip_prefix("env.") {
                // `{{env.NAME:-default}}`: the default when NAME is not set, as the shell's.
                let (env_name, default) = match env_name.split_once(":-") {
                    Some((n, d)) => (n.trim(), Some(d)),
                    None => (env_name, None),
                };
                let value = scope
                    .env_var(env_name)
                    .or_else(|| default.map(str::to_string))
                    .ok_or_else(|| TemplateError::EnvNotSet(env_name.to_string()))?;
                fold(&t, &mut lit, &value, escape)?;
            } else if let Some(value) = scope.consts.get(name) {
                fold(&t, &mut lit, value, escape)?;
            } else if let Some(&slot) = scope.slots.get(name) {
                let part = if scope.json_slots.contains(&slot) { Part::SlotText(slot) } else { Part::Slot(slot) };
                t.push(part, &mut lit);
            } else if let Some(m) = scope.macros.get(name) {
                for part in &m.parts {
                    match part {
                        Part::Lit(s) => fold(&t, &mut lit, s, escape)?,
                        p => t.push(p.clone(), &mut lit),
                    }
                    t.within_holes()?;
                }
            } else {
                // Where the hole's text starts in `src`, for the error's column.
                let start = src.len() - rest.len() + open + 2 + (raw.len() - raw.trim_start().len());
                let expr = compile_expr(name, scope, &src[..start])?;
                if expr.is_const() {
                    if (lit.len() as u64).saturating_add(expr.const_bytes()) > budget::TEMPLATE_BYTES as u64 {
                        return Err(TemplateError::Budget(budget::over(
                            "template.bytes",
                            format!("`{{{{{name}}}}}` would fold to more than {} bytes", expr.const_bytes()),
                        )));
                    }
                    let mut value = String::new();
                    expr.render_into(&[], &mut value).map_err(|message| TemplateError::Expression {
                        hole: name.to_string(),
                        column: src[..start].chars().count() + 1,
                        message,
                    })?;
                    fold(&t, &mut lit, &value, escape)?;
                } else {
                    t.push(Part::Expr(Box::new(expr)), &mut lit);
                }
            }
            t.within_holes()?;
            rest = &after[close + 2..];
        }
        fold(&t, &mut lit, rest, Escape::None)?;
        if !lit.is_empty() || t.parts.is_empty() {
            t.parts.push(Part::Lit(lit));
        }
        t.weigh(scope)?;
        Ok(t)
    }

    /// Refuses a template with more holes than [`budget::TEMPLATE_HOLES`].
    fn within_holes(&self) -> Result<(), TemplateError> {
        if self.parts.len() > 2 * budget::TEMPLATE_HOLES {
            return Err(TemplateError::Budget(budget::over(
                "template.holes",
                "a template with more values filled in per VU, once the variables it uses in place are put in",
            )));
        }
        Ok(())
    }

    /// Counts the copies of other values the template holds, refusing more than
    /// [`budget::EXPANSION`].
    fn weigh(&mut self, scope: &Scope) -> Result<(), TemplateError> {
        let weight = |p: &Part| match p {
            Part::Lit(_) => 0,
            Part::Slot(s) | Part::SlotText(s) | Part::SlotJson(s) => scope.weights.get(s).copied().unwrap_or(1),
            Part::Expr(e) | Part::Json(e) => e.expansion(),
        };
        let text: usize = self.parts.iter().map(|p| if let Part::Lit(s) = p { s.len() } else { 0 }).sum();
        scope.folded.set(scope.folded.get().saturating_add(text));
        if scope.folded.get() > budget::FILE_BYTES {
            return Err(TemplateError::Budget(budget::over(
                "file.bytes",
                format!("the templates of this file fold to more than {} bytes in all", scope.folded.get()),
            )));
        }
        self.expansion = self.parts.iter().map(weight).fold(0u64, u64::saturating_add);
        if self.expansion > budget::EXPANSION {
            return Err(TemplateError::Budget(budget::over(
                "expansion",
                format!("it expands to {} copies of other values through the variables it uses", self.expansion),
            )));
        }
        Ok(())
    }

    /// The copies of other values one rendering holds.
    pub fn expansion(&self) -> u64 {
        self.expansion
    }

    /// Compiles a JSON body: its strings as templates (escaped for JSON), and a string that is
    /// one hole alone as that value with its own type — an expression's (`"{{ randomInt(1, 3) }}"`,
    /// `"{{ vu.id }}"`), a var's (`qty: 3`), an extracted JSON value's — a number, a boolean,
    /// null, a list or an object as well as a string.
    pub fn json(value: &serde_json::Value, scope: &Scope) -> Result<Template, TemplateError> {
        let mut t = Template { parts: Vec::new(), escape: Escape::JsonString, expansion: 0, text: 0 };
        let mut lit = String::new();
        t.json_value(value, scope, &mut lit)?;
        if !lit.is_empty() || t.parts.is_empty() {
            t.parts.push(Part::Lit(lit));
        }
        t.weigh(scope)?;
        Ok(t)
    }

    fn json_value(&mut self, value: &serde_json::Value, scope: &Scope, lit: &mut String) -> Result<(), TemplateError> {
        use serde_json::Value as J;
        match value {
            J::String(s) => {
                if !self.typed_hole(s, scope, lit)? {
                    lit.push('"');
                    self.append(Template::compile(&json_literals(s), scope, Escape::JsonString)?, lit)?;
                    lit.push('"');
                }
            }
            J::Array(items) => {
                lit.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        lit.push(',');
                    }
                    self.json_value(item, scope, lit)?;
                }
                lit.push(']');
            }
            J::Object(fields) => {
                lit.push('{');
                for (i, (key, item)) in fields.iter().enumerate() {
                    if i > 0 {
                        lit.push(',');
                    }
                    lit.push('"');
                    self.append(Template::compile(&json_literals(key), scope, Escape::JsonString)?, lit)?;
                    lit.push_str("\":");
                    self.json_value(item, scope, lit)?;
                }
                lit.push('}');
            }
            other => lit.push_str(&other.to_string()),
        }
        Ok(())
    }

    /// Writes `s` with its own type when it is one hole alone whose value has one (true), or
    /// leaves it (false) to be written as a string: a text constant, `env.NAME`, a value
    /// extracted as text (header, regex, cookie) or a data column.
    fn typed_hole(&mut self, s: &str, scope: &Scope, lit: &mut String) -> Result<bool, TemplateError> {
        let Some(h) = lone_hole(s) else { return Ok(false) };
        if h.starts_with("env.") {
            return Ok(false);
        }
        if let Some(value) = scope.typed.get(h) {
            fold(self, lit, &value.to_string(), Escape::None)?;
            return Ok(true);
        }
        if scope.consts.contains_key(h) {
            return Ok(false);
        }
        if let Some(&slot) = scope.slots.get(h) {
            if !scope.json_slots.contains(&slot) {
                return Ok(false);
            }
            self.push(Part::SlotJson(slot), lit);
            return Ok(true);
        }
        if let Some(m) = scope.macros.get(h) {
            // A var used in place is typed when it is one hole alone itself.
            return Ok(match m.parts.as_slice() {
                [Part::Expr(e)] | [Part::Json(e)] => {
                    self.push(Part::Json(e.clone()), lit);
                    true
                }
                [Part::SlotText(slot)] | [Part::SlotJson(slot)] => {
                    self.push(Part::SlotJson(*slot), lit);
                    true
                }
                _ => false,
            });
        }
        let expr = compile_expr(h, scope, &s[..s.find(h).unwrap_or(0)])?;
        if expr.is_const() {
            let value = expr.eval(&[]).map_err(|message| TemplateError::Expression {
                hole: h.to_string(),
                column: s[..s.find(h).unwrap_or(0)].chars().count() + 1,
                message,
            })?;
            fold(self, lit, &expr::to_json(&value).to_string(), Escape::None)?;
        } else {
            self.push(Part::Json(Box::new(expr)), lit);
        }
        Ok(true)
    }

    /// Appends `part`, after the literal text gathered so far.
    fn push(&mut self, part: Part, lit: &mut String) {
        if !lit.is_empty() {
            self.text += lit.len();
            self.parts.push(Part::Lit(std::mem::take(lit)));
        }
        self.parts.push(part);
    }

    /// Appends `other`'s parts (its literal text joins `lit`).
    fn append(&mut self, other: Template, lit: &mut String) -> Result<(), TemplateError> {
        for part in other.parts {
            match part {
                Part::Lit(s) => fold(self, lit, &s, Escape::None)?,
                p => self.push(p, lit),
            }
        }
        self.within_holes()
    }

    /// A template that is a fixed string.
    pub fn literal(text: impl Into<String>) -> Template {
        Template { parts: vec![Part::Lit(text.into())], escape: Escape::None, expansion: 0, text: 0 }
    }

    /// The fixed value, when the template has no per-VU parts.
    pub fn as_const(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Lit(s)] => Some(s),
            _ => None,
        }
    }

    /// The fixed text every rendering starts with (empty when it starts with a hole).
    pub fn literal_prefix(&self) -> &str {
        match self.parts.first() {
            Some(Part::Lit(s)) => s,
            _ => "",
        }
    }

    /// Appends the rendered value to `out`; `slots` holds the VU's values.
    pub fn render_into(&self, slots: &[String], out: &mut Vec<u8>) {
        let start = out.len();
        for part in &self.parts {
            if out.len() - start > budget::RENDERED_BYTES {
                out.truncate(start);
                render_failed(budget::over("rendered.bytes", "a value rendered to more bytes"));
                return;
            }
            match part {
                Part::Lit(s) => out.extend_from_slice(s.as_bytes()),
                Part::Slot(i) => {
                    let value = slots.get(*i).map(String::as_str).unwrap_or("");
                    self.write_value(value, out);
                }
                Part::SlotText(i) => {
                    let value = slots.get(*i).map(String::as_str).unwrap_or("");
                    self.write_value(&slot_text(value), out);
                }
                Part::SlotJson(i) => {
                    let value = slots.get(*i).map(String::as_str).unwrap_or("");
                    if serde_json::from_str::<serde::de::IgnoredAny>(value).is_ok() {
                        out.extend_from_slice(value.as_bytes());
                    } else {
                        out.extend_from_slice(serde_json::Value::from(value).to_string().as_bytes());
                    }
                }
                Part::Expr(e) => {
                    let mut value = String::new();
                    match e.render_into(slots, &mut value) {
                        Ok(()) => self.write_value(&value, out),
                        Err(message) => render_failed(message),
                    }
                }
                Part::Json(e) => match e.eval(slots) {
                    Ok(value) => out.extend_from_slice(expr::to_json(&value).to_string().as_bytes()),
                    Err(message) => render_failed(message),
                },
            }
        }
    }

    fn write_value(&self, value: &str, out: &mut Vec<u8>) {
        match self.escape {
            Escape::None => out.extend_from_slice(value.as_bytes()),
            Escape::JsonString => {
                let mut s = String::new();
                push_escaped(&mut s, value, Escape::JsonString);
                out.extend_from_slice(s.as_bytes());
            }
        }
    }

    /// Renders to a new string.
    pub fn render(&self, slots: &[String]) -> String {
        let mut out = Vec::new();
        self.render_into(slots, &mut out);
        String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
    }
}

/// Compiles an expression standing alone (a condition, a count): the error's byte offset in
/// `src`, and why.
pub fn expression(src: &str, scope: &Scope) -> Result<Expr, (usize, String)> {
    let macros: HashMap<String, std::sync::Arc<dyn Render>> =
        scope.macros.iter().map(|(k, v)| (k.clone(), v.clone() as std::sync::Arc<dyn Render>)).collect();
    let names = Names {
        consts: &scope.consts,
        typed: &scope.typed,
        slots: &scope.slots,
        macros: &macros,
        json_slots: &scope.json_slots,
        weights: &scope.weights,
    };
    Expr::compile(src, &names).map_err(|e| (e.offset, e.message))
}

/// Compiles the expression `hole`, which starts after `before` in its template.
fn compile_expr(hole: &str, scope: &Scope, before: &str) -> Result<Expr, TemplateError> {
    expression(hole, scope).map_err(|(offset, message)| {
        // A plain name that is not known keeps the plain message (`vu.…`, `runner.…` say
        // which fields there are).
        let root = hole.split('.').next().unwrap_or_default();
        if is_plain_name(hole) && !crate::compile::expr::BUILTIN_ROOTS.contains(&root) {
            return TemplateError::UnknownVariable(hole.to_string());
        }
        TemplateError::Expression {
            hole: hole.to_string(),
            column: before.chars().count() + hole[..offset.min(hole.len())].chars().count() + 1,
            message,
        }
    })
}

impl Render for Template {
    fn render_text(&self, slots: &[String]) -> String {
        self.render(slots)
    }

    fn expansion(&self) -> u64 {
        self.expansion
    }
}

/// Adds constant text to the literal gathered so far, refusing a template whose text would
/// pass [`budget::TEMPLATE_BYTES`] before it is built.
fn fold(t: &Template, lit: &mut String, value: &str, escape: Escape) -> Result<(), TemplateError> {
    let before = t.text;
    if before + lit.len() + value.len() > budget::TEMPLATE_BYTES {
        return Err(TemplateError::Budget(budget::over(
            "template.bytes",
            format!("a template of more than {} bytes once its constants are put in", before + lit.len() + value.len()),
        )));
    }
    push_escaped(lit, value, escape);
    Ok(())
}

fn push_escaped(out: &mut String, value: &str, escape: Escape) {
    match escape {
        Escape::None => out.push_str(value),
        Escape::JsonString => {
            // serde_json writes a quoted string; keep what is between the quotes.
            let quoted = serde_json::to_string(value).unwrap_or_default();
            out.push_str(&quoted[1..quoted.len() - 1]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        let mut s = Scope::default();
        s.consts.insert("baseUrl".into(), "http://127.0.0.1:8080".into());
        s.consts.insert("quote".into(), "say \"hi\"".into());
        s.slots.insert("token".into(), 0);
        s.env = Some(HashMap::from([("HOME_DIR".to_string(), "/home/a".to_string())]));
        s
    }

    #[test]
    fn folds_constants_at_compile_time() {
        let t = Template::compile("{{ baseUrl }}/get?d={{env.HOME_DIR}}", &scope(), Escape::None).unwrap();
        assert_eq!(t.as_const(), Some("http://127.0.0.1:8080/get?d=/home/a"));
    }

    #[test]
    fn renders_slots_per_vu() {
        let t = Template::compile("Bearer {{token}}!", &scope(), Escape::None).unwrap();
        assert_eq!(t.as_const(), None);
        assert_eq!(t.render(&["abc".to_string()]), "Bearer abc!");
    }

    #[test]
    fn escapes_inside_json_strings() {
        let t = Template::compile(r#"{"a":"{{quote}}","t":"{{token}}"}"#, &scope(), Escape::JsonString).unwrap();
        let out = t.render(&["x\"y".to_string()]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["a"], "say \"hi\"");
        assert_eq!(v["t"], "x\"y");
    }

    /// Found by the gRPC interop cases: a JSON value's own text with a quote, a backslash, a
    /// tab or a line break was sent as it is, and the body was no JSON.
    #[test]
    fn a_json_values_own_text_is_escaped_around_its_holes() {
        let value: serde_json::Value =
            serde_json::json!({"a\"k": "tab\there \"{{token}}\" line\nbreak \\ end", "b": ["q\"", "\u{1}"]});
        let t = Template::json(&value, &scope()).unwrap();
        let out = t.render(&["x\"y".to_string()]);
        let back: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(back, serde_json::json!({"a\"k": "tab\there \"x\"y\" line\nbreak \\ end", "b": ["q\"", "\u{1}"]}));
    }

    #[test]
    fn reports_unknown_and_malformed_names() {
        let s = scope();
        assert_eq!(Template::compile("{{nope}}", &s, Escape::None), Err(TemplateError::UnknownVariable("nope".into())));
        assert_eq!(
            Template::compile("{{env.MISSING}}", &s, Escape::None),
            Err(TemplateError::EnvNotSet("MISSING".into()))
        );
        assert_eq!(Template::compile("a {{b", &s, Escape::None), Err(TemplateError::Unclosed));
        assert_eq!(Template::compile("{{ }}", &s, Escape::None), Err(TemplateError::EmptyName));
    }

    fn render_with(t: &Template, slots: &[String], g: &mut crate::compile::expr::Gen) -> String {
        g.lend(|| t.render(slots))
    }

    #[test]
    fn expression_holes_render_fresh_values_and_constant_ones_are_folded() {
        let s = scope();
        let t = Template::compile("/orders/{{ uuid() }}?n={{randomInt(1, 3)}}&t={{ 'x-' + token }}", &s, Escape::None)
            .unwrap();
        assert_eq!(t.as_const(), None);
        let mut g = crate::compile::expr::Gen::new(7, 1, 0, 1);
        let slots = ["abc".to_string()];
        let (a, b) = (render_with(&t, &slots, &mut g), render_with(&t, &slots, &mut g));
        assert_ne!(a, b, "a fresh uuid at each use");
        assert!(a.starts_with("/orders/") && a.ends_with("&t=x-abc"), "{a}");
        assert_eq!(take_render_error(), None);
        // Only constants: folded at compile time, like a plain name.
        let t = Template::compile("{{ baseUrl + '/x' }}/{{ sha256('a').size() }}", &s, Escape::None).unwrap();
        assert_eq!(t.as_const(), Some("http://127.0.0.1:8080/x/64"));
    }

    #[test]
    fn a_json_value_that_is_one_expression_keeps_its_type() {
        let s = scope();
        let body: serde_json::Value = serde_json::json!({
            "qty": "{{ randomInt(2, 2) }}", "ok": "{{ 1 < 2 }}", "tags": "{{ ['a', token] }}",
            "id": "{{token}}", "note": "n={{ 1 + 1 }}", "quote": "{{quote}}", "n": 5, "nested": [{"v": "{{ 0.5 }}"}]
        });
        let t = Template::json(&body, &s).unwrap();
        let mut g = crate::compile::expr::Gen::default();
        let out: serde_json::Value = serde_json::from_str(&render_with(&t, &["x\"y".to_string()], &mut g)).unwrap();
        assert_eq!(out["qty"], 2, "a number, not \"2\"");
        assert_eq!(out["ok"], true);
        assert_eq!(out["tags"], serde_json::json!(["a", "x\"y"]));
        assert_eq!(out["id"], "x\"y", "a plain name stays a string");
        assert_eq!(out["note"], "n=2");
        assert_eq!(out["quote"], "say \"hi\"");
        assert_eq!(out["n"], 5);
        assert_eq!(out["nested"][0]["v"], 0.5);
    }

    #[test]
    fn a_lone_name_keeps_the_type_of_its_value_and_text_stays_text() {
        let mut s = scope();
        s.consts.insert("qty".into(), "3".into());
        s.typed.insert("qty".into(), serde_json::json!(3));
        s.consts.insert("seven".into(), "7".into());
        s.slots.insert("id".into(), 1);
        s.slots.insert("code".into(), 2);
        s.json_slots.extend([1, 2]);
        s.env.as_mut().unwrap().insert("N".into(), "5".into());
        let body = serde_json::json!({
            "qty": "{{qty}}", "seven": "{{ seven }}", "id": "{{id}}", "code": "{{code}}", "n": "{{env.N}}",
            "token": "{{token}}", "text": "{{code}}-{{id}}", "sum": "{{ qty + 1 }}", "list": ["{{ id }}"],
        });
        let t = Template::json(&body, &s).unwrap();
        // Held as JSON: the number 7 and the string "42".
        let slots = ["x".to_string(), "7".to_string(), r#""42""#.to_string()];
        let out: serde_json::Value = serde_json::from_str(&t.render(&slots)).unwrap();
        assert_eq!(
            out,
            serde_json::json!({
                "qty": 3, "seven": "7", "id": 7, "code": "42", "n": "5", "token": "x", "text": "42-7", "sum": 4,
                "list": [7],
            })
        );
        // In text, a JSON slot's string is unquoted.
        let t = Template::compile("c={{code}}&id={{id}}", &s, Escape::None).unwrap();
        assert_eq!(t.render(&slots), "c=42&id=7");
        // A slot not filled yet, or holding text, is a string.
        let t = Template::json(&serde_json::json!({"id": "{{id}}"}), &s).unwrap();
        assert_eq!(t.render(&["".into(), "".into()]), r#"{"id":""}"#);
        assert_eq!(t.render(&["".into(), "a b".into()]), r#"{"id":"a b"}"#);
        assert_eq!(slot_text(r#""a\"b""#), "a\"b");
        assert_eq!(slot_text(r#""plain""#), "plain");
        assert_eq!(slot_text("[1]"), "[1]");
    }

    #[test]
    fn a_failing_expression_renders_nothing_and_leaves_its_error_for_the_request() {
        let s = scope();
        let t = Template::compile("n={{ randomInt(5, 1) }}", &s, Escape::None).unwrap();
        assert_eq!(render_with(&t, &[], &mut crate::compile::expr::Gen::default()), "n=");
        let e = take_render_error().expect("the error is kept");
        assert!(e.contains("randomInt") && e.contains("5..1"), "{e}");
        assert_eq!(take_render_error(), None, "taken once");
    }

    #[test]
    fn a_bad_expression_or_another_tools_syntax_is_refused_at_compile_time() {
        let s = scope();
        let e = Template::compile("Bearer {{ tokn }}", &s, Escape::None).unwrap_err();
        assert_eq!(e, TemplateError::UnknownVariable("tokn".into()));
        let e = Template::compile("id={{ uuid(1) }}", &s, Escape::None).unwrap_err().to_string();
        assert_eq!(e, "in `{{uuid(1)}}` at column 7: `uuid` takes 0 argument(s), not 1");
        let e = Template::compile("{{ vu.id + 'x' + nosuch }}", &s, Escape::None).unwrap_err().to_string();
        assert!(e.starts_with("in `{{vu.id + 'x' + nosuch}}` at column 18: unknown variable `nosuch`"), "{e}");
        let e = Template::compile("Bearer ${token}", &s, Escape::None).unwrap_err().to_string();
        assert_eq!(e, "`${token}` is not a Stampede template: write `{{token}}`");
        // A literal `${` is still possible.
        let t = Template::compile("echo {{ '$' }}{HOME}", &s, Escape::None).unwrap();
        assert_eq!(t.as_const(), Some("echo ${HOME}"));
    }
}
