//! A container's environment, resolved the way the kubelet resolves it: service variables first,
//! then `envFrom`, then `env` (later entries win), with `$(VAR)` references expanded against what
//! is already defined, and downward-API `fieldRef`s read from the pod. Pure functions: the
//! ConfigMaps and Secrets a pod refers to are fetched by the agent beforehand and passed in.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::error::{Error, Result};

/// The address every pod and the node report: the control plane and the processes are local.
pub const LOCAL_IP: &str = "127.0.0.1";

/// The data of the ConfigMaps and Secrets a pod refers to, by name, in the pod's namespace.
/// Secret values are already decoded.
#[derive(Debug, Default, Clone)]
pub struct Referenced {
    /// Each ConfigMap's data: ConfigMap name → key → value (one that does not exist is absent).
    pub config_maps: BTreeMap<String, BTreeMap<String, String>>,
    /// Each Secret's data, decoded: Secret name → key → value.
    pub secrets: BTreeMap<String, BTreeMap<String, String>>,
}

/// Names of the ConfigMaps and Secrets that a container's `env`/`envFrom` refer to.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct References {
    /// The names of the ConfigMaps read.
    pub config_maps: BTreeSet<String>,
    /// The names of the Secrets read.
    pub secrets: BTreeSet<String>,
}

/// Lists what `containers` read from ConfigMaps and Secrets, so the agent can fetch them.
pub fn references<'a>(containers: impl IntoIterator<Item = &'a Container>) -> References {
    let mut refs = References::default();
    for c in containers {
        for from in c.env_from.iter().flatten() {
            if let Some(r) = &from.config_map_ref {
                refs.config_maps.insert(r.name.clone());
            }
            if let Some(r) = &from.secret_ref {
                refs.secrets.insert(r.name.clone());
            }
        }
        for var in c.env.iter().flatten() {
            let Some(from) = &var.value_from else { continue };
            if let Some(r) = &from.config_map_key_ref {
                refs.config_maps.insert(r.name.clone());
            }
            if let Some(r) = &from.secret_key_ref {
                refs.secrets.insert(r.name.clone());
            }
        }
    }
    refs
}

/// Resolves the environment of `container` in `pod`. `base` holds the variables every container
/// gets before its own (the `KUBERNETES_SERVICE_*` variables, `HOSTNAME`); the result contains
/// them too, in definition order with later definitions replacing earlier ones.
pub fn resolve(
    pod: &Pod,
    container: &Container,
    base: &[(String, String)],
    referenced: &Referenced,
) -> Result<Vec<(String, String)>> {
    let mut env = Env::default();
    for (k, v) in base {
        env.set(k, v.clone());
    }
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or("");
        if let Some(r) = &from.config_map_ref {
            match referenced.config_maps.get(&r.name) {
                Some(data) => data.iter().for_each(|(k, v)| env.set(&format!("{prefix}{k}"), v.clone())),
                None if r.optional == Some(true) => {}
                None => return Err(Error::MissingReference(format!("configmap \"{}\" not found", r.name))),
            }
        }
        if let Some(r) = &from.secret_ref {
            match referenced.secrets.get(&r.name) {
                Some(data) => data.iter().for_each(|(k, v)| env.set(&format!("{prefix}{k}"), v.clone())),
                None if r.optional == Some(true) => {}
                None => return Err(Error::MissingReference(format!("secret \"{}\" not found", r.name))),
            }
        }
    }
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (_, Some(from)) => {
                if let Some(f) = &from.field_ref {
                    Some(field_ref(pod, &f.field_path)?)
                } else if let Some(r) = &from.config_map_key_ref {
                    key_ref(&referenced.config_maps, "configmap", &r.name, &r.key, r.optional)?
                } else if let Some(r) = &from.secret_key_ref {
                    key_ref(&referenced.secrets, "secret", &r.name, &r.key, r.optional)?
                } else if let Some(r) = &from.resource_field_ref {
                    return Err(Error::Unsupported(format!(
                        "env {}: resourceFieldRef {} is not supported by the test node agent",
                        var.name, r.resource
                    )));
                } else {
                    None
                }
            }
            (Some(v), None) => Some(expand(v, |name| env.get(name))),
            (None, None) => Some(String::new()),
        };
        if let Some(value) = value {
            env.set(&var.name, value);
        }
    }
    Ok(env.vars)
}

fn key_ref(
    objects: &BTreeMap<String, BTreeMap<String, String>>,
    kind: &str,
    name: &str,
    key: &str,
    optional: Option<bool>,
) -> Result<Option<String>> {
    match objects.get(name).map(|data| data.get(key)) {
        Some(Some(v)) => Ok(Some(v.clone())),
        _ if optional == Some(true) => Ok(None),
        Some(None) => Err(Error::MissingReference(format!("couldn't find key {key} in {kind} \"{name}\""))),
        None => Err(Error::MissingReference(format!("{kind} \"{name}\" not found"))),
    }
}

/// The value of a downward-API field path in an environment variable (the paths the kubelet
/// accepts there).
pub fn field_ref(pod: &Pod, path: &str) -> Result<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let in_map =
        |map: Option<&BTreeMap<String, String>>, key: &str| map.and_then(|m| m.get(key)).cloned().unwrap_or_default();
    let value = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => {
            spec.and_then(|s| s.service_account_name.clone()).unwrap_or_else(|| "default".into())
        }
        "status.hostIP" | "status.hostIPs" | "status.podIP" | "status.podIPs" => LOCAL_IP.into(),
        _ => {
            if let Some(key) = subscript(path, "metadata.labels") {
                in_map(meta.labels.as_ref(), &key)
            } else if let Some(key) = subscript(path, "metadata.annotations") {
                in_map(meta.annotations.as_ref(), &key)
            } else {
                return Err(Error::Unsupported(format!("fieldRef {path} is not supported")));
            }
        }
    };
    Ok(value)
}

