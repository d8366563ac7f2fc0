# fakecloud-csi: the entry points the README names. `make help` lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
TOOLS     := $(GO) tool -modfile=tools/go.mod
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# -s -w: no symbol table and no DWARF, as in the images (hack/images.sh): 13-14 MB less per
# binary (docs/figures.md). Stack traces, panics and pprof keep their function names (those
# come from the pclntab, which stays). Linker flags only: the compiled packages in the build
# cache are the same with and without them, and go vet and go test do not take them.
LDFLAGS   := -s -w -X github.com/fakecloud/fakecloud-csi/pkg/version.Version=$(VERSION) \
             -X github.com/fakecloud/fakecloud-csi/pkg/version.Commit=$(COMMIT)
GOTESTFLAGS ?=
# One set of build flags for every go command make runs (builds, vet, tests, the local cluster's
# components, the images): static and path-free, as the images and Kubernetes releases are, so
# that each dependency (client-go, grpc, ...) compiles once into the build cache instead of once
# per flag set. Only the race build needs cgo; it is its own variant whatever we do.
# grpcnotrace: gRPC without golang.org/x/net/trace (grpc.EnableTracing, off by default, never
# set here; its /debug/requests pages go on http.DefaultServeMux, which nothing here serves).
# That package links html/template, whose method lookup by name keeps every exported method
# of every type in the driver: 4.5 MB of bin/driver and 3 MB of its idle RSS (issue 28).
export CGO_ENABLED := 0
export GOFLAGS := -trimpath -tags=grpcnotrace $(filter-out -trimpath -tags=grpcnotrace,$(shell $(GO) env GOFLAGS))
# The local cluster tool (tests/e2e, its own module) is built to bin/ through hack/progress.sh
# by the localcluster target, then run from tests/e2e: `go run` compiled it silently, minutes
# on a cold cache.
LOCALCLUSTER_BIN := $(CURDIR)/$(BIN)/localcluster
LOCALCLUSTER := cd tests/e2e && $(LOCALCLUSTER_BIN)
KEEP_CLUSTER ?= 0
E2E_ARGS ?=
E2E_UPSTREAM_MODE ?= local
E2E_UPSTREAM_ARGS ?=

FUZZTIME ?= 60s

BROWSER_ARGS ?=

SCALE_NODES ?= 10,30,100
SCALE_PERIODS ?= 10s,30s,60s
SCALE_ARGS ?=

SCENARIO ?= examples/scenarios/quota-squeeze.yaml
# A bare name (stale-count, or stale-count.yaml) is one of examples/scenarios when no such file is here.
SCENARIO_FILE = $(if $(wildcard $(SCENARIO)),$(SCENARIO),$(if $(findstring /,$(SCENARIO)),$(SCENARIO),examples/scenarios/$(SCENARIO:.yaml=).yaml))
# The admin token make scenario passes; SCENARIO_TOKEN= (empty) with SCENARIO_ARGS=--cloud-token-file=F uses a file instead.
SCENARIO_TOKEN ?= demo-admin-token
SCENARIO_ARGS ?=
FAKECLOUD_PORT ?= 8080

# Each go test run of `make test` and `make test-all` goes through gotestsum (pinned in
# tools/go.mod): go test's package lines (ok, FAIL, no test files), the whole output of each
# failed test, a DONE line with the run's counts; its events go to _output/gotest/NAME.json and
# JUnit to NAME.xml. hack/heartbeat.sh adds a line after 25 s without one (go test prints nothing
# while it compiles), and hack/testsummary ends with one line for all of them: packages, tests
# passed, failed, skipped and why. The runs pass -vet=off: hack/verify.sh has just run go vet's
# analyzers (a superset of go test's vet checks; go vet, or golangci-lint's govet) on the same
# packages, or CI's background make lint does (LINT=later).
GOTEST_OUT := $(CURDIR)/_output/gotest
# $(call gotest,NAME,LABEL) GO_TEST_ARGS: one go test run, NAME for its files, LABEL for its lines.
gotest = echo "== go test: $(2)" && $(CURDIR)/$(BIN)/gotestsum --format=standard-quiet --hide-summary=skipped \
	--jsonfile=$(GOTEST_OUT)/$(1).json --junitfile=$(GOTEST_OUT)/$(1).xml -- -vet=off $(GOTESTFLAGS)
HEARTBEAT = $(CURDIR)/hack/heartbeat.sh
TOOLS_BUILD = hack/progress.sh "go build bin/gotestsum and bin/testsummary" bash -c \
	'cd tools && $(GO) build -v -o ../$(BIN)/gotestsum gotest.tools/gotestsum && cd .. && $(GO) build -v -o $(BIN)/testsummary ./hack/testsummary'
