#!/usr/bin/env bash
# Prints the cargo target folder `make test` builds in: ~/.cache/stampede/cargo-target/<key>,
# where the key is rustc's version and Cargo.lock. A fresh clone (CI) then compiles the
# dependencies only when one of those changed, not on every run. Folders of other keys are
# removed (one is kept), and the folder is emptied once it passes 16 GiB: the workspace's own
# crates pile up there when clones live at different paths.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
root="${STAMPEDE_CACHE:-$HOME/.cache/stampede}/cargo-target"
key="$({ rustc -vV; cat "$repo/Cargo.lock"; } | sha256sum | cut -c1-16)"
dir="$root/$key"
mkdir -p "$root"
for old in "$root"/*; do
  [[ "$old" == "$dir" || ! -d "$old" ]] || rm -rf "$old"
done
if [[ -d "$dir" ]] && (( $(du -sk "$dir" | cut -f1) > 16 * 1024 * 1024 )); then
  echo "build-cache: $dir passed 16 GiB; starting it afresh" >&2
  rm -rf "$dir"
fi
mkdir -p "$dir"
echo "$dir"
