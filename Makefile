# fakecloud-csi: the entry points the README names. `make help` lists them.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
TOOLS     := $(GO) tool -modfile=tools/go.mod
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT    ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/fakecloud/fakecloud-csi/pkg/version.Version=$(VERSION) \
             -X github.com/fakecloud/fakecloud-csi/pkg/version.Commit=$(COMMIT)
GOTESTFLAGS ?=
# One set of build flags for every go command make runs (builds, vet, tests, the local cluster's
# components, the images): static and path-free, as the images and Kubernetes releases are, so
# that each dependency (client-go, grpc, ...) compiles once into the build cache instead of once
# per flag set. Only the race build needs cgo; it is its own variant whatever we do.
export CGO_ENABLED := 0
export GOFLAGS := -trimpath $(filter-out -trimpath,$(shell $(GO) env GOFLAGS))
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
# The admin token make scenario passes; SCENARIO_TOKEN= (empty) with SCENARIO_ARGS=--token-file=F uses a file instead.
SCENARIO_TOKEN ?= demo-admin-token
SCENARIO_ARGS ?=
FAKECLOUD_PORT ?= 8080

# Each go test run of `make test` and `make test-all` goes through hack/testsummary: the output
# of go test without -v (package lines, failed tests in full), a line every 30 s while it only
# compiles, then one line per run, and at the end one line for all of them: packages, tests
# passed, failed, skipped and why. Their go test runs pass -vet=off: hack/verify.sh has just run
# the full go vet (a superset of go test's vet checks) on the same packages.
SUMMARY := _output/test-summary.jsonl
TESTSUMMARY = $(CURDIR)/$(BIN)/testsummary -record=$(CURDIR)/$(SUMMARY)

##@ Run

.PHONY: build
build: ## Build bin/driver and bin/fakecloud with version and commit stamped.
	@echo "building bin/driver and bin/fakecloud (the first build compiles gRPC, client-go and the Prometheus client: a few minutes; later ones take seconds)"
	@hack/progress.sh "go build bin/driver" $(GO) build -v -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/driver ./cmd/driver
	@hack/progress.sh "go build bin/fakecloud" $(GO) build -v -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/fakecloud ./cmd/fakecloud

.PHONY: run
run: build ## Main job: fake cloud + controller + one node plugin per instance, on this machine (no Kubernetes).
	hack/run.sh

.PHONY: scenario
scenario: build ## Run the timeline SCENARIO (examples/scenarios/*.yaml, default quota-squeeze) against `make run`'s fake cloud on FAKECLOUD_PORT, once its plugins are settled (up to --settle-timeout); SCENARIO_ARGS=--dry-run prints it only; SCENARIO_TOKEN (demo-admin-token) is the admin token.
	$(BIN)/fakecloud scenario --cloud-url=http://127.0.0.1:$(FAKECLOUD_PORT) $(if $(SCENARIO_TOKEN),--token=$(SCENARIO_TOKEN)) $(SCENARIO_ARGS) $(SCENARIO)

.PHONY: scenario-local
scenario-local: ## Run SCENARIO on `make up-local`'s cluster while recording, then write its capacity plot to _output/scenario (SCENARIO_ARGS='--map-instance=node-a2=node-1 ...' for that cluster's node names).
	cd tests/e2e && $(GO) run ./cmd/capacityplot --run-dir=current --scenario=$(CURDIR)/$(SCENARIO) --out-dir=$(CURDIR)/_output/scenario $(SCENARIO_ARGS)

##@ Test

.PHONY: test
test: ## The newcomer's check (~13 min cold on 2 cores, under a minute warm): make verify, the main module's unit + integration tests with in-process csi-sanity and fuzz seed corpora (no -race; unchanged packages' results come from Go's test cache: GOTESTFLAGS=-count=1 reruns all), alert rules with a promtool if one is found (else skipped, saying so). One summary line.
	@mkdir -p _output && rm -f $(SUMMARY)
	@hack/progress.sh "go build bin/testsummary" $(GO) build -v -o $(BIN)/testsummary ./hack/testsummary
	hack/verify.sh main
	@echo "go test ./... (main module; vet ran above, so -vet=off; a line per package as it ends, one every 30 s while it compiles)"
	$(GO) test -json -vet=off $(GOTESTFLAGS) ./... | $(TESTSUMMARY) -label='main module'
	PROMTOOL_OPTIONAL=1 RULES_GO_TEST=0 hack/promtool-test.sh
	@$(BIN)/testsummary -total=$(SUMMARY) -also='alert rules (see the promtool line above)'
	@echo "make test: ok. make test-all adds what CI runs: -race, every module, csi-sanity binary, docs curl lines and links, image and manifest tests."

