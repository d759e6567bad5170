#!/usr/bin/env bash
# What `make unit` needs beyond the Rust toolchain: Debian's chromium (headless), for the HTML
# report's browser test and the HAR recording; a JMeter home from Maven Central
# (tests/jmeter/home.sh), for the JMeter import's test; xmllint (libxml2-utils) and GitHub's Markdown renderer (cmark-gfm), for
# the CI outputs' tests; and the JUnit XML schema Jenkins' xUnit plugin publishes, as pytest's
# source ships it (testing/example_scripts/junit-10.xsd, MIT), cached under
# ~/.cache/stampede/junit-xsd; grpc-go's interop server (tests/grpc/interop.sh) and the WebSocket
# peers, Python's websockets and Node's ws (tests/ws/peers.sh). Installed when missing (as root,
# from Debian's packages, PyPI, npm and the Go module proxy); without root it says what to
# install and fails, rather than letting the test be skipped.
set -euo pipefail
cache="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
pytest_version=8.3.4
xsd="$cache/junit-xsd/pytest-$pytest_version/junit-10.xsd"
if [[ ! -s "$xsd" ]]; then
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  echo "deps: fetching the JUnit schema from pytest $pytest_version's source (PyPI)" >&2
  python3 -m pip download -q --no-deps --no-binary :all: "pytest==$pytest_version" -d "$tmp" >/dev/null
  tar xzf "$tmp/pytest-$pytest_version.tar.gz" -C "$tmp" "pytest-$pytest_version/testing/example_scripts/junit-10.xsd"
  mkdir -p "$(dirname "$xsd")"
  mv "$tmp/pytest-$pytest_version/testing/example_scripts/junit-10.xsd" "$xsd.tmp" && mv "$xsd.tmp" "$xsd"
fi
bash "$(dirname "$0")/jmeter/home.sh" >/dev/null
bash "$(dirname "$0")/grpc/interop.sh" >/dev/null
bash "$(dirname "$0")/ws/peers.sh" >/dev/null
missing=()
for pkg in chromium libxml2-utils cmark-gfm; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
(( ${#missing[@]} == 0 )) && exit 0
if (( EUID != 0 )); then
  echo "deps: ${missing[*]} missing; install with: sudo apt-get install ${missing[*]}" >&2
  exit 1
fi
echo "deps: installing ${missing[*]} (Debian)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
