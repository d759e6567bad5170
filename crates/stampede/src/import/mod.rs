//! `stampede import`: tests people already have, as Stampede YAML a person reviews in a pull
//! request, with comments saying where each part came from, credentials turned into
//! `{{env.NAME}}` by the one rule of [`secrets`] (one variable per host and credential, no value
//! kept in a step or a comment), and what could not be converted listed (never dropped
//! silently). Pure: text in, text out.
//!
//! Formats: [`curl`] (command lines as browsers' "copy as cURL" and people write them),
//! [`postman`] (collections v2.1), [`openapi`] (3.0 and 3.1 descriptions), [`har`] (browser
//! recordings, with correlation), [`jmx`] (JMeter plans).

use std::collections::BTreeMap;

pub(crate) mod command;
pub(crate) mod curl;
pub(crate) mod har;
pub(crate) mod jmx;
pub(crate) mod openapi;
pub(crate) mod postman;
pub(crate) mod secrets;
mod shell;
mod xml;

#[cfg(test)]
mod fuzz;

/// The name of the variable a missing origin becomes (`{{env.BASE_URL}}`, or `--base-url`).
pub(crate) const BASE_URL: &str = "BASE_URL";

/// What an import gave: the scenario (YAML with comments), the environment variables its
/// secrets became, and what could not be converted.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Imported {
    pub(crate) yaml: String,
    /// `NAME` → where the secret was (`command 2: header Authorization`); never the value.
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) warnings: Vec<String>,
    /// The data files (CSV) the scenario reads → the columns it uses: a stand-in validates the
    /// output when a file is not there yet.
    pub(crate) data: BTreeMap<String, Vec<String>>,
    /// The variables of `env` that stand for an origin (`{{env.URL}}/users`): validated with a
    /// URL.
    pub(crate) urls: std::collections::BTreeSet<String>,
}

impl Imported {
    /// The import, its comments and warnings without the values its credentials had (they
    /// quote the requests they came from).
    fn scrubbed(mut self, secrets: &secrets::Secrets) -> Self {
        self.yaml = secrets.scrub_comments(&self.yaml);
        self.warnings = self.warnings.iter().map(|w| secrets.scrub(w)).collect();
        self
    }

    /// The head of the file: where it came from, the variables to set, what was not converted.
    fn head(&self, source: &str, what: &str, requests: usize) -> String {
        let load = if what == "jmx" {
            "each thread group is a scenario with its own load: threads × loops iterations"
        } else {
            "set the load below: one VU, one iteration to start with"
        };
        let mut yaml = format!(
            "# Imported from {} by `stampede import {what}`: {requests} request(s). Review it, then run\n\
             # it with `stampede run FILE` ({load}).\n",
            one_line(source)
        );
        if !self.env.is_empty() {
            yaml.push_str("# Secrets became environment variables; set them before running:\n");
            for (var, from) in &self.env {
                yaml.push_str(&format!("#   {}  ({})\n", one_line(var), one_line(from)));
            }
        }
        for w in &self.warnings {
            yaml.push_str(&format!("# not converted: {}\n", one_line(w)));
        }
        yaml
    }
}

/// One step as an importer writes it, under a comment saying where it came from.
#[derive(Debug, Default)]
pub(crate) struct Step {
    pub(crate) comment: String,
    pub(crate) name: String,
    pub(crate) method: String,
    pub(crate) url: String,
    pub(crate) query: Vec<(String, String)>,
    pub(crate) headers: Vec<(String, String)>,
    /// A raw body.
    pub(crate) body: Option<String>,
    /// A JSON body (written as one flow line).
    pub(crate) json: Option<serde_json::Value>,
    /// A form body.
    pub(crate) form: Vec<(String, String)>,
    /// A multipart body, its parts in order.
    pub(crate) multipart: Vec<Part>,
    /// Redirects to follow, when not the file's.
    pub(crate) redirects: Option<u32>,
    /// What of this request was not converted: written in its place, above the step (and in
    /// the list at the head of the file).
    pub(crate) notes: Vec<String>,
    /// The status to check.
    pub(crate) status: Option<u16>,
    /// Correlated values: variable → where the response returns it.
    pub(crate) extract: Vec<(String, Extract)>,
}

