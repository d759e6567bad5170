//! A small PromQL reader for checking dashboards: it parses an expression the way Prometheus
//! does (precedence, aggregations, functions, vector matching, ranges, subqueries, offsets),
//! rejects what Prometheus would reject for syntax or types, and returns the vector selectors
//! it found, so the metric names and label matchers can be checked against a real exposition.
//!
//! Grafana variables (`$name`, `${name}`, `${name:format}`) are accepted where a dashboard puts
//! them: inside strings and as durations in `[...]` and after `offset`.

use std::collections::BTreeSet;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Num,
    Str(String),
    Dur,
    Var(String),
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    Colon,
    At,
    Op(&'static str),
}

/// Matches a label: `=`, `!=`, `=~`, `!~`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Matcher {
    pub label: String,
    pub op: &'static str,
    pub value: String,
}

/// One vector selector: `name{matchers}`, and the range function (`rate`, ...) it feeds when it
/// is a range vector passed straight to a function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Selector {
    pub name: Option<String>,
    pub matchers: Vec<Matcher>,
    pub range_fn: Option<String>,
}

impl Selector {
    /// The metric name, from the name or a `__name__="..."` matcher.
    pub(crate) fn metric(&self) -> Option<&str> {
        self.name
            .as_deref()
            .or_else(|| self.matchers.iter().find(|m| m.label == "__name__" && m.op == "=").map(|m| m.value.as_str()))
    }
}

/// What an expression evaluates to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Scalar,
    Vector,
    Matrix,
    String,
}

/// A parsed expression: its type, the labels of its result where they are known (after an
/// aggregation `by (...)`, say), and every selector in it.
#[derive(Debug, Clone)]
pub(crate) struct Query {
    pub kind: Kind,
    pub labels: Option<BTreeSet<String>>,
    pub selectors: Vec<Selector>,
}

impl Query {
    /// Metric names, sorted, without repeats.
    pub(crate) fn metric_names(&self) -> BTreeSet<String> {
        self.selectors.iter().filter_map(|s| s.metric().map(str::to_string)).collect()
    }
}

const AGGREGATIONS: &[&str] = &[
    "sum",
    "avg",
    "min",
    "max",
    "count",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "limitk",
    "limit_ratio",
];

