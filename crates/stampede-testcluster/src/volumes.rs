//! Pod volumes without mount namespaces. The agent writes each supported volume's files under
//! the pod's folder (`<pod>/volumes/<volume>/…`) and rewrites every container argument,
//! environment value and working directory that names a path under one of the container's
//! `mountPath`s to the matching path in that folder. So `--scenario /etc/stampede/scenario.yaml`
//! with a ConfigMap mounted at `/etc/stampede` reads the ConfigMap's `scenario.yaml`. A program
//! that opens a mounted path it was not given on its command line or in its environment will not
//! find it.
//!
//! Supported: `configMap`, `secret`, `emptyDir`, `downwardAPI`, `projected` (configMap, secret,
//! downwardAPI and serviceAccountToken sources — the `kube-api-access-*` volume every pod gets)
//! and `hostPath` (the host path itself). Other volume types are an error.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, KeyToPath, Pod, Volume};

use crate::env::{Referenced, References, field_ref};
use crate::error::{Error, Result};

/// One file of a volume, relative to the volume's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeFile {
    /// The file's path, relative to the volume's folder (an item's `path`, or the key).
    pub path: String,
    /// The file's bytes.
    pub contents: Vec<u8>,
    /// Secret material (written readable by the owner only).
    pub private: bool,
}

/// What to create for one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeContent {
    /// A folder under the pod's `volumes/` with these files (none for `emptyDir`).
    Files(Vec<VolumeFile>),
    /// A path on the host, used as it is.
    Host(PathBuf),
}

/// The ConfigMaps and Secrets the pod's volumes read.
pub fn references(pod: &Pod) -> References {
    let mut refs = References::default();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        if let Some(cm) = &v.config_map {
            refs.config_maps.insert(cm.name.clone());
        }
        if let Some(name) = v.secret.as_ref().and_then(|s| s.secret_name.clone()) {
            refs.secrets.insert(name);
        }
        for source in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            if let Some(cm) = &source.config_map {
                refs.config_maps.insert(cm.name.clone());
            }
            if let Some(s) = &source.secret {
                refs.secrets.insert(s.name.clone());
            }
        }
    }
    refs
}

/// The content of every volume of `pod`, by volume name. `token` is the pod's ServiceAccount
/// token, for projected `serviceAccountToken` sources.
pub fn contents(pod: &Pod, referenced: &Referenced, token: Option<&str>) -> Result<BTreeMap<String, VolumeContent>> {
    let mut out = BTreeMap::new();
    for v in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        out.insert(v.name.clone(), volume(pod, v, referenced, token)?);
    }
    Ok(out)
}

fn volume(pod: &Pod, v: &Volume, referenced: &Referenced, token: Option<&str>) -> Result<VolumeContent> {
    let mut files = Vec::new();
    if let Some(cm) = &v.config_map {
        key_files(&mut files, &referenced.config_maps, "configmap", &cm.name, cm.items.as_deref(), cm.optional, false)?;
    } else if let Some(s) = &v.secret {
        let name = s.secret_name.clone().unwrap_or_default();
        key_files(&mut files, &referenced.secrets, "secret", &name, s.items.as_deref(), s.optional, true)?;
    } else if v.empty_dir.is_some() {
    } else if let Some(d) = &v.downward_api {
        downward_files(&mut files, pod, d.items.as_deref().unwrap_or_default())?;
    } else if let Some(p) = &v.projected {
        for source in p.sources.iter().flatten() {
            if let Some(cm) = &source.config_map {
                let items = cm.items.as_deref();
                key_files(&mut files, &referenced.config_maps, "configmap", &cm.name, items, cm.optional, false)?;
            }
            if let Some(s) = &source.secret {
                key_files(&mut files, &referenced.secrets, "secret", &s.name, s.items.as_deref(), s.optional, true)?;
            }
            if let Some(d) = &source.downward_api {
                downward_files(&mut files, pod, d.items.as_deref().unwrap_or_default())?;
            }
            if let Some(t) = &source.service_account_token {
                let token = token.ok_or_else(|| {
                    Error::Unsupported(format!("volume {}: no ServiceAccount token to project", v.name))
                })?;
                files.push(VolumeFile { path: t.path.clone(), contents: token.as_bytes().to_vec(), private: true });
            }
        }
    } else if let Some(h) = &v.host_path {
        return Ok(VolumeContent::Host(PathBuf::from(&h.path)));
    } else {
        return Err(Error::Unsupported(format!(
            "volume {}: only configMap, secret, emptyDir, downwardAPI, projected and hostPath volumes are supported",
            v.name
        )));
    }
    Ok(VolumeContent::Files(files))
}

