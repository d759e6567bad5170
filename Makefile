# Stampede — developer entry points. `make test` is the whole suite (CI runs it via .ci/run).
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: all build release image test test-steps unit lint fmt fuzz chart e2e e2e-node bench bench-flow bench-open bench-sweep bench-h2 bench-language bench-import bench-7 bench-scale bench-dashboards generate quickstart k8s-bins cluster-up cluster-down

all: build

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p stampede

# Stampede's container image without Docker: an OCI archive (target/image/stampede.oci.tar) of
# the release binaries, reproducible (same commit, same digest). See image/build.sh; the
# Dockerfile stays the way to build it with Docker.
image:
	bash image/build.sh

# The whole test suite: formatting, lints, unit and integration tests, then the
# end-to-end tests on a real local Kubernetes control plane: with the node agent (e2e), then
# with a real node running Stampede's image in containers (e2e-node, needs root).
# It builds in a cache outside the clone (tests/lib/build-cache.sh: keyed by the toolchain and
# Cargo.lock), so a fresh clone compiles the dependencies once, not on every run; without
# incremental compilation, whose per-path caches would only grow there.
test:
	CARGO_TARGET_DIR="$$(bash tests/lib/build-cache.sh)" CARGO_INCREMENTAL=0 $(MAKE) --no-print-directory test-steps

test-steps: lint unit chart e2e e2e-node

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# deps (tests/deps.sh; installed or built when missing): Debian's chromium (the HTML report's
# browser test, the HAR recording), xmllint and cmark-gfm (CI outputs), the JUnit schema, and a
# JMeter home from Maven Central (the JMeter import).
unit:
	bash tests/deps.sh
	$(CARGO) test --workspace

# The Helm chart: helm lint and template (default and CI values), generated copies, dashboards,
# values it must refuse. Builds the pinned Helm from Go modules when missing (tests/chart/helm.sh).
chart:
	bash tests/chart/check.sh

# End-to-end tests against a real kube-apiserver (see tests/cluster/README.md): builds or reuses
# the control-plane binaries, starts a fresh local cluster, runs every `e2e*` test target with
# `-- --ignored`, stops the cluster and checks nothing is left running.
e2e:
	CARGO="$(CARGO)" bash tests/cluster/e2e.sh

# The real-node suite (tests/cluster/e2e-node.sh): builds the image, the node's binaries
# (kubelet, kube-proxy, CoreDNS, crictl) and Prometheus (tests/prometheus/build.sh), all cached;
# starts the control plane with a real node (containerd + runc, pods on a bridge of their own),
# runs the `realnode` tests, stops it all and checks that the host is as before. Needs root; without it, it stops at once and says so.
e2e-node:
	CARGO="$(CARGO)" bash tests/cluster/e2e-node.sh

# The local control plane by hand: binaries (cached under ~/.cache/stampede), start, stop.
k8s-bins:
	bash tests/cluster/build.sh

cluster-up:
	bash tests/cluster/up.sh $(if $(NODE),--node=$(NODE))

cluster-down:
	bash tests/cluster/down.sh

fmt:
	$(CARGO) fmt --all

# The fuzz tests (parser and compiler, expressions, importers, HTTP/1.1 responses), long: debug
# builds (overflow checks on), FUZZ_CASES cases each (or FUZZ_SECS seconds) from a random seed, printed first;
# FUZZ_SEED=N repeats a run. `make test` runs the same tests with a few hundred cases, one seed.
FUZZ_CASES ?= 100000
FUZZ_SECS ?= 600
fuzz:
	@seed=$${FUZZ_SEED:-$$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ))}; \
	echo "fuzz seed $$seed ($(FUZZ_CASES) cases or $(FUZZ_SECS) s per test; FUZZ_SEED=$$seed make fuzz repeats it)"; \
	export STAMPEDE_FUZZ_SEED=$$seed STAMPEDE_FUZZ_CASES=$(FUZZ_CASES) STAMPEDE_FUZZ_SECS=$(FUZZ_SECS); \
	$(CARGO) test -p stampede-engine --test engine fuzz:: -- --nocapture && \
	$(CARGO) test -p stampede-engine --lib _fuzz:: -- --nocapture && \
	$(CARGO) test -p stampede-core --lib _fuzz:: -- --nocapture && \
	$(CARGO) test -p stampede --bin stampede import::fuzz:: -- --nocapture