/// Argument kinds per function: `m` range vector, `v` instant vector, `s` scalar, `S` string;
/// a trailing `?` makes the rest optional, `*` repeats the last one.
const FUNCTIONS: &[(&str, &str, Kind)] = &[
    ("abs", "v", Kind::Vector),
    ("absent", "v", Kind::Vector),
    ("absent_over_time", "m", Kind::Vector),
    ("acos", "v", Kind::Vector),
    ("acosh", "v", Kind::Vector),
    ("asin", "v", Kind::Vector),
    ("asinh", "v", Kind::Vector),
    ("atan", "v", Kind::Vector),
    ("atanh", "v", Kind::Vector),
    ("avg_over_time", "m", Kind::Vector),
    ("ceil", "v", Kind::Vector),
    ("changes", "m", Kind::Vector),
    ("clamp", "vss", Kind::Vector),
    ("clamp_max", "vs", Kind::Vector),
    ("clamp_min", "vs", Kind::Vector),
    ("cos", "v", Kind::Vector),
    ("cosh", "v", Kind::Vector),
    ("count_over_time", "m", Kind::Vector),
    ("day_of_month", "?v", Kind::Vector),
    ("day_of_week", "?v", Kind::Vector),
    ("day_of_year", "?v", Kind::Vector),
    ("days_in_month", "?v", Kind::Vector),
    ("deg", "v", Kind::Vector),
    ("delta", "m", Kind::Vector),
    ("deriv", "m", Kind::Vector),
    ("double_exponential_smoothing", "mss", Kind::Vector),
    ("exp", "v", Kind::Vector),
    ("floor", "v", Kind::Vector),
    ("histogram_avg", "v", Kind::Vector),
    ("histogram_count", "v", Kind::Vector),
    ("histogram_fraction", "ssv", Kind::Vector),
    ("histogram_quantile", "sv", Kind::Vector),
    ("histogram_stddev", "v", Kind::Vector),
    ("histogram_stdvar", "v", Kind::Vector),
    ("histogram_sum", "v", Kind::Vector),
    ("holt_winters", "mss", Kind::Vector),
    ("hour", "?v", Kind::Vector),
    ("idelta", "m", Kind::Vector),
    ("increase", "m", Kind::Vector),
    ("irate", "m", Kind::Vector),
    ("label_join", "vSSS*", Kind::Vector),
    ("label_replace", "vSSSS", Kind::Vector),
    ("last_over_time", "m", Kind::Vector),
    ("ln", "v", Kind::Vector),
    ("log10", "v", Kind::Vector),
    ("log2", "v", Kind::Vector),
    ("mad_over_time", "m", Kind::Vector),
    ("max_over_time", "m", Kind::Vector),
    ("min_over_time", "m", Kind::Vector),
    ("minute", "?v", Kind::Vector),
    ("month", "?v", Kind::Vector),
    ("pi", "", Kind::Scalar),
    ("predict_linear", "ms", Kind::Vector),
    ("present_over_time", "m", Kind::Vector),
    ("quantile_over_time", "sm", Kind::Vector),
    ("rad", "v", Kind::Vector),
    ("rate", "m", Kind::Vector),
    ("resets", "m", Kind::Vector),
    ("round", "v?s", Kind::Vector),
    ("scalar", "v", Kind::Scalar),
    ("sgn", "v", Kind::Vector),
    ("sin", "v", Kind::Vector),
    ("sinh", "v", Kind::Vector),
    ("sort", "v", Kind::Vector),
    ("sort_by_label", "vS*", Kind::Vector),
    ("sort_by_label_desc", "vS*", Kind::Vector),
    ("sort_desc", "v", Kind::Vector),
    ("sqrt", "v", Kind::Vector),
    ("stddev_over_time", "m", Kind::Vector),
    ("stdvar_over_time", "m", Kind::Vector),
    ("sum_over_time", "m", Kind::Vector),
    ("tan", "v", Kind::Vector),
    ("tanh", "v", Kind::Vector),
    ("time", "", Kind::Scalar),
    ("timestamp", "v", Kind::Vector),
    ("vector", "s", Kind::Vector),
    ("year", "?v", Kind::Vector),
];

/// Functions that read a counter: their selector must be a counter (or a histogram's
/// `_bucket`/`_sum`/`_count`).
pub(crate) const COUNTER_FUNCTIONS: &[&str] = &["rate", "irate", "increase", "resets"];

/// Parses `src` as one PromQL expression.
pub(crate) fn parse(src: &str) -> Result<Query, String> {
    let toks = lex(src)?;
    let mut p = Parser { toks, pos: 0, selectors: Vec::new() };
    let node = p.expr(0)?;
    if let Some(t) = p.peek() {
        return Err(format!("unexpected {t:?} after the end of the expression"));
    }
    Ok(Query { kind: node.kind, labels: node.labels, selectors: p.selectors })
}

