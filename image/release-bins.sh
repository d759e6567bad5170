#!/usr/bin/env bash
# Release builds of `stampede` and `stampede-operator` from this tree, built once and reused:
# the sources are mirrored (image/sync.py: only changed files are written) into one build folder
# (~/.cache/stampede/image-src) and built there into ~/.cache/stampede/image-target, so a commit
# built before rebuilds nothing, whichever checkout asks. Prints the folder holding both binaries.
# `make image` packs them; the benchmarks run them (a debug build's figures say little).
#
# Environment: IMAGE_TARGET_DIR, IMAGE_SRC_DIR (as image/build.sh says); STAMPEDE_LOCK_HELD=1
# when the caller already holds the build folder's lock (image/build.sh does).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cd "$repo"
cache_root="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
target_dir="${IMAGE_TARGET_DIR:-$cache_root/image-target}"
src_dir="${IMAGE_SRC_DIR:-$cache_root/image-src}"
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
mkdir -p "$src_dir" "$target_dir"
if [[ "${STAMPEDE_LOCK_HELD:-}" != 1 ]]; then
  exec 8>"$src_dir.lock"   # one build at a time shares the mirror and the target folder
  flock -w 1800 8 || { echo "release-bins: $src_dir.lock is held by another build for 30 min" >&2; exit 1; }
fi
synced="$(git ls-files -z --cached --others --exclude-standard | python3 "$here/sync.py" "$repo" "$src_dir")"
echo "release-bins: release build of stampede and stampede-operator in $target_dir (sources mirrored: $synced)" >&2
(cd "$src_dir" &&
  RUSTFLAGS="${RUSTFLAGS:-} --remap-path-prefix=$cargo_home=/cargo --remap-path-prefix=$target_dir=/target" \
  CARGO_TARGET_DIR="$target_dir" CARGO_PROFILE_RELEASE_DEBUG=0 \
  cargo build --release --locked --quiet -p stampede -p stampede-operator)
echo "$target_dir/release"
