# Switchboard: the interface is these targets.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X github.com/switchboard-mcp/switchboard/host/internal/cli.Version=$(VERSION)
PLUGINS   := filesystem bash git web switchboard
# Where make build pins bin/switchboard-builtins into the host.
BUILTINS_PIN := github.com/switchboard-mcp/switchboard/host/internal/builtins.ServeBinaryPin
# Where make build pins bin/switchboard-sandbox (the sandbox helper) into the host.
HELPER_PIN   := github.com/switchboard-mcp/switchboard/host/internal/loader.HelperPin
SHA256       = $$( (sha256sum $(1) 2>/dev/null || shasum -a 256 $(1)) | cut -c1-64)
CONFIG    ?= config.hcl

# Pinned generator versions for `make proto`.
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0

# The Go modules that make test and make lint cover: the host's (the root,
# with the built-in plugins and examples/conformance), the plugin SDK's
# (sdk/go.mod) and the example plugin's (examples/hello/go.mod). `go test
# ./...` stops at a nested module, so each is run in its own folder.
# (deploy/validate is a module of its own too, run by make deploy-check.)
MODULES   := . sdk examples/hello

.PHONY: all build run test conformance bench bench-fs lint proto release clean deploy-check

all: build

## build: bin/switchboard and every bin/switchboard-plugin-*
## (the host, the sandbox helper and bin/switchboard-builtins static: the
## helper runs before every confined start, and a dynamic loader would add
## to each). switchboard-builtins (the built-ins without the host's code)
## and switchboard-sandbox first: the host pins their SHA-256s
## (builtins.ServeBinaryPin, loader.HelperPin) and runs each only when the
## file beside it matches; otherwise it re-executes itself (about twice the
## CPU time per start).
build:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/switchboard-builtins ./host/cmd/switchboard-builtins
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/switchboard-sandbox ./host/cmd/switchboard-sandbox
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -X $(BUILTINS_PIN)=$(call SHA256,$(BIN)/switchboard-builtins) -X $(HELPER_PIN)=$(call SHA256,$(BIN)/switchboard-sandbox)" \
		-o $(BIN)/switchboard ./host/cmd/switchboard
	@for p in $(PLUGINS); do \
		echo "$(GO) build -o $(BIN)/switchboard-plugin-$$p ./plugins/$$p/cmd/switchboard-plugin-$$p"; \
		$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/switchboard-plugin-$$p ./plugins/$$p/cmd/switchboard-plugin-$$p || exit 1; \
	done
	cd examples/hello && $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(CURDIR)/$(BIN)/switchboard-plugin-hello .
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/switchboard-plugin-conformance ./examples/conformance

## run: build, then serve the default config over stdio
run: build
	@echo "Starting Switchboard on $(CONFIG). MCP clients start it themselves; see README.md, 'Connect a client'." >&2
	$(BIN)/switchboard serve --config $(CONFIG)

## test: the whole suite with the race detector, every module in $(MODULES)
## (what CI runs)
test:
	@for m in $(MODULES); do \
		echo "== module $$m: $(GO) test -race -count=1 -timeout 15m ./..."; \
		(cd $$m && $(GO) test -race -count=1 -timeout 15m ./...) || exit 1; \
	done

## conformance: the official MCP conformance suite's server scenarios against
## examples/conformance through `switchboard serve --http`; fails on any failure
## (installs Node 22 and the pinned suite into bin/tools on first use)
conformance:
	examples/conformance/run.sh

## deploy-check: the deployment files in deploy/ without a cluster: the
## Kubernetes manifests decoded strictly into the k8s.io/api types and checked
## against each other, the ConfigMap's config through `switchboard validate`,
## the Nomad job parsed as HCL, the Dockerfile's shape, static binaries
## (deploy/validate is a module of its own: the host's module has no k8s deps)
## (into bin/deploy-check/, so that make build's pinned host in bin/ stays)
deploy-check:
	@mkdir -p $(BIN)/deploy-check
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/deploy-check/switchboard ./host/cmd/switchboard
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/deploy-check/switchboard-sandbox ./host/cmd/switchboard-sandbox
	cd deploy/validate && SWITCHBOARD=$(CURDIR)/$(BIN)/deploy-check/switchboard SWITCHBOARD_SANDBOX=$(CURDIR)/$(BIN)/deploy-check/switchboard-sandbox $(GO) test -count=1 ./...

## bench: benchmarks (figures, not tests)
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 2000x -count 1 -timeout 60m ./host/internal/bench/

## bench-fs: the filesystem built-in against ripgrep and find (a part of make bench)
bench-fs: build
	$(GO) test -run '^$$' -bench BenchmarkFilesystem -benchtime 2000x -count 1 -timeout 30m ./host/internal/bench/

## chaos: 32 callers over stdio and 32 over HTTP at once (two hosts on one config)
## while plugins and an external server are SIGKILLed, SIGSTOPped, print garbage
## on stdout, flood stderr and exhaust memory, and the config is reloaded; prints
## calls answered/unanswered, host RSS and goroutines before/after, processes
## left, and fails past the bounds it states (SWITCHBOARD_CHAOS_SECONDS, default
## 90; SWITCHBOARD_CHAOS_LOGS=DIR keeps the hosts' logs; not part of make test)
chaos:
	SWITCHBOARD_CHAOS=1 $(GO) test -count=1 -v -timeout 10m -run TestChaos ./host/internal/chaos/