# Runs the quick-start example against the built-in target.
quickstart:
	$(CARGO) run --release -p stampede -- run examples/quickstart.yaml

bench:
	bash bench/run.sh

# The 5-request user flow of issue #6: Stampede vs Artillery, Locust, drill and JMeter, each
# installed (pinned) under ~/.cache/stampede/tools by the script; a section of bench/RESULTS.md.
bench-flow:
	bash bench/flow/run.sh

# Issue #23: the scenario language's cost, same-run A/B (generated values and conditions vs
# constants; the quickstart vs a build from before the language); a section of bench/RESULTS.md.
bench-language:
	bash bench/language.sh

# Issue #33: import speed and memory for generated 5 and 50 MB HAR and JMX inputs and the
# corpus's largest (a section of bench/RESULTS.md).
bench-import:
	bash bench/import.sh

# Issue #7, each a section of bench/RESULTS.md (see bench/README.md); QUICK=1 for a smoke test.
# Open model at 20,000 req/s and at each tool's highest sustainable rate: stampede vs oha vs vegeta.
bench-open:
	bash bench/open.sh

# Connection sweep 1 … 15,000 keep-alive connections (seed 000): stampede vs wrk vs JMeter.
bench-sweep:
	bash bench/sweep.sh

# HTTP/2 cleartext (prior knowledge), 10 connections x 10 streams: stampede vs h2load.
bench-h2:
	bash bench/h2.sh

# All three, one after the other (about 40 minutes).
bench-7: bench-open bench-sweep bench-h2

# Issues #17 and #36, the operator at scale on the node-agent cluster (tests/cluster/e2e.sh):
# LoadTests of 100, 300 and 1,000 runners (10 requests each, 1 s apart, so they write interim
# results) and 50 LoadTests of 2 runners at once; exact counts asserted, timings printed (lines
# starting SCALE). The operator and the runners are release builds (image/release-bins.sh), as
# the image holds; the node gets room for 1,100 pods.
bench-scale:
	bins="$$(bash image/release-bins.sh)" && \
	STAMPEDE_OPERATOR_BIN="$$bins/stampede-operator" STAMPEDE_RUNNER_BIN="$$bins/stampede" \
	CARGO_TARGET_DIR="$$(bash tests/lib/build-cache.sh)" CARGO_INCREMENTAL=0 STAMPEDE_SCALE=1 STAMPEDE_AGENT_MAX_PODS=1100 \
	  CARGO="$(CARGO)" bash tests/cluster/e2e.sh 'scale::e2e_scale' --nocapture

# Issue #35: the operator's CPU and memory with 10 pages following a 100-step, 50-runner
# LoadTest against none, and how soon a runner's interim write reaches a page (line DASHBOARDS).
# The operator is a release build (image/release-bins.sh), as users run it; the runners are debug.
bench-dashboards:
	STAMPEDE_OPERATOR_BIN="$$(bash image/release-bins.sh)/stampede-operator" \
	CARGO_TARGET_DIR="$$(bash tests/lib/build-cache.sh)" CARGO_INCREMENTAL=0 STAMPEDE_SCALE=1 STAMPEDE_AGENT_MAX_PODS=100 \
	  CARGO="$(CARGO)" bash tests/cluster/e2e.sh scale::dashboards --nocapture

# Rewrites everything generated from the code; tests fail when committed copies drift.
generate:
	mkdir -p schemas
	$(CARGO) run -q -p stampede -- schema scenario > schemas/scenario.schema.json
	$(CARGO) run -q -p stampede -- schema report > schemas/report.schema.json
	$(CARGO) run -q -p stampede -- docs > docs/scenario-language.md
	$(CARGO) run -q -p stampede -- crd loadtest > crds/loadtest.yaml
	$(CARGO) run -q -p stampede -- crd loadtestschedule > crds/loadtestschedule.yaml
	cp crds/loadtest.yaml crds/loadtestschedule.yaml charts/stampede/files/crds/
	bash tests/chart/manifests.sh > manifests/stampede.yaml.tmp && mv manifests/stampede.yaml.tmp manifests/stampede.yaml