impl Step {
    fn write(&self, yaml: &mut String) {
        yaml.push_str(&format!("      # {}\n", one_line(&self.comment)));
        for note in &self.notes {
            yaml.push_str(&format!("      # not converted: {}\n", one_line(note)));
        }
        yaml.push_str(&format!("      - name: {}\n        request:\n", scalar(&self.name)));
        if self.method != "GET" {
            yaml.push_str(&format!("          method: {}\n", self.method));
        }
        yaml.push_str(&format!("          url: {}\n", scalar(&self.url)));
        for (label, pairs) in [("query", &self.query), ("headers", &self.headers), ("form", &self.form)] {
            if !pairs.is_empty() {
                yaml.push_str(&format!("          {label}:\n"));
                for (k, v) in pairs {
                    let key = scalar(k);
                    if key.chars().count() > 1000 {
                        // Past YAML's 1024 characters an implicit key is no key: an explicit one.
                        yaml.push_str(&format!("            ? {key}\n            : {}\n", scalar(v)));
                    } else {
                        yaml.push_str(&format!("            {key}: {}\n", scalar(v)));
                    }
                }
            }
        }
        if let Some(b) = self.body.as_ref().filter(|b| !b.is_empty()) {
            yaml.push_str(&format!("          body: {}\n", block_or_scalar(b, 12)));
        }
        if !self.multipart.is_empty() {
            yaml.push_str("          multipart:\n");
            for p in &self.multipart {
                yaml.push_str(&format!("            - name: {}\n", scalar(&p.name)));
                for (key, v) in [
                    ("value", &p.value),
                    ("file", &p.file),
                    ("filename", &p.filename),
                    ("contentType", &p.content_type),
                ] {
                    if let Some(v) = v {
                        yaml.push_str(&format!("              {key}: {}\n", block_or_scalar(v, 16)));
                    }
                }
            }
        }
        if let Some(r) = self.redirects {
            yaml.push_str(&format!("          redirects: {r}\n"));
        }
        if let Some(j) = &self.json {
            yaml.push_str(&format!("          json: {}\n", serde_json::to_string(j).unwrap_or_default()));
        }
        if let Some(status) = self.status {
            yaml.push_str(&format!("        check: {{status: {status}}}\n"));
        }
        if !self.extract.is_empty() {
            yaml.push_str("        extract:  # correlated: later requests send these\n");
            for (var, how) in &self.extract {
                let spec = match how {
                    Extract::Json(path) => format!("{{json: {}}}", flow_scalar(path)),
                    Extract::Header(name) => format!("{{header: {}}}", flow_scalar(name)),
                    Extract::Regex(regex, _) => format!("{{regex: {}, group: 1}}", double_quoted(regex)),
                };
                yaml.push_str(&format!("          {}: {spec}\n", scalar(var)));
            }
        }
    }
}

/// Where a correlated value is in a response.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Extract {
    /// A JSON path of the body.
    Json(String),
    /// A header (`Location`, `ETag`).
    Header(String),
    /// A regular expression of the body with one group, and the name it names (an HTML form
    /// field's).
    Regex(String, String),
}

impl Extract {
    /// What the variable is named after: a path's last field, a header's or a field's name.
    pub(crate) fn hint(&self) -> &str {
        match self {
            Extract::Json(p) => p,
            Extract::Header(n) | Extract::Regex(_, n) => n,
        }
    }
}

/// One part of a multipart body: a field's `value`, or a `file` (its name sent as `filename`)
/// with a content type.
#[derive(Debug, Default)]
pub(crate) struct Part {
    pub(crate) name: String,
    pub(crate) value: Option<String>,
    pub(crate) file: Option<String>,
    pub(crate) filename: Option<String>,
    pub(crate) content_type: Option<String>,
}

/// `name`, or `name (2)`, `name (3)`… when an earlier step has it.
pub(crate) fn unique_name(taken: &mut BTreeMap<String, usize>, name: String) -> String {
    let seen = taken.entry(name.clone()).or_insert(0);
    *seen += 1;
    if *seen > 1 { format!("{name} ({seen})") } else { name }
}

/// The file's `name`, `baseUrl` (when there is one) and a load of one VU, one iteration: what
/// an import starts from.
pub(crate) fn write_top(yaml: &mut String, name: &str, base: Option<&str>) {
    yaml.push_str(&format!("name: {}\n", scalar(name)));
    if let Some(b) = base {
        yaml.push_str(&format!("baseUrl: {}\n", scalar(b)));
    }
    yaml.push_str("load: {executor: constant-vus, vus: 1, iterations: 1}\n");
}