/// `metadata.labels['key']` → `key` (single or double quotes).
fn subscript(path: &str, prefix: &str) -> Option<String> {
    let rest = path.strip_prefix(prefix)?.strip_prefix('[')?.strip_suffix(']')?;
    let key = rest
        .strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .or_else(|| rest.strip_prefix('"').and_then(|r| r.strip_suffix('"')))?;
    Some(key.to_string())
}

/// Kubernetes' `$(VAR)` expansion: a reference to a defined variable is replaced by its value,
/// `$$` is an escaped `$`, and anything else (including references to undefined variables) is kept
/// as written.
pub fn expand<'a>(input: &str, lookup: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(') {
            match body.find(')') {
                Some(end) => {
                    let name = &body[..end];
                    match lookup(name) {
                        Some(value) => out.push_str(value),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &body[end + 1..];
                }
                None => {
                    out.push_str(&rest[pos..]);
                    rest = "";
                }
            }
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Ordered variables where a later definition replaces an earlier one in place.
#[derive(Default)]
struct Env {
    vars: Vec<(String, String)>,
}

impl Env {
    fn set(&mut self, name: &str, value: String) {
        match self.vars.iter_mut().find(|(k, _)| k == name) {
            Some(slot) => slot.1 = value,
            None => self.vars.push((name.to_string(), value)),
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(yaml: &str) -> Pod {
        serde_yaml::from_str(yaml).unwrap()
    }

    const JOB_POD: &str = r#"
metadata:
  name: runner-1-abcde
  namespace: load
  uid: 1234
  labels: {batch.kubernetes.io/job-completion-index: "1"}
  annotations: {batch.kubernetes.io/job-completion-index: "1"}
spec:
  nodeName: stampede-node
  serviceAccountName: runner
  containers:
    - name: main
      image: busybox
      envFrom:
        - configMapRef: {name: settings}
          prefix: CFG_
      env:
        - {name: JOB_COMPLETION_INDEX, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
        - {name: SA, valueFrom: {fieldRef: {fieldPath: spec.serviceAccountName}}}
        - {name: IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
        - {name: GREETING, value: "runner $(JOB_COMPLETION_INDEX) of $(POD_NAMESPACE) costs $$(JOB_COMPLETION_INDEX) $(NOPE)"}
        - {name: TOKEN, valueFrom: {secretKeyRef: {name: creds, key: token}}}
        - {name: CFG_mode, value: overridden}
"#;

    fn referenced() -> Referenced {
        let mut r = Referenced::default();
        r.config_maps.insert(
            "settings".into(),
            [("mode".to_string(), "fast".to_string()), ("level".to_string(), "3".to_string())].into(),
        );
        r.secrets.insert("creds".into(), [("token".to_string(), "s3cret".to_string())].into());
        r
    }

    fn get<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn job_pod_env_resolves_downward_api_and_references() {
        let p = pod(JOB_POD);
        let c = &p.spec.as_ref().unwrap().containers[0];
        let base = vec![("HOSTNAME".to_string(), "runner-1-abcde".to_string())];
        let env = resolve(&p, c, &base, &referenced()).unwrap();
        assert_eq!(get(&env, "JOB_COMPLETION_INDEX"), Some("1"));
        assert_eq!(get(&env, "POD_NAME"), Some("runner-1-abcde"));
        assert_eq!(get(&env, "POD_NAMESPACE"), Some("load"));
        assert_eq!(get(&env, "SA"), Some("runner"));
        assert_eq!(get(&env, "IP"), Some(LOCAL_IP));
        assert_eq!(get(&env, "TOKEN"), Some("s3cret"));
        assert_eq!(get(&env, "CFG_level"), Some("3"));
        assert_eq!(get(&env, "CFG_mode"), Some("overridden"), "env wins over envFrom");
        assert_eq!(get(&env, "HOSTNAME"), Some("runner-1-abcde"));
        assert_eq!(get(&env, "GREETING"), Some("runner 1 of load costs $(JOB_COMPLETION_INDEX) $(NOPE)"));
    }

    #[test]
    fn references_lists_what_the_agent_must_fetch() {
        let p = pod(JOB_POD);
        let refs = references(&p.spec.as_ref().unwrap().containers);
        assert_eq!(refs.config_maps, BTreeSet::from(["settings".to_string()]));
        assert_eq!(refs.secrets, BTreeSet::from(["creds".to_string()]));
    }

    #[test]
    fn missing_secret_is_a_config_error_unless_optional() {
        let p = pod(JOB_POD);
        let c = &p.spec.as_ref().unwrap().containers[0];
        let mut r = referenced();
        r.secrets.clear();
        let err = resolve(&p, c, &[], &r).unwrap_err();
        assert!(matches!(&err, Error::MissingReference(m) if m.contains("secret \"creds\"")), "{err}");
    }

    #[test]
    fn unknown_field_paths_are_rejected() {
        let p = pod(JOB_POD);
        assert!(field_ref(&p, "metadata.generation").is_err());
        assert_eq!(field_ref(&p, "metadata.labels[\"batch.kubernetes.io/job-completion-index\"]").unwrap(), "1");
        assert_eq!(field_ref(&p, "metadata.labels['absent']").unwrap(), "");
    }

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let vars = [("A", "x"), ("B", "y")];
        let look = |n: &str| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| *v);
        assert_eq!(expand("$(A)-$(B)", look), "x-y");
        assert_eq!(expand("$$(A) $ $(C) $(A", look), "$(A) $ $(C) $(A");
        assert_eq!(expand("cost: 5$", look), "cost: 5$");
    }
}
