# Sourced by the scripts that build a pinned Go tool from its module and cache it (Helm,
# Prometheus): the cache folder and its stamp, Go itself, and a build folder.
#
#   go_tool_begin NAME VERSION BINARY   reuse ${STAMPEDE_CACHE:-~/.cache/stampede}/NAME-VERSION/bin/BINARY
#                                       when its stamp says VERSION (prints its path, exits 0);
#                                       else sets $go_tool_tmp (a build folder, removed on exit)
#   go_tool_end                         moves $go_tool_tmp/BINARY into place, stamps it, prints its path
go_tool_begin() {
  go_tool_name=$1 go_tool_version=$2 go_tool_binary=$3
  local cache_root="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
  go_tool_dest="$cache_root/$go_tool_name-$go_tool_version"
  go_tool_path="$go_tool_dest/bin/$go_tool_binary"
  if [[ -x "$go_tool_path" && -f "$go_tool_dest/complete" && "$(cat "$go_tool_dest/complete")" == "$go_tool_version" ]]; then
    echo "$go_tool_name: reusing $go_tool_path" >&2
    echo "$go_tool_path"
    exit 0
  fi
  command -v go >/dev/null || [[ ! -x /usr/local/go/bin/go ]] || PATH="$PATH:/usr/local/go/bin"
  command -v go >/dev/null || { echo "$go_tool_name: Go is required to build $go_tool_name $go_tool_version" >&2; exit 1; }
  go_tool_start=$(date +%s)
  mkdir -p "$go_tool_dest"
  go_tool_tmp="$(mktemp -d "$go_tool_dest/build.XXXXXX")"
  trap 'rm -rf "$go_tool_tmp"' EXIT
  echo "$go_tool_name: building $go_tool_name $go_tool_version into $go_tool_dest/bin (a cold build takes a few minutes)" >&2
  export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="${GOFLAGS_BUILD:--p=2} -buildvcs=false"
}

go_tool_end() {
  mkdir -p "$go_tool_dest/bin"
  mv -f "$go_tool_tmp/$go_tool_binary" "$go_tool_path"
  echo "$go_tool_version" > "$go_tool_dest/complete"
  echo "$go_tool_name: built in $(( $(date +%s) - go_tool_start )) s" >&2
  echo "$go_tool_path"
}