/// The scenario's one scenario, `name`, with `steps`.
pub(crate) fn write_steps(yaml: &mut String, name: &str, steps: &[Step]) {
    yaml.push_str(&format!("scenarios:\n  - name: {name}\n    steps:\n"));
    for s in steps {
        s.write(yaml);
    }
}

/// A variable the output reads that is not a credential (a Postman environment's, a JMeter
/// property): `apiHost` → `APIHOST`. Credentials are named by [`secrets::var_name`].
pub(crate) fn env_name(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect()
}

/// `text` sent as it is by a Stampede template: what would read as a hole (`{{`) or as another
/// tool's syntax (`${`, refused) written as an expression of its own text.
pub(crate) fn literal(text: &str) -> String {
    if !text.contains("{{") && !text.contains("${") {
        return text.to_string();
    }
    text.replace("{{", "{{ '{{' }}").replace("${", "{{ '$' }}{")
}

/// `text` for a `#` comment: its line breaks (all YAML's: CR, LF, NEL, LS, PS) and the
/// characters YAML allows nowhere (controls but tab, byte-order marks) made spaces, so that it
/// neither ends the comment (a warning quoting a multi-line command would otherwise put the
/// rest of it in the scenario, unscrubbed) nor makes the file unreadable.
pub(crate) fn one_line(text: &str) -> String {
    text.chars().map(|c| if c != '\t' && not_printable(c) { ' ' } else { c }).collect()
}

/// Line breaks and the characters a YAML stream may not hold as they are.
fn not_printable(c: char) -> bool {
    c < ' '
        || ('\u{7f}'..='\u{9f}').contains(&c)
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}')
}

/// A YAML scalar on one line: quoted when plain text would be read otherwise. Text with line
/// breaks or characters YAML does not allow as they are, which serde_yaml writes as a block
/// (`|-` and lines below, indented for the top level: wrong under a key of a step) or raw, is
/// double-quoted with escapes instead.
pub(crate) fn scalar(text: &str) -> String {
    if text.chars().any(not_printable) {
        return double_quoted(text); // serde_yaml writes some of them as they are (LS, PS)
    }
    match serde_yaml::to_string(text) {
        Ok(s) if !s.starts_with(['|', '>']) && !s.trim_end().contains('\n') => s.trim_end().to_string(),
        _ => double_quoted(text),
    }
}

/// `text` as a YAML literal block scalar (`|`, its lines below, indented by `indent` spaces) when
/// it has several lines a block keeps as they are — a JSON body as API docs write it reads as
/// itself in review — else as [`scalar`]. Not a block: carriage returns, characters YAML does
/// not allow, a line of spaces only (a block cannot keep those), a single line.
pub(crate) fn block_or_scalar(text: &str, indent: usize) -> String {
    let blockable = text.contains('\n')
        && !text.chars().any(|c| c != '\n' && c != '\t' && not_printable(c))
        && !text.split('\n').any(|l| !l.is_empty() && l.trim_matches(' ').is_empty())
        && !text.starts_with('\n');
    if !blockable {
        return scalar(text);
    }
    let body = text.trim_end_matches('\n');
    let chomp = match text.len() - body.len() {
        0 => "-",
        1 => "",
        _ => "+",
    };
    // A first line that starts with a space or tab needs the indentation said.
    let indicator = if body.starts_with([' ', '\t']) { "2" } else { "" };
    let pad = " ".repeat(indent);
    let mut out = format!("|{indicator}{chomp}");
    for line in text.strip_suffix('\n').unwrap_or(text).split('\n') {
        out.push('\n');
        if !line.is_empty() {
            out.push_str(&pad);
            out.push_str(line);
        }
    }
    out
}

/// A YAML scalar inside a flow collection (`{json: …}`), where `[`, `]`, `{`, `}` and `,` end a
/// plain one: quoted when it holds any.
pub(crate) fn flow_scalar(text: &str) -> String {
    if text.contains(['[', ']', '{', '}', ',']) { double_quoted(text) } else { scalar(text) }
}

