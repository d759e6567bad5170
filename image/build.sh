#!/usr/bin/env bash
# `make image`: Stampede's container image without Docker, as an OCI archive.
#
# The same image as the Dockerfile describes, built from this machine's release binaries: both
# binaries in /usr/local/bin, user 65532:65532 (nonroot), entrypoint `stampede`. The Dockerfile
# links statically against musl on distroless/static; this build links against glibc (no musl
# target here), so the image also carries the shared libraries `ldd` lists and the loader, as
# distroless/cc does, plus /etc/passwd, /etc/group, /tmp and the CA bundle.
#
# Reproducible: cargo passes the workspace's own sources by relative paths; the registry and the
# target folder are remapped (/cargo, /target); the build has no debug info of its own (it would
# record the build folder, and ThinLTO names symbols by a hash of each module, debug info
# included) and the image's copies are stripped of the standard library's; image/oci.py writes
# sorted entries stamped with the commit's time. So two builds of one commit give one digest,
# whichever folder they were built in.
#
# Fast in any checkout: the sources are mirrored (image/sync.py: only changed files are written,
# the others keep their times) into one build folder, so a fresh clone of a commit built before
# rebuilds nothing, and another commit rebuilds only what it changed.
#
# Environment:
#   IMAGE_OUT         archive to write (default target/image/stampede.oci.tar)
#   IMAGE_NAME        reference recorded in the archive (default ghcr.io/stampede-dev/stampede:<version>)
#   IMAGE_TARGET_DIR  cargo target folder of the release build (default ~/.cache/stampede/image-target:
#                     other flags than the workspace's own release builds, kept apart)
#   IMAGE_SRC_DIR     where the sources are mirrored for that build (default ~/.cache/stampede/image-src)
# Prints the image digest on stdout; beside the archive: <out>.digest and <out>.name (its reference).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"

version="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)"
name="${IMAGE_NAME:-ghcr.io/stampede-dev/stampede:$version}"
out="${IMAGE_OUT:-$repo/target/image/stampede.oci.tar}"
cache_root="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
target_dir="${IMAGE_TARGET_DIR:-$cache_root/image-target}"
src_dir="${IMAGE_SRC_DIR:-$cache_root/image-src}"
log() { echo "image: $*" >&2; }

t0=$(date +%s)
mkdir -p "$src_dir" "$target_dir"
exec 8>"$src_dir.lock"   # one image build at a time shares the mirror and the target folder
flock -w 1800 8 || { log "$src_dir.lock is held by another image build for 30 min"; exit 1; }
release="$(STAMPEDE_LOCK_HELD=1 IMAGE_TARGET_DIR="$target_dir" IMAGE_SRC_DIR="$src_dir" bash "$here/release-bins.sh")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bins=("$work/stampede" "$work/stampede-operator")
for b in "${bins[@]}"; do strip --strip-debug -o "$b" "$release/$(basename "$b")"; done
t_build=$(( $(date +%s) - t0 ))

# The commit's time, so that the same commit gives the same image; a changed tree is still
# stamped with its commit (its digest then differs by the binaries' content).
created="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"

args=(--out "$out" --name "$name" --created "$created"
      --user 65532:65532 --entrypoint /usr/local/bin/stampede
      --env PATH=/usr/local/bin:/usr/bin:/bin --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
      --label "org.opencontainers.image.title=stampede"
      --label "org.opencontainers.image.version=$version"
      --label "org.opencontainers.image.source=https://github.com/stampede-dev/stampede"
      --label "org.opencontainers.image.revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)"
      --file "/usr/local/bin/stampede=${bins[0]}:0755"
      --file "/usr/local/bin/stampede-operator=${bins[1]}:0755"
      --text "/etc/passwd=root:x:0:0:root:/root:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
:0644"
      --text "/etc/group=root:x:0:
nonroot:x:65532:
:0644"
      --text "/etc/nsswitch.conf=hosts: files dns
:0644"
      --dir /tmp:1777 --dir /home/nonroot:0700:65532 --dir /root:0700)

# The loader and the libraries the binaries link (resolved on this machine), at the paths the
# loader searches: /lib/x86_64-linux-gnu, and /lib64 for the interpreter itself.
declare -A libs=()
for b in "${bins[@]}"; do
  while read -r lib; do libs["$lib"]=1; done < <(ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}')
done
interp="$(readelf -l "${bins[0]}" | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')"
for lib in "${!libs[@]}"; do
  base="$(basename "$lib")"
  if [[ "$lib" == "$interp" ]]; then
    args+=(--file "/lib/x86_64-linux-gnu/$base=$(readlink -f "$lib"):0755" --symlink "$interp=/lib/x86_64-linux-gnu/$base")
  else
    args+=(--file "/lib/x86_64-linux-gnu/$base=$(readlink -f "$lib"):0644")
  fi
done
[[ -f /etc/ssl/certs/ca-certificates.crt ]] && args+=(--file "/etc/ssl/certs/ca-certificates.crt=/etc/ssl/certs/ca-certificates.crt:0644")

mkdir -p "$(dirname "$out")"
digest="$(python3 "$here/oci.py" "${args[@]}")"
echo "$digest" > "$out.digest"
echo "$name" > "$out.name"
log "$name $digest -> $out ($(du -h "$out" | cut -f1); release build ${t_build} s, image $(( $(date +%s) - t0 - t_build )) s)"
echo "$digest"
