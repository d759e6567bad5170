#!/usr/bin/env bash
# Two WebSocket servers not written here, for the WebSocket steps' conformance tests
# (crates/stampede/tests/cli/ws_peers.rs): Python's `websockets` (PyPI, BSD-3) and Node's `ws`
# (npm, MIT), at the versions pinned below, each driven by a small program of ours (peer.py,
# peer.js beside this script, run from here) that records what it saw. Installed into
# ~/.cache/stampede/ws-peers-<hash of this script> (STAMPEDE_CACHE overrides), only when
# missing. Prints the folder: `python/` (for PYTHONPATH) and `node/node_modules` (NODE_PATH).
set -euo pipefail
websockets_version=15.0.1
ws_version=8.18.3
src="$(cd "$(dirname "$0")" && pwd)"
cache="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
key="$(sha256sum <"$src/peers.sh" | cut -c1-12)"
out="$cache/ws-peers-$key"
if [[ -f "$out/complete" ]]; then
  echo "$out"
  exit 0
fi
echo "ws-peers: installing websockets $websockets_version (PyPI) and ws $ws_version (npm)" >&2
rm -rf "$out.tmp"
mkdir -p "$out.tmp/node"
python3 -m pip install -q --disable-pip-version-check --no-deps --target "$out.tmp/python" \
  "websockets==$websockets_version" >&2
(cd "$out.tmp/node" && npm install --silent --no-audit --no-fund --no-save "ws@$ws_version" >&2)
rm -rf "$out"
mv "$out.tmp" "$out"
touch "$out/complete"
echo "$out"