TESTSUMMARY = $(BIN)/testsummary
comma := ,

##@ Run

.PHONY: build
build: ## Build bin/driver and bin/fakecloud with version and commit stamped.
	@echo "building bin/driver and bin/fakecloud (the first build compiles gRPC, client-go and the Prometheus client: a few minutes; later ones take seconds)"
	@hack/progress.sh "go build bin/driver" $(GO) build -v -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/driver ./cmd/driver
	@hack/progress.sh "go build bin/fakecloud" $(GO) build -v -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/fakecloud ./cmd/fakecloud

.PHONY: run
run: ## Main job: fake cloud, controller, a node plugin per instance; no Kubernetes.
	@BUILD='$(MAKE) --no-print-directory build' GO='$(GO)' hack/run.sh

.PHONY: scenario
scenario: build ## Run timeline SCENARIO (examples/scenarios) on `make run`'s fake cloud.
	$(BIN)/fakecloud scenario --cloud-url=http://127.0.0.1:$(FAKECLOUD_PORT) $(if $(SCENARIO_TOKEN),--cloud-token=$(SCENARIO_TOKEN)) $(SCENARIO_ARGS) $(SCENARIO_FILE)

.PHONY: scenario-local
scenario-local: ## Run SCENARIO on `make up-local`'s cluster; plot in _output/scenario.
	cd tests/e2e && $(GO) run ./cmd/capacityplot --run-dir=current --scenario=$(CURDIR)/$(SCENARIO_FILE) --out-dir=$(CURDIR)/_output/scenario $(SCENARIO_ARGS)

##@ Test

.PHONY: test
test: ## The newcomer's check: verify, unit + integration tests (~13 min cold).
	@rm -rf $(GOTEST_OUT) && mkdir -p $(GOTEST_OUT)
	@$(TOOLS_BUILD)
	LINT=auto hack/verify.sh main
	@$(call gotest,main,main module; vet ran above$(comma) so -vet=off; a line per package as it ends) ./... \
		| $(HEARTBEAT) 'go test (main module)'
	PROMTOOL_OPTIONAL=1 RULES_GO_TEST=0 hack/promtool-test.sh
	@$(TESTSUMMARY) -also='alert rules (see the promtool line above)' $(GOTEST_OUT)/main.json
	@echo "make test: ok. make test-all adds what CI runs: -race, every module, csi-sanity binary, docs curl lines and links, image and manifest tests."

.PHONY: test-all
test-all: build ## Everything CI tests (.ci/run calls it, as root); ~20 min cold.
	@rm -rf $(GOTEST_OUT) && mkdir -p $(GOTEST_OUT)
	@$(TOOLS_BUILD)
	hack/verify.sh main
	@export CGO_ENABLED=1 && $(call gotest,main-race,main module with -race; a first run compiles client-go$(comma) grpc and the Kubernetes API types with the race detector: ~10 min on 2 cores) \
		-race -count=1 ./... | $(HEARTBEAT) 'go test -race (main module)'
	hack/sanity.sh
	hack/readme-check.sh
	.ci/steps_test.sh
	hack/bench_args_test.sh
	RULES_GO_TEST=0 hack/promtool-test.sh
	hack/verify.sh modules
	@cd hack/kind && $(call gotest,hack-kind,hack/kind) -count=1 ./... | $(HEARTBEAT) 'go test (hack/kind)'
	@cd tests/e2e && export CGO_ENABLED=1 && $(call gotest,tests-e2e,tests/e2e (the suite skips: it needs a cluster$(comma) make e2e-local)) \
		-race -count=1 ./... | $(HEARTBEAT) 'go test -race (tests/e2e)'
	@$(TESTSUMMARY) -also='csi-sanity binary (mount and block), docs curl lines and links, alert rules, .ci/steps.sh' \
		$(GOTEST_OUT)/main-race.json $(GOTEST_OUT)/hack-kind.json $(GOTEST_OUT)/tests-e2e.json

.PHONY: verify
verify: ## The main module's gate: gofmt, vet, golangci-lint, go.mod, logcheck, docs.
	hack/verify.sh main

.PHONY: lint
lint: ## golangci-lint of every module (.golangci.yml); make verify: the main one.
	hack/lint.sh $$(hack/lint.sh -list)

.PHONY: verify-all
verify-all: ## make verify, then golangci-lint and go.mod tidiness of every other module.
	hack/verify.sh all

