#!/usr/bin/env bash
# A JMeter home for the importer's tests, from Maven Central (JMeter is Apache-2.0): the pinned
# JMeter's jars and their dependencies (mvn dependency:copy-dependencies), `bin/` from its
# `_config` jar, the `ApacheJMeter_*` component jars in `lib/ext`, as JMeter's own distribution
# lays them out. Cached under ~/.cache/stampede/jmeter-<version> (STAMPEDE_CACHE overrides);
# built only when missing. Prints the home's path.
set -euo pipefail
version=5.6.3
cache="${STAMPEDE_CACHE:-$HOME/.cache/stampede}"
home="$cache/jmeter-$version"
if [[ -f "$home/complete" ]]; then
  echo "$home"
  exit 0
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.stampede</groupId><artifactId>jmeter-home</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
$(for a in ApacheJMeter ApacheJMeter_http ApacheJMeter_components ApacheJMeter_functions ApacheJMeter_config; do
    echo "    <dependency><groupId>org.apache.jmeter</groupId><artifactId>$a</artifactId><version>$version</version></dependency>"
  done)
  </dependencies>
</project>
POM
echo "jmeter: fetching JMeter $version and its dependencies from Maven Central" >&2
(cd "$tmp" && mvn -q -B dependency:copy-dependencies -DoutputDirectory=jars >&2)
rm -rf "$home.tmp"
mkdir -p "$home.tmp/lib/ext"
(cd "$home.tmp" && unzip -q -o "$tmp/jars/ApacheJMeter_config-$version.jar" 'bin/*')
for jar in "$tmp"/jars/*.jar; do
  name="$(basename "$jar")"
  case "$name" in
    "ApacheJMeter-$version.jar") cp "$jar" "$home.tmp/bin/ApacheJMeter.jar" ;;
    ApacheJMeter_config-*) ;;
    ApacheJMeter_*) cp "$jar" "$home.tmp/lib/ext/" ;;
    *) cp "$jar" "$home.tmp/lib/" ;;
  esac
done
touch "$home.tmp/complete"
rm -rf "$home"
mv "$home.tmp" "$home"
echo "$home"