/// `text` as a YAML double-quoted scalar: `"` and `\` escaped, and so are line breaks and
/// the characters YAML does not allow as they are (controls, LS, PS, byte-order marks).
fn double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if not_printable(c) => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the importers' fuzz test: a curl URL with a line break in it was written as a
    /// block scalar indented for the top level, under `url:` of a step, and the file did not
    /// load. Every text, written where steps put it, reads back as itself.
    #[test]
    fn every_text_written_as_a_scalar_under_a_step_reads_back_as_itself() {
        let texts = [
            "plain",
            "a\nb",
            "line\n",
            "\n",
            "\n\n x",
            "{\n  \"a\": 1\n}",
            "  lead\n  two\n",
            "a\n\n\n",
            "a\n   \nb",
            "\tt\nx",
            "a\n# not a comment\n- not a list",
            " lead",
            "x\r\ny",
            "tab\there",
            "nel\u{85}x",
            "ls\u{2028}x",
            "ctl\u{1}\u{7f}\u{9f}\u{feff}",
            "q\"\\'",
            "é😀",
            "- a",
            "{{baseUrl}}/x",
            "#",
            "",
        ];
        for text in texts {
            let yaml = format!(
                "steps:\n  - request:\n      url: {}\n      body: {}\n      headers:\n        {}: v\n",
                scalar(text),
                block_or_scalar(text, 8),
                scalar(text)
            );
            let doc: serde_yaml::Value =
                serde_yaml::from_str(&yaml).unwrap_or_else(|e| panic!("{text:?}: {e}\n{yaml}"));
            let request = &doc["steps"][0]["request"];
            assert_eq!(request["url"].as_str(), Some(text), "{yaml}");
            assert_eq!(request["body"].as_str(), Some(text), "{yaml}");
            let headers = request["headers"].as_mapping().unwrap();
            assert_eq!(headers.keys().next().and_then(serde_yaml::Value::as_str), Some(text), "{yaml}");
        }
        // A header name past YAML's 1,024 characters for a key (found by the fuzz test too).
        let long = "(".repeat(2000) + "Accept";
        let out = curl::curl(&format!("curl -H '{long}: a' http://127.0.0.1:8080/"), "c.sh").unwrap();
        let file = stampede_engine::parse_str(&out.yaml, std::path::Path::new("c.yaml")).unwrap();
        assert_eq!(file.scenarios[0].steps[0].request.as_ref().unwrap().headers[&long], "a");
        // A URL with a line break is no URL to curl ("Malformed input"), nor here.
        assert!(curl::curl("curl 'http://127.0.0.1:8080/a\nb' -d x", "c.sh").is_err());
        let out = curl::curl("curl http://127.0.0.1:8080/a -d $'{\\n  \"a\": 1\\n}\\n'", "c.sh").unwrap();
        assert!(out.yaml.contains("body: |\n            {\n              \"a\": 1\n            }\n"), "{}", out.yaml);
        let file = stampede_engine::parse_str(&out.yaml, std::path::Path::new("c.yaml")).unwrap();
        assert_eq!(file.scenarios[0].steps[0].request.as_ref().unwrap().body.as_deref(), Some("{\n  \"a\": 1\n}\n"));
    }

    /// 200,000 nested elements, arrays or mappings: a clear error naming the depth, never a
    /// stack overflow (XML: [`xml::DEPTH`]; JSON: serde_json's 128 levels; YAML: serde_yaml's).
    #[test]
    fn inputs_nested_past_the_budget_are_refused_not_a_stack_overflow() {
        let n = 200_000;
        let json = format!("{}{}", "[".repeat(n), "]".repeat(n));
        let har = format!("{{\"log\": {{\"entries\": {json}}}}}");
        assert!(har::har(&har, "deep.har", false).unwrap_err().contains("recursion limit"), "har");
        let postman = format!(
            "{{\"info\": {{\"schema\": \"https://schema.getpostman.com/json/collection/v2.1.0/\"}}, \"item\": {json}}}"
        );
        assert!(postman::postman(&postman, "deep.json", None).unwrap_err().contains("recursion limit"), "postman");
        let openapi = format!("{{\"openapi\": \"3.0.0\", \"paths\": {json}}}");
        assert!(openapi::openapi(&openapi, "deep.json").unwrap_err().contains("recursion limit"), "openapi json");
        let yaml = format!("openapi: 3.0.0\npaths: {json}\n");
        let e = openapi::openapi(&yaml, "deep.yaml").unwrap_err();
        assert!(e.contains("recursion limit"), "openapi yaml: {e}");
        let jmx = format!("<jmeterTestPlan>{}", "<hashTree>".repeat(n));
        assert!(jmx::jmx(&jmx, "deep.jmx").unwrap_err().contains("nest deeper than 1000 levels"), "jmx");
    }
}
