#!/usr/bin/env bash
# grpc-go's interop server (tests/grpc/interop: grpc-go's own TestService implementation) for
# the gRPC steps' tests against a server that is not ours, built from the Go module proxy at the
# versions go.mod/go.sum pin, with the TestService's .proto files it prints from its
# descriptors. Cached under ~/.cache/stampede/grpc-interop-<hash of go.mod, go.sum, *.go>
# (STAMPEDE_CACHE overrides); built only when missing. Prints the folder: `server`, `protos/`.
set -euo pipefail
src="$(cd "$(dirname "$0")/interop" && pwd)"
cache="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
key="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-12)"
out="$cache/grpc-interop-$key"
if [[ -f "$out/complete" ]]; then
  echo "$out"
  exit 0
fi
echo "grpc-interop: building grpc-go's interop server (Go module proxy)" >&2
rm -rf "$out.tmp"
mkdir -p "$out.tmp"
(cd "$src" && GOFLAGS=-mod=mod go build -o "$out.tmp/server" .)
"$out.tmp/server" -write-protos "$out.tmp/protos" >/dev/null
rm -rf "$out"
mv "$out.tmp" "$out"
touch "$out/complete"
echo "$out"
