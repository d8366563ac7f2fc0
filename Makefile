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

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## Build bin/driver and bin/fakecloud with version and commit stamped.
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/driver ./cmd/driver
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/fakecloud ./cmd/fakecloud

.PHONY: run
run: build ## Main job: fake cloud + controller + one node plugin per instance, on this machine (no Kubernetes).
	hack/run.sh

.PHONY: test
test: verify build ## Everything CI checks: verify, unit + integration tests (race), csi-sanity (in process and binary), README curl lines.
	$(GO) test -race -count=1 $(GOTESTFLAGS) ./...
	hack/sanity.sh
	hack/readme-check.sh

.PHONY: verify
verify: ## gofmt, go vet, go.mod tidiness of every module.
	hack/verify.sh

.PHONY: sanity
sanity: build ## Run the csi-sanity binary (pinned in tools/go.mod) against the built driver and fake cloud.
	hack/sanity.sh

.PHONY: bench
bench: ## Benchmarks and the capacity-policy comparison; prints the ratios the README quotes.
	hack/bench.sh

.PHONY: clean
clean: ## Remove build output.
	rm -rf $(BIN)
