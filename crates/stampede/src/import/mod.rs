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

pub(crate) mod curl;
pub(crate) mod har;
pub(crate) mod jmx;
pub(crate) mod openapi;
pub(crate) mod postman;
pub(crate) mod secrets;
mod xml;

#[cfg(test)]
mod fuzz;

/// What an import gave: the scenario (YAML with comments), the environment variables its
/// secrets became, and what could not be converted.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Imported {
    pub(crate) yaml: String,
    /// `NAME` → where the secret was (`command 2: header Authorization`); never the value.
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) warnings: Vec<String>,
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
    /// The status to check.
    pub(crate) status: Option<u16>,
    /// Correlated values: variable → the JSON path of the response that returns it.
    pub(crate) extract: Vec<(String, String)>,
}

impl Step {
    fn write(&self, yaml: &mut String) {
        yaml.push_str(&format!("      # {}\n", one_line(&self.comment)));
        yaml.push_str(&format!("      - name: {}\n        request:\n", scalar(&self.name)));
        if self.method != "GET" {
            yaml.push_str(&format!("          method: {}\n", self.method));
        }
        yaml.push_str(&format!("          url: {}\n", scalar(&self.url)));
        for (label, pairs) in [("query", &self.query), ("headers", &self.headers), ("form", &self.form)] {
            if !pairs.is_empty() {
                yaml.push_str(&format!("          {label}:\n"));
                for (k, v) in pairs {
                    yaml.push_str(&format!("            {}: {}\n", scalar(k), scalar(v)));
                }
            }
        }
        if let Some(b) = self.body.as_ref().filter(|b| !b.is_empty()) {
            yaml.push_str(&format!("          body: {}\n", scalar(b)));
        }
        if let Some(j) = &self.json {
            yaml.push_str(&format!("          json: {}\n", serde_json::to_string(j).unwrap_or_default()));
        }
        if let Some(status) = self.status {
            yaml.push_str(&format!("        check: {{status: {status}}}\n"));
        }
        if !self.extract.is_empty() {
            yaml.push_str("        extract:  # correlated: later requests send these\n");
            for (var, path) in &self.extract {
                yaml.push_str(&format!("          {var}: {{json: {}}}\n", scalar(path)));
            }
        }
    }
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

/// `text` for a `#` comment: its line breaks (all YAML's: CR, LF, NEL, LS, PS) made spaces, so
/// that it does not end the comment (a warning quoting a multi-line command would otherwise
/// put the rest of it in the scenario, unscrubbed, and make the file unreadable).
pub(crate) fn one_line(text: &str) -> String {
    text.replace(['\r', '\n', '\u{85}', '\u{2028}', '\u{2029}'], " ")
}

/// A YAML scalar: quoted when plain text would be read otherwise.
pub(crate) fn scalar(text: &str) -> String {
    serde_yaml::to_string(text).map(|s| s.trim_end().to_string()).unwrap_or_else(|_| format!("{text:?}"))
}