.PHONY: test-rules
test-rules: ## promtool check and unit tests of deploy/monitoring/rules.yaml.
	hack/promtool-test.sh

.PHONY: sanity
sanity: build ## Run the csi-sanity binary against the built driver and fake cloud.
	hack/sanity.sh

.PHONY: test-browser
test-browser: ## The web console in headless Chromium; skips without chromium.
	rm -rf _output/browser && mkdir -p _output/browser
	cd tests/browser && $(GO) test -count=1 -v -artifacts -outputdir=$(CURDIR)/_output/browser $(GOTESTFLAGS) ./... $(BROWSER_ARGS)
	@find _output/browser -name '*.png' 2>/dev/null | sed 's/^/screenshot: /' || true

.PHONY: fuzz
fuzz: ## Every Go fuzz target for FUZZTIME each (default 60s).
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

##@ e2e

.PHONY: e2e-local
e2e-local: e2e-local-build ## The e2e suite (S1-S20) on a local cluster of upstream binaries.
	cd tests/e2e && FAKECLOUD_E2E_LOCAL=1 $(GO) test -count=1 -timeout=30m -v . $(E2E_ARGS)

# The compatibility matrix's cells to run (tests/e2e/matrix/cells.json names, comma separated);
# empty, the default, runs every cell (all build from the module proxy; about 1.5 h on 2 cores,
# the first time plus the v1.35/v1.36 control planes' builds).
MATRIX_CELLS ?=

.PHONY: e2e-matrix
e2e-matrix: e2e-local-build ## KEP-4876 version matrix, MATRIX_CELLS (docs/compatibility.md).
	cd tests/e2e && $(GO) run ./cmd/matrix run --only=$(MATRIX_CELLS)

.PHONY: e2e-matrix-upgrade
e2e-matrix-upgrade: e2e-local-build ## Upgrade walk: kubelets 1.35 to 1.37, node by node (docs/compatibility.md).
	cd tests/e2e && $(GO) run ./cmd/matrix upgrade

# CI's skew cell (issue 27): the oldest kubelet a 1.37 control plane allows, its gate at the
# default (off): the driver must decide static and the count must not follow. MATRIX_CI_KUBELET
# is that cell's kubelet (cells.json), the one build it needs beyond the pinned set; were they
# ever to differ, the cell's run builds its own versions itself (right, only slower).
MATRIX_CI_CELL ?= cp1.37-kubelet1.34-gate-off-attacher4.13
MATRIX_CI_KUBELET ?= v1.34.4
# Its own copy of the doc and of the results file: a CI run must not rewrite the repo's.
MATRIX_CI_OUT := _output/matrix-ci

.PHONY: e2e-matrix-ci
e2e-matrix-ci: e2e-local-build ## CI's skew cell, MATRIX_CI_CELL; results in _output/matrix-ci.
	rm -rf $(MATRIX_CI_OUT) && mkdir -p $(MATRIX_CI_OUT)
	cp docs/compatibility.md $(MATRIX_CI_OUT)/compatibility.md
	cd tests/e2e && $(GO) run ./cmd/matrix run --only=$(MATRIX_CI_CELL) \
	  --results=$(CURDIR)/$(MATRIX_CI_OUT)/results.json --doc=$(CURDIR)/$(MATRIX_CI_OUT)/compatibility.md

.PHONY: e2e-matrix-ci-build
e2e-matrix-ci-build: localcluster ## Build MATRIX_CI_CELL's kubelet (.ci/run, in the background).
	$(LOCALCLUSTER) build --version=$(MATRIX_CI_KUBELET) --components=hollow-kubelet

# The kind cells (docs/compatibility.md): real kubelets on a kind worker, the node image's
# v1.37.2, then MATRIX_KIND_OLD_KUBELET's (built from the module proxy, cached by version) with
# its gate at the default and turned on by hand. OFFLINE=1 as for make e2e.
MATRIX_KIND_OLD_KUBELET ?= v1.34.4

.PHONY: e2e-matrix-kind
e2e-matrix-kind: localcluster ## KEP-4876 cells on kind, real kubelets 1.37 and 1.34 (docs/compatibility.md).
	KEEP_CLUSTER=$(KEEP_CLUSTER) OLD_KUBELET=$(MATRIX_KIND_OLD_KUBELET) LOCALCLUSTER_BIN=$(LOCALCLUSTER_BIN) hack/e2e-matrix-kind.sh

