#!/usr/bin/env bash
# Rebuild the third-party importer corpus from public package registries.
#
#   STAMPEDE_CACHE=/some/dir bash tests/corpus/fetch.sh
#
# Reads SOURCES.tsv (next to this script), downloads each (registry, package,
# version) once into a temporary directory, extracts the listed paths to
# ${STAMPEDE_CACHE:-$HOME/.cache/stampede}/corpus/<kind>/<name>, checks every
# sha256 against SOURCES.tsv and prints the corpus folder on stdout (all
# progress goes to stderr). A second run exits at once when the `complete`
# stamp matches the sha256 of SOURCES.tsv.
#
# Needs: bash, curl, tar, unzip, sha256sum, python3; npm for npm packages;
# apt-get + dpkg-deb for Debian packages (run `apt-get update` once first).
# Registry endpoints can be overridden with NPM registry config (npm's own),
# PYPI_JSON (default https://pypi.org/pypi), MAVEN_REPO (default: the mirror in
# ~/.m2/settings.xml, else https://repo1.maven.org/maven2) and GOPROXY.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SOURCES="$HERE/SOURCES.tsv"
CACHE="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
OUT="$CACHE/corpus"
STAMP="$OUT/complete"

# Versions that FastAPI-generated documents depend on (pure-Python wheels except pydantic-core).
FASTAPI_PINS=(fastapi==0.165.0 starlette==1.10.0 pydantic==2.14.4 pydantic-core==2.50.5
  annotated-doc==0.0.7 annotated-types==0.8.0 anyio==4.16.0 idna==3.20
  typing-extensions==4.16.0 typing-inspection==0.4.5 opentelemetry-api==1.45.2)

log() { printf '%s\n' "$*" >&2; }
die() { printf 'fetch.sh: %s\n' "$*" >&2; exit 1; }

[ -f "$SOURCES" ] || die "missing $SOURCES"
# The stamp is of what makes the files (not the `http` column, a judgement of their content).
want=$(cut -f1-9 "$SOURCES" | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "$OUT"
  exit 0
fi

mkdir -p "$OUT"
# Tests run in parallel and each asks for the corpus: one builds it, the others wait for the
# lock and then find the stamp (a cold cache once raced on the same `.part` files).
exec 9>"$OUT/.lock"
flock 9
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  echo "$OUT"
  exit 0
fi
rm -f "$STAMP"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/stampede-corpus.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

PYPI_JSON="${PYPI_JSON:-https://pypi.org/pypi}"
if [ -z "${MAVEN_REPO:-}" ]; then
  MAVEN_REPO=https://repo1.maven.org/maven2
  if [ -f "$HOME/.m2/settings.xml" ]; then
    m=$(tr -d '\n\r' <"$HOME/.m2/settings.xml" | grep -o '<mirror>.*</mirror>' | grep -o '<url>[^<]*' | head -n1 | sed 's/^<url>//' || true)
    [ -n "$m" ] && MAVEN_REPO="$m"
  fi
fi
MAVEN_REPO="${MAVEN_REPO%/}"
if [ -z "${GOPROXY:-}" ]; then
  GOPROXY=$(go env GOPROXY 2>/dev/null || true)
fi
GOPROXY_URL=$(printf '%s' "${GOPROXY:-https://proxy.golang.org}" | tr ',|' '\n\n' | grep -E '^https?://' | head -n1 || true)
[ -n "$GOPROXY_URL" ] || GOPROXY_URL=https://proxy.golang.org
GOPROXY_URL="${GOPROXY_URL%/}"

# ---- download one package into $2, print the archive path ----
download() { # registry package version dir
  local reg=$1 pkg=$2 ver=$3 dir=$4 f url
  mkdir -p "$dir"
  case "$reg" in
    npm)
      f=$(cd "$dir" && npm pack --silent "$pkg@$ver" 2>/dev/null | tail -n1) || die "npm pack $pkg@$ver failed"
      echo "$dir/$f" ;;
    pypi|generated)
      [ "$reg" = generated ] && pkg=fastapi
      url=$(curl -fsSL "$PYPI_JSON/$pkg/json" | python3 -c '
import json, sys, urllib.parse
base, ver = sys.argv[1], sys.argv[2]
d = json.load(sys.stdin)
for u in d["releases"].get(ver, []):
    if u["packagetype"] == "sdist":
        print(urllib.parse.urljoin(base, u["url"]), u["digests"]["sha256"]); break
' "$PYPI_JSON/$pkg/json" "$ver") || die "PyPI lookup $pkg failed"
      [ -n "$url" ] || die "PyPI: no sdist for $pkg $ver"
      set -- $url
      f="$dir/$(basename "$1")"
      curl -fsSL -o "$f" "$1" || die "download $1 failed"
      echo "$2  $f" | sha256sum -c --quiet - >&2 || die "PyPI sdist digest mismatch for $pkg $ver"
      echo "$f" ;;
    maven)
      local g=${pkg%%:*} a=${pkg#*:}
      f="$dir/$a-$ver.jar"
      curl -fsSL -o "$f" "$MAVEN_REPO/${g//.//}/$a/$ver/$a-$ver.jar" || die "maven download $pkg:$ver failed"
      echo "$f" ;;
    go)
      local esc
      esc=$(printf '%s' "$pkg" | sed 's/[A-Z]/!\L&/g')
      f="$dir/module.zip"
      curl -fsSL -o "$f" "$GOPROXY_URL/$esc/@v/$ver.zip" || die "go module download $pkg@$ver failed"
      echo "$f" ;;
    debian)
      (cd "$dir" && apt-get download -q "$pkg=$ver" >&2 2>/dev/null) || die "apt-get download $pkg=$ver failed (run apt-get update?)"
      echo "$(ls "$dir"/*.deb | head -n1)" ;;
    *) die "unknown registry $reg" ;;
  esac
}