fn key_files(
    files: &mut Vec<VolumeFile>,
    objects: &BTreeMap<String, BTreeMap<String, String>>,
    kind: &str,
    name: &str,
    items: Option<&[KeyToPath]>,
    optional: Option<bool>,
    private: bool,
) -> Result<()> {
    let Some(data) = objects.get(name) else {
        if optional == Some(true) {
            return Ok(());
        }
        return Err(Error::MissingReference(format!("{kind} \"{name}\" not found")));
    };
    match items {
        Some(items) => {
            for item in items {
                match data.get(&item.key) {
                    Some(v) => {
                        files.push(VolumeFile { path: item.path.clone(), contents: v.clone().into_bytes(), private })
                    }
                    None if optional == Some(true) => {}
                    None => {
                        return Err(Error::MissingReference(format!(
                            "couldn't find key {} in {kind} \"{name}\"",
                            item.key
                        )));
                    }
                }
            }
        }
        None => files.extend(data.iter().map(|(k, v)| VolumeFile {
            path: k.clone(),
            contents: v.clone().into_bytes(),
            private,
        })),
    }
    Ok(())
}

fn downward_files(files: &mut Vec<VolumeFile>, pod: &Pod, items: &[DownwardAPIVolumeFile]) -> Result<()> {
    for item in items {
        let Some(f) = &item.field_ref else {
            return Err(Error::Unsupported(format!("downwardAPI {}: only fieldRef is supported", item.path)));
        };
        let map_lines = |m: Option<&BTreeMap<String, String>>| {
            m.into_iter().flatten().map(|(k, v)| format!("{k}={v:?}\n")).collect::<String>()
        };
        let value = match f.field_path.as_str() {
            "metadata.labels" => map_lines(pod.metadata.labels.as_ref()),
            "metadata.annotations" => map_lines(pod.metadata.annotations.as_ref()),
            path => field_ref(pod, path)?,
        };
        files.push(VolumeFile { path: item.path.clone(), contents: value.into_bytes(), private: false });
    }
    Ok(())
}

/// Where each of `container`'s mount paths lives on the host, longest mount path first.
/// `volumes_root` is the pod's `volumes/` folder.
pub fn mount_table(
    container: &Container,
    volumes: &BTreeMap<String, VolumeContent>,
    volumes_root: &Path,
) -> Result<Vec<(String, PathBuf)>> {
    let mut table = Vec::new();
    for m in container.volume_mounts.iter().flatten() {
        let base = match volumes.get(&m.name) {
            Some(VolumeContent::Host(p)) => p.clone(),
            Some(VolumeContent::Files(_)) => volumes_root.join(&m.name),
            None => return Err(Error::Config(format!("volumeMount {}: no volume of that name", m.name))),
        };
        let target = match m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            Some(sub) => base.join(sub),
            None => base,
        };
        table.push((m.mount_path.trim_end_matches('/').to_string(), target));
    }
    table.sort_by_key(|(mount, _)| std::cmp::Reverse(mount.len()));
    Ok(table)
}