.PHONY: e2e
e2e: ## The e2e suite on kind: up, test, logs on failure, down.
	KEEP_CLUSTER=$(KEEP_CLUSTER) E2E_ARGS='$(E2E_ARGS)' hack/e2e-kind.sh

.PHONY: e2e-upstream
e2e-upstream: ## Kubernetes' own storage e2e (v1.37.2) on a local cluster.
	E2E_UPSTREAM_MODE=$(E2E_UPSTREAM_MODE) KEEP_CLUSTER=$(KEEP_CLUSTER) E2E_UPSTREAM_ARGS='$(E2E_UPSTREAM_ARGS)' hack/e2e-upstream.sh

.PHONY: e2e-upstream-build
e2e-upstream-build: localcluster ## Build e2e-upstream's suite binary and ginkgo (CI: in the background).
	$(LOCALCLUSTER) build-upstream
	$(GO) -C tests/e2e/upstream tool -n ginkgo

.PHONY: scale
scale: e2e-local-build ## Capacity reporting at scale on a local cluster (19 min).
	cd tests/e2e && $(GO) run ./cmd/scale --nodes=$(SCALE_NODES) --periods=$(SCALE_PERIODS) --out-dir=$(CURDIR)/_output/scale $(SCALE_ARGS)

.PHONY: scale-smoke
scale-smoke: e2e-local-build ## CI's smoke of make scale: 5 nodes, one 10 s period (2-3 min warm).
	cd tests/e2e && $(GO) run ./cmd/scale --nodes=5 --periods=10s --drain=1m --require-zero-stuck --out-dir=$(CURDIR)/_output/scale-smoke $(SCALE_ARGS)

.PHONY: up-local
up-local: e2e-local-build ## Start a local cluster and leave it running; prints KUBECONFIG.
	$(LOCALCLUSTER) up

.PHONY: down-local
down-local: localcluster ## Stop the cluster of the last up-local (its logs stay in its run folder).
	$(LOCALCLUSTER) down

.PHONY: e2e-local-build
e2e-local-build: localcluster ## Build the local cluster's v1.37.2 binaries (~20-40 min cold).
	$(LOCALCLUSTER) build

.PHONY: localcluster
localcluster: ## Build bin/localcluster, the local cluster tool of tests/e2e.
	@echo "building bin/localcluster (tests/e2e/localcluster/cmd/localcluster; the first build compiles client-go and the Kubernetes API types: a few minutes; later ones take seconds)"
	@cd tests/e2e && $(CURDIR)/hack/progress.sh "go build bin/localcluster" $(GO) build -v -o $(LOCALCLUSTER_BIN) ./localcluster/cmd/localcluster

.PHONY: deploy-check-local
deploy-check-local: e2e-local-build ## CI's check of deploy/: dry runs, then deploy/base applied and checked.
	hack/deploy-check-local.sh

.PHONY: deploy-dry-run
deploy-dry-run: ## Server-side dry run of deploy/base, kind, kind-offline against KUBECONFIG.
	hack/deploy-dry-run.sh

.PHONY: kind-up
kind-up: ## kind cluster with driver, fake cloud, sidecars (localhost:30080).
	hack/kind-up.sh

.PHONY: kind-down
kind-down: ## Delete the kind cluster of kind-up / e2e.
	hack/kind-down.sh

.PHONY: kind-images
kind-images: ## OFFLINE=1's images from Debian and the Go module proxy only.
	hack/kind/offline/install-deps.sh
	hack/kind/offline/dockerd.sh start
	hack/images.sh
	hack/kind/offline/kind-images.sh

.PHONY: images
images: ## Driver and fake cloud OCI archives in _output/images, no Docker.
	hack/images.sh

##@ Develop

.PHONY: docs-errors
docs-errors: ## Regenerate the matrix in docs/errors.md (make verify checks).
	go test ./pkg/cloud -run '^TestErrorsDoc$$' -count=1 -update

.PHONY: docs-graph
docs-graph: ## Regenerate docs/packages.md, the package graph (make verify checks).
	hack/pkggraph.sh

.PHONY: bench
bench: ## Benchmarks and the capacity-policy comparison (docs/figures.md).
	hack/bench.sh

.PHONY: clean
clean: ## Remove bin/, the image archives, the snapshot release, host-path's source.
	rm -rf $(BIN) _output/images _output/external-snapshotter _output/hostpath

.PHONY: help
help: ## List the targets, by group.
	@echo "Start here: make run (the main job), then make test. Details: docs/testing.md."
	@awk 'BEGIN {FS = ":.*## "} /^##@ / {printf "\n%s\n", substr($$0, 5)} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