.PHONY: test-all
test-all: build ## Everything CI tests (.ci/run calls it, as root): verify-all; every test with -race, -count=1; csi-sanity binary (mount and block; Node specs need root); docs curl lines and links; alert rules (never skipped; PROMTOOL, hack/promtool-test.sh); hack/kind's image and manifest tests; tests/e2e's unit tests. ~20 min cold on 2 cores.
	@mkdir -p _output && rm -f $(SUMMARY)
	@hack/progress.sh "go build bin/testsummary" $(GO) build -v -o $(BIN)/testsummary ./hack/testsummary
	hack/verify.sh main
	@echo "go test -race ./... (main module; a first run compiles client-go, grpc and the Kubernetes API types with the race detector: ~10 min on 2 cores; a line per package as it ends, one every 30 s while it compiles)"
	CGO_ENABLED=1 $(GO) test -json -race -count=1 -vet=off $(GOTESTFLAGS) ./... | $(TESTSUMMARY) -label='main module, race'
	hack/sanity.sh
	hack/readme-check.sh
	RULES_GO_TEST=0 hack/promtool-test.sh
	hack/verify.sh modules
	cd hack/kind && $(GO) test -json -count=1 -vet=off $(GOTESTFLAGS) ./... | $(TESTSUMMARY) -label=hack/kind
	cd tests/e2e && CGO_ENABLED=1 $(GO) test -json -race -count=1 -vet=off $(GOTESTFLAGS) ./... | $(TESTSUMMARY) -label='tests/e2e (the suite skips: it needs a cluster, make e2e-local)'
	@$(BIN)/testsummary -total=$(SUMMARY) -also='csi-sanity binary (mount and block), docs curl lines and links, alert rules'

.PHONY: verify
verify: ## The main module's gate: gofmt (every file), go vet, go.mod tidiness, contextual klog (logcheck), docs/packages.md current; make test runs it first.
	hack/verify.sh main

.PHONY: verify-all
verify-all: ## make verify, then go vet and go.mod tidiness of every other module (hack/kind, tests/e2e, tests/browser, tools, ...); make test-all runs it.
	hack/verify.sh all

.PHONY: test-rules
test-rules: ## promtool check + unit tests of deploy/monitoring/rules.yaml; PrometheusRule and runbook consistency. promtool: PROMTOOL=path|debian (Debian's package, seconds)|pinned (tools/promtool, ~10 min cold); unset, the one on PATH or cached, else pinned.
	hack/promtool-test.sh

.PHONY: sanity
sanity: build ## Run the csi-sanity binary (pinned in tools/go.mod) against the built driver and fake cloud.
	hack/sanity.sh

.PHONY: test-browser
test-browser: ## The web console (GET /ui) in headless Chromium via chromedp (tests/browser, its own module): screenshots in _output/browser; skips, saying so, without chromium. BROWSER_ARGS=-update-screenshot also rewrites docs/console.png.
	rm -rf _output/browser && mkdir -p _output/browser
	cd tests/browser && $(GO) test -count=1 -v -artifacts -outputdir=$(CURDIR)/_output/browser $(GOTESTFLAGS) ./... $(BROWSER_ARGS)
	@find _output/browser -name '*.png' 2>/dev/null | sed 's/^/screenshot: /' || true

.PHONY: fuzz
fuzz: ## Every Go fuzz target (fake cloud requests, identifier checks, CSI validation) for FUZZTIME each (default 60s); `make test` runs their seed corpora only.
	FUZZTIME=$(FUZZTIME) hack/fuzz.sh

##@ e2e

.PHONY: e2e-local
e2e-local: e2e-local-build ## The e2e suite (S1-S20) on a local cluster of upstream binaries, no Docker (E2E_ARGS='-run TestS03').
	cd tests/e2e && FAKECLOUD_E2E_LOCAL=1 $(GO) test -count=1 -timeout=30m -v . $(E2E_ARGS)

.PHONY: e2e
e2e: ## The e2e suite on kind, real kubelets and containers: up, test, logs on failure, down (OFFLINE=1; KEEP_CLUSTER=1 keeps it; E2E_ARGS='-run TestS01'; E2E_UPSTREAM=ci|all then runs the upstream storage e2e on the same cluster).
	KEEP_CLUSTER=$(KEEP_CLUSTER) E2E_ARGS='$(E2E_ARGS)' hack/e2e-kind.sh

.PHONY: e2e-upstream
e2e-upstream: ## Kubernetes' own storage e2e (v1.37.2 test/e2e/storage/external) on a local cluster: the suites that need no container; JUnit in the run's logs/ (E2E_UPSTREAM_MODE=kubeconfig KUBECONFIG=...: every applicable suite on that cluster; E2E_UPSTREAM_SET=ci, E2E_UPSTREAM_PROCS=N).
	E2E_UPSTREAM_MODE=$(E2E_UPSTREAM_MODE) KEEP_CLUSTER=$(KEEP_CLUSTER) E2E_UPSTREAM_ARGS='$(E2E_UPSTREAM_ARGS)' hack/e2e-upstream.sh