fn lex(src: &str) -> Result<Vec<Tok>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    let mut bracket_depth = 0usize;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match c {
            c if c.is_whitespace() => i += 1,
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '(' => push(&mut toks, &mut i, Tok::LParen),
            ')' => push(&mut toks, &mut i, Tok::RParen),
            '{' => push(&mut toks, &mut i, Tok::LBrace),
            '}' => push(&mut toks, &mut i, Tok::RBrace),
            '[' => {
                bracket_depth += 1;
                push(&mut toks, &mut i, Tok::LBracket)
            }
            ']' => {
                bracket_depth = bracket_depth.checked_sub(1).ok_or("unbalanced `]`")?;
                push(&mut toks, &mut i, Tok::RBracket)
            }
            ',' => push(&mut toks, &mut i, Tok::Comma),
            '@' => push(&mut toks, &mut i, Tok::At),
            ':' if bracket_depth > 0 => push(&mut toks, &mut i, Tok::Colon),
            '"' | '\'' | '`' => {
                let (s, end) = lex_string(&chars, i)?;
                toks.push(Tok::Str(s));
                i = end;
            }
            '$' => {
                let (name, end) = lex_variable(&chars, i)?;
                toks.push(Tok::Var(name));
                i = end;
            }
            '0'..='9' | '.' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.' || chars[i] == '_') {
                    // An exponent's sign belongs to the number: 1e-3.
                    if (chars[i] == 'e' || chars[i] == 'E')
                        && matches!(chars.get(i + 1), Some('+' | '-'))
                        && chars[start..i].iter().all(|c| c.is_ascii_digit() || *c == '.')
                    {
                        i += 1;
                    }
                    i += 1;
                }
                let text: String = chars[start..i].iter().collect();
                toks.push(classify_number(&text)?);
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':') {
                    i += 1;
                }
                toks.push(Tok::Ident(chars[start..i].iter().collect()));
            }
            _ => {
                let two: String = [c, next.unwrap_or(' ')].iter().collect();
                let op = ["==", "!=", "<=", ">=", "=~", "!~"].iter().find(|o| **o == two);
                if let Some(op) = op {
                    toks.push(Tok::Op(op));
                    i += 2;
                } else {
                    let op = ["+", "-", "*", "/", "%", "^", "<", ">", "="]
                        .iter()
                        .find(|o| o.starts_with(c))
                        .ok_or_else(|| format!("unexpected character `{c}`"))?;
                    toks.push(Tok::Op(op));
                    i += 1;
                }
            }
        }
    }
    if bracket_depth != 0 {
        return Err("unbalanced `[`".into());
    }
    Ok(toks)
}

fn push(toks: &mut Vec<Tok>, i: &mut usize, t: Tok) {
    toks.push(t);
    *i += 1;
}

/// A number (`0.99`, `1e6`, `Inf` is an identifier) or a duration (`5m`, `1h30m`, `250ms`).
fn classify_number(text: &str) -> Result<Tok, String> {
    if text.parse::<f64>().is_ok() || (text.starts_with("0x") && u64::from_str_radix(&text[2..], 16).is_ok()) {
        return Ok(Tok::Num);
    }
    let mut rest = text;
    let mut parts = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(|| format!("bad duration `{text}`"))?;
        if digits == 0 {
            return Err(format!("bad number or duration `{text}`"));
        }
        rest = &rest[digits..];
        let unit = ["ms", "s", "m", "h", "d", "w", "y"]
            .iter()
            .find(|u| rest.starts_with(**u))
            .ok_or_else(|| format!("bad number or duration `{text}`"))?;
        rest = &rest[unit.len()..];
        parts += 1;
    }
    if parts == 0 {
        return Err(format!("bad number `{text}`"));
    }
    Ok(Tok::Dur)
}

fn lex_string(chars: &[char], start: usize) -> Result<(String, usize), String> {
    let quote = chars[start];
    let mut s = String::new();
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            c if c == quote => return Ok((s, i + 1)),
            '\\' if quote != '`' => {
                let e = *chars.get(i + 1).ok_or("unterminated escape")?;
                s.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    other => other,
                });
                i += 2;
            }
            c => {
                s.push(c);
                i += 1;
            }
        }
    }
    Err(format!("unterminated string starting at {start}"))
}

/// `$name`, `${name}` or `${name:format}`; returns the name.
fn lex_variable(chars: &[char], start: usize) -> Result<(String, usize), String> {
    let ident = |c: &char| c.is_ascii_alphanumeric() || *c == '_';
    if chars.get(start + 1) == Some(&'{') {
        let close = chars[start..].iter().position(|c| *c == '}').ok_or("unterminated `${`")? + start;
        let inner: String = chars[start + 2..close].iter().collect();
        let name = inner.split(':').next().unwrap_or_default().to_string();
        if name.is_empty() || !name.chars().all(|c| ident(&c)) {
            return Err(format!("bad variable `${{{inner}}}`"));
        }
        return Ok((name, close + 1));
    }
    let len = chars[start + 1..].iter().take_while(|c| ident(c)).count();
    if len == 0 {
        return Err("`$` without a variable name".into());
    }
    Ok((chars[start + 1..start + 1 + len].iter().collect(), start + 1 + len))
}

/// What parsing a sub-expression yields.
#[derive(Debug, Clone)]
struct Node {
    kind: Kind,
    labels: Option<BTreeSet<String>>,
    /// Index into `selectors` when this node is a plain (range) selector.
    selector: Option<usize>,
}

