#!/usr/bin/env bash
# What `make unit` needs beyond the Rust toolchain: Debian's chromium (headless), for the HTML
# report's browser test. Installed when missing (as root, from Debian's packages); without root
# it says what to install and fails, rather than letting the test be skipped.
set -euo pipefail
missing=()
for pkg in chromium; do
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
