//! Container images → local programs. The node agent has no container runtime: an image "exists"
//! on the node when the table names it, and its entrypoint is a local binary. A container's
//! `command` replaces the entrypoint and `args` replace its arguments, as in Kubernetes; bare
//! program names are looked up on the pod process's `PATH`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Container;

use crate::env::expand;
use crate::error::{Error, Result};

/// The wildcard entry: matches any image not named explicitly.
pub const ANY_IMAGE: &str = "*";

/// Which images the node "has", and the local program each one runs when a container does not
/// give a `command`.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImageTable {
    entries: BTreeMap<String, Option<PathBuf>>,
}

impl ImageTable {
    /// Parses `IMAGE=PROGRAM` (the image runs PROGRAM when no command is given) or `IMAGE` (the
    /// image exists but containers must give a command). IMAGE is a repository without tag or
    /// digest (`busybox`, `registry.k8s.io/kubectl`), or `*` for any image.
    pub fn add_entry(&mut self, entry: &str) -> Result<()> {
        let (image, program) = match entry.split_once('=') {
            Some((i, p)) => (i.trim(), Some(p.trim())),
            None => (entry.trim(), None),
        };
        if image.is_empty() {
            return Err(Error::Config(format!("image table entry {entry:?} names no image")));
        }
        let key = if image == ANY_IMAGE { image.to_string() } else { repository(image).to_string() };
        let program = program.filter(|p| !p.is_empty()).map(PathBuf::from);
        self.entries.insert(key, program);
        Ok(())
    }

    /// Builds a table from entries separated by commas, whitespace or newlines.
    pub fn parse(spec: &str) -> Result<Self> {
        let mut table = Self::default();
        for entry in spec.split(|c: char| c == ',' || c.is_whitespace()).filter(|e| !e.is_empty()) {
            table.add_entry(entry)?;
        }
        Ok(table)
    }

    /// The entry for `image`: `None` when the node does not have it; `Some(None)` when it has
    /// it without a default program.
    pub fn lookup(&self, image: &str) -> Option<Option<&PathBuf>> {
        self.entries.get(repository(image)).or_else(|| self.entries.get(ANY_IMAGE)).map(Option::as_ref)
    }

    /// The argv a container runs: its `command` (or the image's program) followed by its
    /// `args`, with `$(VAR)` references expanded against the container's environment.
    pub fn argv(&self, container: &Container, env: &[(String, String)]) -> Result<Vec<String>> {
        let image = container.image.as_deref().unwrap_or_default();
        let program = self.lookup(image).ok_or_else(|| Error::ImageNotFound(image.to_string()))?;
        let lookup = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let mut argv: Vec<String> = match (&container.command, program) {
            (Some(command), _) if !command.is_empty() => command.iter().map(|c| expand(c, lookup)).collect(),
            (_, Some(program)) => vec![program.to_string_lossy().into_owned()],
            _ => {
                return Err(Error::NoCommand(format!(
                    "image {image} has no program in the node agent's image table and the container gives no command"
                )));
            }
        };
        argv.extend(container.args.iter().flatten().map(|a| expand(a, lookup)));
        Ok(argv)
    }
}

/// `docker.io/library/busybox:1.36@sha256:…` → `busybox`; `registry.k8s.io/kubectl:v1.34.4` →
/// `registry.k8s.io/kubectl`.
pub fn repository(image: &str) -> &str {
    let no_digest = image.split_once('@').map_or(image, |(r, _)| r);
    let last_slash = no_digest.rfind('/').map_or(0, |i| i + 1);
    let no_tag = match no_digest[last_slash..].find(':') {
        Some(colon) => &no_digest[..last_slash + colon],
        None => no_digest,
    };
    let short = no_tag.strip_prefix("docker.io/").or_else(|| no_tag.strip_prefix("index.docker.io/")).unwrap_or(no_tag);
    short.strip_prefix("library/").unwrap_or(short)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(yaml: &str) -> Container {
        serde_yaml::from_str(yaml).unwrap()
    }

    #[test]
    fn repository_drops_registry_defaults_tags_and_digests() {
        assert_eq!(repository("busybox"), "busybox");
        assert_eq!(repository("busybox:1.36"), "busybox");
        assert_eq!(repository("docker.io/library/busybox:1.36@sha256:abc"), "busybox");
        assert_eq!(repository("registry.k8s.io/kubectl:v1.34.4"), "registry.k8s.io/kubectl");
        assert_eq!(repository("localhost:5000/stampede"), "localhost:5000/stampede");
    }

    #[test]
    fn command_replaces_entrypoint_and_args_are_expanded() {
        let table = ImageTable::parse("busybox=/bin/sh, ghcr.io/stampede-dev/stampede=/opt/stampede").unwrap();
        let env = vec![("JOB_COMPLETION_INDEX".to_string(), "2".to_string())];
        let c =
            container("{name: a, image: 'busybox:1.36', command: [sh, -c], args: ['exit $(JOB_COMPLETION_INDEX)']}");
        assert_eq!(table.argv(&c, &env).unwrap(), ["sh", "-c", "exit 2"]);
        let c = container(
            "{name: a, image: 'ghcr.io/stampede-dev/stampede:0.1', args: [runner, --index, '$(JOB_COMPLETION_INDEX)']}",
        );
        assert_eq!(table.argv(&c, &env).unwrap(), ["/opt/stampede", "runner", "--index", "2"]);
    }

    #[test]
    fn unknown_images_and_missing_commands_are_errors() {
        let table = ImageTable::parse("registry.k8s.io/pause").unwrap();
        let c = container("{name: a, image: nginx, command: [nginx]}");
        assert!(matches!(table.argv(&c, &[]), Err(Error::ImageNotFound(i)) if i == "nginx"));
        let c = container("{name: a, image: 'registry.k8s.io/pause:3.10'}");
        assert!(matches!(table.argv(&c, &[]), Err(Error::NoCommand(_))));
    }

    #[test]
    fn wildcard_entry_admits_any_image() {
        let table = ImageTable::parse("*").unwrap();
        let c = container("{name: a, image: anything/at-all:7, command: ['true']}");
        assert_eq!(table.argv(&c, &[]).unwrap(), ["true"]);
    }
}