impl Node {
    fn new(kind: Kind, labels: Option<BTreeSet<String>>) -> Self {
        Node { kind, labels, selector: None }
    }
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
    selectors: Vec<Selector>,
}

/// Binary operators and their precedence (higher binds tighter).
fn binary_precedence(t: &Tok) -> Option<(&'static str, u8)> {
    Some(match t {
        Tok::Ident(s) if s == "or" => ("or", 1),
        Tok::Ident(s) if s == "and" => ("and", 2),
        Tok::Ident(s) if s == "unless" => ("unless", 2),
        Tok::Op(o @ ("==" | "!=" | "<=" | ">=" | "<" | ">")) => (o, 3),
        Tok::Op(o @ ("+" | "-")) => (o, 4),
        Tok::Op(o @ ("*" | "/" | "%")) => (o, 5),
        Tok::Ident(s) if s == "atan2" => ("atan2", 5),
        Tok::Op("^") => ("^", 6),
        _ => return None,
    })
}

fn is_keyword(s: &str) -> bool {
    matches!(
        s,
        "by" | "without"
            | "on"
            | "ignoring"
            | "group_left"
            | "group_right"
            | "bool"
            | "offset"
            | "and"
            | "or"
            | "unless"
            | "atan2"
    )
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos)
    }

    fn peek_at(&self, n: usize) -> Option<&Tok> {
        self.toks.get(self.pos + n)
    }

    fn next(&mut self) -> Result<Tok, String> {
        let t = self.toks.get(self.pos).cloned().ok_or("unexpected end of expression")?;
        self.pos += 1;
        Ok(t)
    }

    fn expect(&mut self, want: Tok) -> Result<(), String> {
        let got = self.next()?;
        if got == want { Ok(()) } else { Err(format!("expected {want:?}, found {got:?}")) }
    }

    fn eat_ident(&mut self, word: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Ident(s)) if s == word) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expr(&mut self, min_prec: u8) -> Result<Node, String> {
        let mut left = self.unary()?;
        while let Some((op, prec)) = self.peek().and_then(binary_precedence) {
            if prec < min_prec {
                break;
            }
            self.pos += 1;
            left = self.binary_rest(left, op, prec)?;
        }
        Ok(left)
    }

    /// After `left op`: modifiers, the right operand, and the result's shape.
    fn binary_rest(&mut self, left: Node, op: &str, prec: u8) -> Result<Node, String> {
        let comparison = prec == 3;
        let set_op = matches!(op, "and" | "or" | "unless");
        let returns_bool = comparison && self.eat_ident("bool");
        let mut on: Option<BTreeSet<String>> = None;
        let mut ignoring: Option<BTreeSet<String>> = None;
        let mut group: Option<(&str, BTreeSet<String>)> = None;
        if self.eat_ident("on") {
            on = Some(self.label_list()?);
        } else if self.eat_ident("ignoring") {
            ignoring = Some(self.label_list()?);
        }
        for side in ["group_left", "group_right"] {
            if self.eat_ident(side) {
                if on.is_none() && ignoring.is_none() {
                    return Err(format!("`{side}` needs `on` or `ignoring` before it"));
                }
                let extra = if self.peek() == Some(&Tok::LParen) { self.label_list()? } else { BTreeSet::new() };
                group = Some((side, extra));
            }
        }
        // `^` is right-associative, everything else left.
        let right = self.expr(if op == "^" { prec } else { prec + 1 })?;
        for side in [&left, &right] {
            if matches!(side.kind, Kind::Matrix | Kind::String) {
                return Err(format!("`{op}` needs scalars or instant vectors, found a {:?}", side.kind));
            }
        }
        let vectors = left.kind == Kind::Vector && right.kind == Kind::Vector;
        if set_op && !vectors {
            return Err(format!("`{op}` needs instant vectors on both sides"));
        }
        if (on.is_some() || ignoring.is_some() || group.is_some()) && !vectors {
            return Err(format!("vector matching on `{op}` needs instant vectors on both sides"));
        }
        if comparison && !vectors && !returns_bool && left.kind == Kind::Scalar && right.kind == Kind::Scalar {
            return Err(format!("comparison `{op}` of two scalars needs `bool`"));
        }
        if !vectors {
            let kind =
                if left.kind == Kind::Vector || right.kind == Kind::Vector { Kind::Vector } else { Kind::Scalar };
            let labels = if left.kind == Kind::Vector { left.labels } else { right.labels };
            return Ok(Node::new(kind, labels));
        }
        if set_op {
            let labels = match (op, left.labels, right.labels) {
                ("or", Some(l), Some(r)) => Some(l.union(&r).cloned().collect()),
                ("or", _, _) => None,
                (_, l, _) => l,
            };
            return Ok(Node::new(Kind::Vector, labels));
        }
        // Vector matching: both sides must have the same labels to match on, or no sample pairs
        // up and the result is empty.
        let key = |labels: &Option<BTreeSet<String>>| -> Option<BTreeSet<String>> {
            let labels = labels.as_ref()?;
            Some(match (&on, &ignoring) {
                (Some(on), _) => labels.intersection(on).cloned().collect(),
                (_, Some(ign)) => labels.difference(ign).cloned().collect(),
                _ => labels.clone(),
            })
        };
        if let (Some(l), Some(r)) = (key(&left.labels), key(&right.labels))
            && l != r
        {
            return Err(format!(
                "`{op}` matches on labels {l:?} on the left but {r:?} on the right: no sample would pair up"
            ));
        }
        let labels = match (&group, &on, &ignoring) {
            (Some(("group_left", extra)), _, _) => left.labels.map(|l| l.union(extra).cloned().collect()),
            (Some((_, extra)), _, _) => right.labels.map(|r| r.union(extra).cloned().collect()),
            (None, Some(on), _) => {
                Some(left.labels.map(|l| l.intersection(on).cloned().collect()).unwrap_or_else(|| on.clone()))
            }
            (None, None, Some(ign)) => left.labels.map(|l| l.difference(ign).cloned().collect()),
            (None, None, None) => left.labels,
        };
        Ok(Node::new(Kind::Vector, labels))
    }

    fn unary(&mut self) -> Result<Node, String> {
        if matches!(self.peek(), Some(Tok::Op("-" | "+"))) {
            self.pos += 1;
            // Unary minus binds looser than `^`: -2^2 is -4.
            let node = self.expr(6)?;
            if !matches!(node.kind, Kind::Scalar | Kind::Vector) {
                return Err("unary minus needs a scalar or an instant vector".into());
            }
            return Ok(Node { selector: None, ..node });
        }
        let node = self.primary()?;
        self.postfix(node)
    }

    fn postfix(&mut self, mut node: Node) -> Result<Node, String> {
        loop {
            match self.peek() {
                Some(Tok::LBracket) => {
                    self.pos += 1;
                    self.duration()?;
                    if self.peek() == Some(&Tok::Colon) {
                        self.pos += 1;
                        if self.peek() != Some(&Tok::RBracket) {
                            self.duration()?;
                        }
                        if node.kind != Kind::Vector {
                            return Err("a subquery needs an instant vector".into());
                        }
                        node = Node::new(Kind::Matrix, node.labels);
                    } else {
                        let plain = node.selector.is_some() && node.kind == Kind::Vector;
                        if !plain {
                            return Err(
                                "a range `[...]` applies only to a plain selector (use a subquery `[d:]`)".into()
                            );
                        }
                        node.kind = Kind::Matrix;
                    }
                    self.expect(Tok::RBracket)?;
                }
                Some(Tok::Ident(s)) if s == "offset" => {
                    self.pos += 1;
                    if matches!(self.peek(), Some(Tok::Op("-"))) {
                        self.pos += 1;
                    }
                    self.duration()?;
                }
                Some(Tok::At) => {
                    self.pos += 1;
                    match self.next()? {
                        Tok::Num | Tok::Var(_) => {}
                        Tok::Ident(f) if f == "start" || f == "end" => {
                            self.expect(Tok::LParen)?;
                            self.expect(Tok::RParen)?;
                        }
                        t => return Err(format!("bad `@` modifier {t:?}")),
                    }
                }
                _ => return Ok(node),
            }
        }
    }

    fn duration(&mut self) -> Result<(), String> {
        match self.next()? {
            Tok::Dur | Tok::Var(_) => Ok(()),
            t => Err(format!("expected a duration, found {t:?}")),
        }
    }

    fn label_list(&mut self) -> Result<BTreeSet<String>, String> {
        self.expect(Tok::LParen)?;
        let mut labels = BTreeSet::new();
        loop {
            match self.next()? {
                Tok::RParen => return Ok(labels),
                Tok::Ident(l) => {
                    labels.insert(l);
                    match self.next()? {
                        Tok::Comma => {}
                        Tok::RParen => return Ok(labels),
                        t => return Err(format!("expected `,` or `)` in a label list, found {t:?}")),
                    }
                }
                t => return Err(format!("expected a label name, found {t:?}")),
            }
        }
    }

    fn primary(&mut self) -> Result<Node, String> {
        match self.next()? {
            Tok::Num => Ok(Node::new(Kind::Scalar, None)),
            Tok::Str(_) => Ok(Node::new(Kind::String, None)),
            Tok::LParen => {
                let inner = self.expr(0)?;
                self.expect(Tok::RParen)?;
                Ok(Node { selector: None, ..inner })
            }
            Tok::LBrace => self.selector(None),
            Tok::Ident(name) if name == "Inf" || name == "NaN" => Ok(Node::new(Kind::Scalar, None)),
            Tok::Ident(name) if AGGREGATIONS.contains(&name.as_str()) && self.is_aggregation_call() => {
                self.aggregation(&name)
            }
            Tok::Ident(name) if is_keyword(&name) => Err(format!("unexpected keyword `{name}`")),
            Tok::Ident(name) if self.peek() == Some(&Tok::LParen) => self.call(&name),
            Tok::Ident(name) if self.peek() == Some(&Tok::LBrace) => {
                self.pos += 1;
                self.selector(Some(name))
            }
            Tok::Ident(name) => self.push_selector(Some(name), Vec::new()),
            t => Err(format!("unexpected {t:?}")),
        }
    }

    fn is_aggregation_call(&self) -> bool {
        matches!(self.peek(), Some(Tok::LParen))
            || matches!(self.peek(), Some(Tok::Ident(s)) if s == "by" || s == "without")
                && self.peek_at(1) == Some(&Tok::LParen)
    }

    /// After `{`: matchers up to `}`.
    fn selector(&mut self, name: Option<String>) -> Result<Node, String> {
        let mut matchers = Vec::new();
        loop {
            match self.next()? {
                Tok::RBrace => break,
                Tok::Ident(label) => {
                    let op = match self.next()? {
                        Tok::Op(op @ ("=" | "!=" | "=~" | "!~")) => op,
                        t => return Err(format!("expected a label matcher after `{label}`, found {t:?}")),
                    };
                    let value = match self.next()? {
                        Tok::Str(v) => v,
                        t => return Err(format!("label `{label}` must be matched against a string, found {t:?}")),
                    };
                    matchers.push(Matcher { label, op, value });
                    match self.next()? {
                        Tok::Comma => {}
                        Tok::RBrace => break,
                        t => return Err(format!("expected `,` or `}}` after a matcher, found {t:?}")),
                    }
                }
                t => return Err(format!("expected a label name in `{{...}}`, found {t:?}")),
            }
        }
        if name.is_none() && !matchers.iter().any(|m| m.op == "=" && !m.value.is_empty()) {
            return Err("a selector without a name needs a non-empty `=` matcher".into());
        }
        self.push_selector(name, matchers)
    }

    fn push_selector(&mut self, name: Option<String>, matchers: Vec<Matcher>) -> Result<Node, String> {
        self.selectors.push(Selector { name, matchers, range_fn: None });
        Ok(Node { kind: Kind::Vector, labels: None, selector: Some(self.selectors.len() - 1) })
    }

    fn aggregation(&mut self, name: &str) -> Result<Node, String> {
        let mut grouping = self.grouping()?;
        self.expect(Tok::LParen)?;
        let parametric = matches!(name, "topk" | "bottomk" | "quantile" | "count_values" | "limitk" | "limit_ratio");
        if parametric {
            let param = self.expr(0)?;
            let want = if name == "count_values" { Kind::String } else { Kind::Scalar };
            if param.kind != want {
                return Err(format!("`{name}` takes a {want:?} parameter first, found a {:?}", param.kind));
            }
            self.expect(Tok::Comma)?;
        }
        let arg = self.expr(0)?;
        if arg.kind != Kind::Vector {
            return Err(format!("`{name}` aggregates an instant vector, found a {:?}", arg.kind));
        }
        if self.peek() == Some(&Tok::Comma) {
            self.pos += 1;
        }
        self.expect(Tok::RParen)?;
        if grouping.is_none() {
            grouping = self.grouping()?;
        }
        let labels = match (name, grouping) {
            ("topk" | "bottomk" | "limitk" | "limit_ratio", _) => arg.labels,
            (_, Some((true, by))) => Some(by),
            (_, Some((false, _))) => None,
            (_, None) => Some(BTreeSet::new()),
        };
        Ok(Node::new(Kind::Vector, labels))
    }

    /// `by (...)` → (true, labels); `without (...)` → (false, labels).
    fn grouping(&mut self) -> Result<Option<(bool, BTreeSet<String>)>, String> {
        if self.eat_ident("by") {
            Ok(Some((true, self.label_list()?)))
        } else if self.eat_ident("without") {
            Ok(Some((false, self.label_list()?)))
        } else {
            Ok(None)
        }
    }

    fn call(&mut self, name: &str) -> Result<Node, String> {
        let (_, sig, ret) =
            FUNCTIONS.iter().find(|(f, _, _)| *f == name).ok_or_else(|| format!("unknown function `{name}`"))?;
        self.expect(Tok::LParen)?;
        let mut args = Vec::new();
        while self.peek() != Some(&Tok::RParen) {
            let arg = self.expr(0)?;
            if let (Some(i), Kind::Matrix) = (arg.selector, arg.kind) {
                self.selectors[i].range_fn = Some(name.to_string());
            }
            args.push(arg);
            if self.peek() == Some(&Tok::Comma) {
                self.pos += 1;
            } else {
                break;
            }
        }
        self.expect(Tok::RParen)?;
        check_arguments(name, sig, &args)?;
        let vector_arg = args.iter().find(|a| a.kind == Kind::Vector || a.kind == Kind::Matrix);
        let labels = match name {
            "vector" => Some(BTreeSet::new()),
            "absent" | "absent_over_time" => None,
            "histogram_quantile" | "histogram_fraction" => vector_arg.and_then(|a| a.labels.clone()).map(|mut l| {
                l.remove("le");
                l
            }),
            "label_replace" | "label_join" => None,
            _ => vector_arg.and_then(|a| a.labels.clone()),
        };
        Ok(Node::new(*ret, labels))
    }
}