.PHONY: scale
scale: e2e-local-build ## Capacity reporting at scale: one local cluster grown through the node counts (SCALE_NODES=10,30,100) × CSIDriver period (SCALE_PERIODS=10s,30s,60s) under churn; JSON, table and plot in _output/scale (19 min on 2 quiet cores).
	cd tests/e2e && $(GO) run ./cmd/scale --nodes=$(SCALE_NODES) --periods=$(SCALE_PERIODS) --out-dir=$(CURDIR)/_output/scale $(SCALE_ARGS)

.PHONY: scale-smoke
scale-smoke: e2e-local-build ## CI's smoke of make scale: 5 nodes, one 10 s period; fails if a pod stays in ContainerCreating (2-3 min warm).
	cd tests/e2e && $(GO) run ./cmd/scale --nodes=5 --periods=10s --drain=1m --require-zero-stuck --out-dir=$(CURDIR)/_output/scale-smoke $(SCALE_ARGS)

.PHONY: up-local
up-local: e2e-local-build ## Start a local cluster and leave it running; prints KUBECONFIG and curl lines.
	$(LOCALCLUSTER) up

.PHONY: down-local
down-local: localcluster ## Stop the cluster of the last up-local (its logs stay in its run folder).
	$(LOCALCLUSTER) down

.PHONY: e2e-local-build
e2e-local-build: localcluster ## Build etcd, kube-apiserver, -controller-manager, -scheduler, hollow kubelet, csi-attacher, -provisioner, -resizer, -snapshotter, snapshot-controller (v1.37.2) into the cache; only what is missing (~20-40 min cold; "step N/M" and the elapsed time every 30 s).
	$(LOCALCLUSTER) build

.PHONY: localcluster
localcluster: ## Build bin/localcluster, the local cluster tool of tests/e2e (the e2e targets run it); a line every 30 s while it compiles.
	@echo "building bin/localcluster (tests/e2e/localcluster/cmd/localcluster; the first build compiles client-go and the Kubernetes API types: a few minutes; later ones take seconds)"
	@cd tests/e2e && $(CURDIR)/hack/progress.sh "go build bin/localcluster" $(GO) build -v -o $(LOCALCLUSTER_BIN) ./localcluster/cmd/localcluster

.PHONY: deploy-check-local
deploy-check-local: e2e-local-build ## CI's check of deploy/kind without Docker: server-side dry run against a local v1.37.2 API server.
	hack/deploy-check-local.sh

.PHONY: deploy-dry-run
deploy-dry-run: ## Server-side dry run of every deploy/kind manifest against KUBECONFIG.
	hack/deploy-dry-run.sh

.PHONY: kind-up
kind-up: ## kind cluster with the driver, fake cloud and sidecars (Docker and Go; OFFLINE=1: no registry, builds every image); fake cloud on localhost:30080.
	hack/kind-up.sh

.PHONY: kind-down
kind-down: ## Delete the kind cluster of kind-up / e2e; stop the dockerd OFFLINE=1 started.
	hack/kind-down.sh

.PHONY: kind-images
kind-images: ## OFFLINE=1's images from Debian packages and the Go module proxy only: Kubernetes binaries, kind node image, sidecars (cached in ~/.cache/fakecloud-csi).
	hack/kind/offline/install-deps.sh
	hack/kind/offline/dockerd.sh start
	hack/images.sh
	hack/kind/offline/kind-images.sh

.PHONY: images
images: ## Driver and fake cloud images without a Docker daemon: OCI archives in _output/images (kind load image-archive).
	hack/images.sh

##@ Develop

.PHONY: docs-graph
docs-graph: ## Regenerate docs/packages.md, the package graph from `go list` (make verify checks it).
	hack/pkggraph.sh

.PHONY: bench
bench: ## Benchmarks and the capacity-policy comparison; prints the ratios the README quotes.
	hack/bench.sh

.PHONY: clean
clean: ## Remove build output: bin/, the image archives and the fetched snapshot release (kind's kubeconfig and logs in _output/kind stay).
	rm -rf $(BIN) _output/images _output/external-snapshotter

.PHONY: help
help: ## List the targets, by group.
	@echo "Start here: make run (the main job, no Kubernetes) and make test (a first run ~13 min on 2 cores, then under a minute)."
	@awk 'BEGIN {FS = ":.*## "} /^##@ / {printf "\n%s\n", substr($$0, 5)} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
