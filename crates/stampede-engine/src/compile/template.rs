//! `{{name}}` templates, compiled once.
//!
//! Constants (`vars`, `baseUrl`, `{{env.NAME}}`) are folded in at compile time, so a
//! template made only of constants renders to a fixed string with no work per request.
//! Per-VU values (extracted from responses) become numbered slots.

use std::collections::HashMap;

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
    /// Constant values: `vars`, `baseUrl`.
    pub consts: HashMap<String, String>,
    /// Per-VU values and their slot numbers.
    pub slots: HashMap<String, usize>,
    /// Environment lookups (`{{env.NAME}}`); `None` reads the process environment.
    pub env: Option<HashMap<String, String>>,
}

impl Scope {
    fn env_var(&self, name: &str) -> Option<String> {
        match &self.env {
            Some(map) => map.get(name).cloned(),
            None => std::env::var(name).ok(),
        }
    }
}

/// Why a template does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("unknown variable `{0}` in template (define it under `vars`, or extract it in an earlier step)")]
    UnknownVariable(String),
    #[error("environment variable `{0}` is not set")]
    EnvNotSet(String),
    #[error("unclosed `{{{{` in template")]
    Unclosed,
    #[error("empty `{{{{}}}}` in template")]
    EmptyName,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Lit(String),
    Slot(usize),
}

/// A compiled template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
    escape: Escape,
}

impl Template {
    /// Compiles `src`, resolving every name against `scope`.
    pub fn compile(src: &str, scope: &Scope, escape: Escape) -> Result<Template, TemplateError> {
        let mut parts: Vec<Part> = Vec::new();
        let mut lit = String::new();
        let mut rest = src;
        while let Some(open) = rest.find("{{") {
            lit.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            let close = after.find("}}").ok_or(TemplateError::Unclosed)?;
            let name = after[..close].trim();
            if name.is_empty() {
                return Err(TemplateError::EmptyName);
            }
            if let Some(env_name) = name.strip_prefix("env.") {
                let value = scope.env_var(env_name).ok_or_else(|| TemplateError::EnvNotSet(env_name.to_string()))?;
                push_escaped(&mut lit, &value, escape);
            } else if let Some(value) = scope.consts.get(name) {
                push_escaped(&mut lit, value, escape);
            } else if let Some(&slot) = scope.slots.get(name) {
                if !lit.is_empty() {
                    parts.push(Part::Lit(std::mem::take(&mut lit)));
                }
                parts.push(Part::Slot(slot));
            } else {
                return Err(TemplateError::UnknownVariable(name.to_string()));
            }
            rest = &after[close + 2..];
        }
        lit.push_str(rest);
        if !lit.is_empty() || parts.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Ok(Template { parts, escape })
    }

    /// A template that is a fixed string.
    pub fn literal(text: impl Into<String>) -> Template {
        Template { parts: vec![Part::Lit(text.into())], escape: Escape::None }
    }

    /// The fixed value, when the template has no per-VU parts.
    pub fn as_const(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [Part::Lit(s)] => Some(s),
            _ => None,
        }
    }

    /// Appends the rendered value to `out`; `slots` holds the VU's values.
    pub fn render_into(&self, slots: &[String], out: &mut Vec<u8>) {
        for part in &self.parts {
            match part {
                Part::Lit(s) => out.extend_from_slice(s.as_bytes()),
                Part::Slot(i) => {
                    let value = slots.get(*i).map(String::as_str).unwrap_or("");
                    match self.escape {
                        Escape::None => out.extend_from_slice(value.as_bytes()),
                        Escape::JsonString => {
                            let mut s = String::new();
                            push_escaped(&mut s, value, Escape::JsonString);
                            out.extend_from_slice(s.as_bytes());
                        }
                    }
                }
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
}