# ---- extract member $3 of archive $2 (registry $1) to stdout ----
member() {
  local reg=$1 arc=$2 p=$3 pkg=$4 ver=$5
  case "$reg" in
    npm|pypi) tar -xzf "$arc" -O -- "$p" ;;
    maven) unzip -p "$arc" "$p" ;;
    go) unzip -p "$arc" "$pkg@$ver/$p" ;;
    debian) dpkg-deb --fsys-tarfile "$arc" | tar -xO -- "./$p" ;;
  esac
}

fastapi_env() { # sdist archive -> prepares $TMP/fa (deps) and $TMP/fa-src (sdist)
  if [ ! -d "$TMP/fa" ]; then
    log "installing pinned FastAPI into a temporary target dir"
    python3 -m pip install -q --disable-pip-version-check --no-deps --only-binary :all: \
      --target "$TMP/fa" "${FASTAPI_PINS[@]}" >&2 || die "pip install of pinned FastAPI failed"
    mkdir -p "$TMP/fa-src"
    tar -xzf "$1" -C "$TMP/fa-src" --strip-components=1
  fi
}

gen_fastapi() { # docs_src path -> stdout
  local mod=${1%.py}
  mod=${mod//\//.}
  (cd "$TMP" && python3 -I -S -c '
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import importlib, json
m = importlib.import_module(sys.argv[3])
sys.stdout.write(json.dumps(m.app.openapi(), indent=2) + "\n")
' "$TMP/fa" "$TMP/fa-src" "$mod")
}

check() { # file sha
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  [ "$got" = "$2" ]
}

fail=0
keys=$(awk -F'\t' 'NR>1 {print $3"\t"$4"\t"$5}' "$SOURCES" | awk '!seen[$0]++')
n=0
while IFS=$'\t' read -r reg pkg ver; do
  n=$((n+1))
  rows=$(awk -F'\t' -v r="$reg" -v p="$pkg" -v v="$ver" 'NR>1 && $3==r && $4==p && $5==v' "$SOURCES")
  # skip the download when every file of this package is already there and valid
  need=0
  while IFS=$'\t' read -r kind file _ _ _ path _ _ sha _; do
    [ -f "$OUT/$file" ] && check "$OUT/$file" "$sha" || { need=1; break; }
  done <<<"$rows"
  [ $need = 1 ] || continue
  log "[$n] $reg $pkg $ver"
  d="$TMP/pkg$n"
  arc=$(download "$reg" "$pkg" "$ver" "$d" </dev/null)
  while IFS=$'\t' read -r kind file _ _ _ path _ _ sha _; do
    dst="$OUT/$file"
    mkdir -p "$(dirname "$dst")"
    if [ "$reg" = generated ]; then
      fastapi_env "$arc" </dev/null
      gen_fastapi "$path" </dev/null >"$dst.part" || die "generating $file from $path failed"
    elif [[ "$path" == *'#L'* ]]; then
      range=${path##*#L}; a=${range%%-L*}; b=${range##*-L}
      member "$reg" "$arc" "${path%#L*}" "$pkg" "$ver" </dev/null | sed -n "${a},${b}p" >"$dst.part" || die "extracting $path from $pkg failed"
    else
      member "$reg" "$arc" "$path" "$pkg" "$ver" </dev/null >"$dst.part" || die "extracting $path from $pkg failed"
    fi
    mv "$dst.part" "$dst"
    if ! check "$dst" "$sha"; then
      log "SHA256 MISMATCH: $file (from $reg $pkg $ver: $path)"
      fail=1
    fi
  done <<<"$rows"
  rm -rf "$d"
done <<<"$keys"

[ $fail = 0 ] || die "some files did not match SOURCES.tsv (see above)"
echo "$want" >"$STAMP"
echo "$OUT"
