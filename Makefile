# Run `make` or `make help` for the targets. Engine tests need SLUICE_TEST_*_URL
# (see the README); `make ci` starts the engines and sets them.

# staticcheck 2026.2.2, fetched and built by go run (cached after the first run).
STATICCHECK := go run honnef.co/go/tools/cmd/staticcheck@v0.8.2

# Release builds: static binaries, the version set at link time. The
# Dockerfile and .goreleaser.yaml build with the same flags (a test checks).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
RELEASE_FLAGS := -trimpath -ldflags "-s -w -X main.version=$(VERSION)"
PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
# Tools from the Go module proxy, built by go run (cached after the first run).
GORELEASER := go run github.com/goreleaser/goreleaser/v2@v2.15.1
HELM := go run helm.sh/helm/v3/cmd/helm@v3.22.0

.DEFAULT_GOAL := help
.PHONY: help build test test-race test-faults test-deploy lint bench fuzz ci topology scale release release-check deploy-check bench-callgrind

help: ## print the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  %-13s %s\n", $$1, $$2}'

build: ## build bin/sluice for this machine, stripped as releases are (about 56 MB; a warm rebuild takes seconds)
	go build $(RELEASE_FLAGS) -o bin/sluice ./cmd/sluice

test: ## the README's test command: every package with the race detector, each result printed as it finishes (bash .ci/test; 7 min on 2 cores, 15 at load 10)
	bash .ci/test

test-race: test ## the same as make test

test-faults: ## the multi-process fault tests (chaos, failover, clusters, load) and the topology's small mode (bash .ci/faults; about 6 min)
	bash .ci/faults

test-deploy: ## the deploy recipes: Helm chart and Dockerfile build tests, goreleaser check, helm lint, systemd verify (bash .ci/deploy; about 6 min the first time)
	bash .ci/deploy

lint: ## gofmt, go vet and staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	$(STATICCHECK) ./...

bench: ## run each Go benchmark once, as a smoke test (load a server with `sluice bench`; see docs/benchmarks.md)
	go test -run '^$$' -bench . -benchtime 1x ./...

bench-callgrind: ## instructions per allowed check, memory store against x/time/rate sharded, under callgrind (bash .ci/bench-callgrind; see docs/benchmarks.md)
	bash .ci/bench-callgrind

fuzz: ## run every fuzz target briefly (bash .ci/fuzz)
	bash .ci/fuzz

ci: ## what CI runs: start the engines, then gofmt, vet, staticcheck, make test, make test-faults, fuzzing and make test-deploy (bash .ci/run)
	bash .ci/run

DURATION ?= 10m
OUT ?= topology-out
topology: ## run the production topology under faults for DURATION (default 10m); the summary is printed and written to OUT/summary.json
	SLUICE_TOPOLOGY=1 go test -count=1 -timeout 2h -run TestTopology -v ./internal/topology/ -args -topology.duration $(DURATION) -topology.out $(abspath $(OUT))
	@cat $(OUT)/summary.txt

SCALE_FRACTION ?= 1
SCALE_ENGINES ?= sqlite,postgres
SCALE_OUT ?= scale-out
scale: build ## the scale curve: grow SQLite and PostgreSQL (SLUICE_TEST_POSTGRES_URL) to 10M links, 100M clicks and 17M notifications, and 10M rate limit keys, measuring at each step (SCALE_FRACTION=0.01 for a quick run, SCALE_ENGINES=sqlite for one engine); the table is printed and written to SCALE_OUT/results.md
	SLUICE_SCALE=1 SLUICE_SCALE_BIN=$(abspath bin/sluice) go test -count=1 -timeout 3h -run TestScale -v ./internal/bench/scale/ -args -scale.fraction $(SCALE_FRACTION) -scale.engines $(SCALE_ENGINES) -scale.out $(abspath $(SCALE_OUT))
	@cat $(SCALE_OUT)/results.md

release: ## static sluice binaries for linux and darwin, amd64 and arm64, and SHA-256 checksums in dist/ (VERSION=v1.2.3)
	@rm -rf dist && mkdir -p dist
	@for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=dist/sluice_$(VERSION)_$${os}_$${arch}; \
		echo "building $$out/sluice"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build $(RELEASE_FLAGS) -o $$out/sluice ./cmd/sluice || exit 1; \
		tar -C $$out -czf $$out.tar.gz sluice; \
	done
	cd dist && sha256sum *.tar.gz > checksums.txt && cat checksums.txt

release-check: ## validate .goreleaser.yaml (goreleaser check); `goreleaser release --snapshot --clean` builds the same locally
	$(GORELEASER) check

deploy-check: ## helm lint and helm template the chart, systemd-analyze verify the unit (what CI runs)
	$(HELM) lint deploy/helm/sluice
	$(HELM) template sluice deploy/helm/sluice >/dev/null
	bash .ci/systemd-verify