fn check_arguments(name: &str, sig: &str, args: &[Node]) -> Result<(), String> {
    let mut required = true;
    let mut want = Vec::new();
    let mut repeat = false;
    for c in sig.chars() {
        match c {
            '?' => required = false,
            '*' => repeat = true,
            k => want.push((
                match k {
                    'm' => Kind::Matrix,
                    'v' => Kind::Vector,
                    's' => Kind::Scalar,
                    _ => Kind::String,
                },
                required,
            )),
        }
    }
    let needed = want.iter().filter(|(_, r)| *r).count();
    if args.len() < needed || (!repeat && args.len() > want.len()) {
        return Err(format!("`{name}` takes {} argument(s), found {}", want.len(), args.len()));
    }
    for (i, arg) in args.iter().enumerate() {
        let kind = want.get(i).or(want.last()).map(|(k, _)| *k).unwrap_or(Kind::Vector);
        if arg.kind != kind {
            return Err(format!("argument {} of `{name}` must be a {kind:?}, found a {:?}", i + 1, arg.kind));
        }
    }
    Ok(())
}

/// Parses `src` as exactly one series selector (`name{...}` or `{__name__="..."}`), as Grafana's
/// `label_values(selector, label)` sends it to the series API.
pub(crate) fn parse_series_selector(src: &str) -> Result<Selector, String> {
    let toks = lex(src)?;
    let mut p = Parser { toks, pos: 0, selectors: Vec::new() };
    let node = p.primary()?;
    if node.selector.is_none() || p.peek().is_some() {
        return Err(format!("`{src}` is not a series selector"));
    }
    Ok(p.selectors.remove(0))
}