/// `value` with a leading mount path (of the whole value, or of the part after the first `=`,
/// as in `--file=/etc/x`) replaced by where that mount lives on the host.
pub fn rewrite(value: &str, table: &[(String, PathBuf)]) -> String {
    let swap = |s: &str| -> Option<String> {
        table.iter().find_map(|(mount, host)| {
            let rest = s.strip_prefix(mount.as_str())?;
            (rest.is_empty() || rest.starts_with('/')).then(|| format!("{}{rest}", host.display()))
        })
    };
    if let Some(s) = swap(value) {
        return s;
    }
    if let Some((flag, path)) = value.split_once('=')
        && let Some(s) = swap(path)
    {
        return format!("{flag}={s}");
    }
    value.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: &str = r#"
metadata: {name: runner-0, namespace: load, labels: {app: stampede}}
spec:
  serviceAccountName: runner
  containers:
    - name: main
      image: stampede
      volumeMounts:
        - {name: scenario, mountPath: /etc/stampede/}
        - {name: scenario, mountPath: /etc/stampede/extra/only.yaml, subPath: scenario.yaml}
        - {name: kube-api-access-x1, mountPath: /var/run/secrets/kubernetes.io/serviceaccount}
        - {name: scratch, mountPath: /tmp/work}
        - {name: info, mountPath: /etc/podinfo}
  volumes:
    - {name: scenario, configMap: {name: scenario, items: [{key: scenario.yaml, path: scenario.yaml}]}}
    - {name: scratch, emptyDir: {}}
    - {name: info, downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}, {path: name, fieldRef: {fieldPath: metadata.name}}]}}
    - name: kube-api-access-x1
      projected:
        sources:
          - serviceAccountToken: {expirationSeconds: 3607, path: token}
          - configMap: {name: kube-root-ca.crt, items: [{key: ca.crt, path: ca.crt}]}
          - downwardAPI: {items: [{path: namespace, fieldRef: {apiVersion: v1, fieldPath: metadata.namespace}}]}
"#;

    fn pod() -> Pod {
        serde_yaml::from_str(POD).unwrap()
    }

    fn referenced() -> Referenced {
        let mut r = Referenced::default();
        r.config_maps.insert("scenario".into(), [("scenario.yaml".to_string(), "name: x\n".to_string())].into());
        r.config_maps.insert("kube-root-ca.crt".into(), [("ca.crt".to_string(), "PEM".to_string())].into());
        r
    }

    fn file<'a>(content: &'a VolumeContent, path: &str) -> Option<&'a str> {
        let VolumeContent::Files(files) = content else { return None };
        files.iter().find(|f| f.path == path).map(|f| std::str::from_utf8(&f.contents).unwrap())
    }

    #[test]
    fn volumes_are_materialized_from_their_sources() {
        let p = pod();
        assert_eq!(references(&p).config_maps.into_iter().collect::<Vec<_>>(), ["kube-root-ca.crt", "scenario"]);
        let v = contents(&p, &referenced(), Some("tok")).unwrap();
        assert_eq!(file(&v["scenario"], "scenario.yaml"), Some("name: x\n"));
        assert_eq!(v["scratch"], VolumeContent::Files(vec![]));
        assert_eq!(file(&v["info"], "labels"), Some("app=\"stampede\"\n"));
        assert_eq!(file(&v["info"], "name"), Some("runner-0"));
        let api = &v["kube-api-access-x1"];
        assert_eq!(
            (file(api, "token"), file(api, "ca.crt"), file(api, "namespace")),
            (Some("tok"), Some("PEM"), Some("load"))
        );
    }

    #[test]
    fn a_missing_config_map_blocks_the_pod() {
        let mut r = referenced();
        r.config_maps.remove("scenario");
        let err = contents(&pod(), &r, Some("tok")).unwrap_err();
        assert!(matches!(err, Error::MissingReference(m) if m.contains("configmap \"scenario\"")));
    }

    #[test]
    fn paths_under_mounts_are_rewritten_longest_mount_first() {
        let p = pod();
        let v = contents(&p, &referenced(), Some("tok")).unwrap();
        let root = Path::new("/pods/load/runner-0/volumes");
        let table = mount_table(&p.spec.as_ref().unwrap().containers[0], &v, root).unwrap();
        assert_eq!(
            rewrite("/etc/stampede/scenario.yaml", &table),
            "/pods/load/runner-0/volumes/scenario/scenario.yaml"
        );
        assert_eq!(rewrite("--scenario=/etc/stampede", &table), "--scenario=/pods/load/runner-0/volumes/scenario");
        assert_eq!(
            rewrite("/etc/stampede/extra/only.yaml", &table),
            "/pods/load/runner-0/volumes/scenario/scenario.yaml"
        );
        assert_eq!(rewrite("/etc/stampede-other/x", &table), "/etc/stampede-other/x", "only whole path segments");
        assert_eq!(rewrite("plain", &table), "plain");
    }
}