GOLANGCI_LINT_VERSION := v2.15.0

## lint: go vet and golangci-lint (.golangci.yml; pinned, installed into bin/tools on first use),
## every module in $(MODULES)
lint:
	@test -x $(BIN)/tools/golangci-lint || GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	@for m in $(MODULES); do \
		echo "== module $$m: go vet, golangci-lint"; \
		(cd $$m && $(GO) vet ./... && $(CURDIR)/$(BIN)/tools/golangci-lint run --timeout 10m ./...) || exit 1; \
	done

## proto: regenerate sdk/protocol/pluginv1 from sdk/proto (needs protoc)
proto:
	@command -v protoc >/dev/null || { echo "protoc is missing: apt-get install protobuf-compiler"; exit 1; }
	@mkdir -p $(BIN)/tools
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH=$(CURDIR)/$(BIN)/tools:$$PATH protoc -I sdk/proto \
		--go_out=sdk --go_opt=module=github.com/switchboard-mcp/switchboard/sdk \
		--go-grpc_out=sdk --go-grpc_opt=module=github.com/switchboard-mcp/switchboard/sdk \
		sdk/proto/switchboard/plugin/v1/plugin.proto

GORELEASER_VERSION := v2.15.1

## release: archives of the host and of each built-in and example plugin for
## linux and darwin (amd64, arm64), zips of web, hello and conformance for
## windows (amd64, arm64), with SHA256SUMS in dist/: goreleaser
## (.goreleaser.yaml) in snapshot mode, offline, nothing published; pinned,
## installed into bin/tools on first use. MINISIGN_SECRET_KEY=FILE also signs
## SHA256SUMS (dist/SHA256SUMS.minisig). switchboard-builtins and
## switchboard-sandbox are built for each host platform first
## (bin/release-builtins/OS_ARCH): each host archive ships them, and that
## platform's host is built with their SHA-256s (as make build pins them).
## Then checks the sums, that every host archive holds the two binaries its
## host pins, and the plugin authors' template examples/hello/.goreleaser.yaml.
RELEASE_HOSTS := linux_amd64 linux_arm64 darwin_amd64 darwin_arm64
release:
	@$(BIN)/tools/goreleaser --version 2>/dev/null | grep -Eq 'GitVersion:[[:space:]]*v?$(GORELEASER_VERSION:v%=%)$$' || \
		{ echo "installing goreleaser $(GORELEASER_VERSION) into $(BIN)/tools"; GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install github.com/goreleaser/goreleaser/v2@$(GORELEASER_VERSION); }
	@rm -rf $(BIN)/release-builtins
	@for p in $(RELEASE_HOSTS); do for b in builtins sandbox; do \
		echo "$(GO) build switchboard-$$b for $$p"; \
		CGO_ENABLED=0 GOOS=$${p%_*} GOARCH=$${p#*_} $(GO) build -trimpath -ldflags '-s -w' \
			-o $(BIN)/release-builtins/$$p/switchboard-$$b ./host/cmd/switchboard-$$b || exit 1; \
	done; done
	env $$(for p in $(RELEASE_HOSTS); do \
		printf 'BUILTINS_PIN_%s=%s HELPER_PIN_%s=%s ' $$p $(call SHA256,$(BIN)/release-builtins/$$p/switchboard-builtins) $$p $(call SHA256,$(BIN)/release-builtins/$$p/switchboard-sandbox); done) \
		$(BIN)/tools/goreleaser release --snapshot --clean --parallelism 2 $(if $(MINISIGN_SECRET_KEY),,--skip=sign)
	cd dist && sha256sum --strict -c SHA256SUMS
	@for p in $(RELEASE_HOSTS); do \
		d=$$(mktemp -d) && tar -xzf dist/switchboard_*_$$p.tar.gz -C $$d && \
		for b in builtins sandbox; do \
			test -x $$d/switchboard-$$b && grep -q $(call SHA256,$$d/switchboard-$$b) $$d/switchboard || \
			{ echo "release: dist/switchboard_*_$$p.tar.gz lacks switchboard-$$b, or its host is not pinned to it"; rm -rf $$d; exit 1; }; \
		done; rm -rf $$d; \
	done; echo "release: every host archive holds the built-ins' binary and the sandbox helper its host pins"
	@n=$$(ls dist/*.tar.gz | wc -l); test "$$n" -eq 28 || { echo "release: $$n archives in dist/, want 28 (7 per platform)"; exit 1; }
	@n=$$(ls dist/*_windows_*.zip | wc -l); test "$$n" -eq 6 || { echo "release: $$n Windows zips in dist/, want 6 (web, hello, conformance on amd64 and arm64)"; exit 1; }
	cd examples/hello && ../../$(BIN)/tools/goreleaser check

clean:
	rm -rf $(BIN) dist
