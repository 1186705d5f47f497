# Run `make` or `make help` for the targets. Engine tests need SLUICE_TEST_*_URL
# (see the README); `make ci` starts the engines and sets them.

# staticcheck 2026.2.2, fetched and built by go run (cached after the first run).
STATICCHECK := go run honnef.co/go/tools/cmd/staticcheck@v0.8.2

.DEFAULT_GOAL := help
.PHONY: help test test-race lint bench fuzz ci topology

help: ## print the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "} {printf "  %-10s %s\n", $$1, $$2}'

test: ## run every test once
	go test -count=1 ./...

test-race: ## run the tests with the race detector (the README's test command)
	go test -race -count=1 ./...

lint: ## gofmt, go vet and staticcheck
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	$(STATICCHECK) ./...

bench: ## run each Go benchmark once, as a smoke test (load a server with `sluice bench`; see docs/benchmarks.md)
	go test -run '^$$' -bench . -benchtime 1x ./...

fuzz: ## run every fuzz target briefly (bash .ci/fuzz)
	bash .ci/fuzz

ci: ## what CI runs: start the engines, then gofmt, vet, the race tests and fuzzing (bash .ci/run)
	bash .ci/run

DURATION ?= 10m
OUT ?= topology-out
topology: ## run the production topology under faults for DURATION (default 10m); the summary is printed and written to OUT/summary.json
	SLUICE_TOPOLOGY=1 go test -count=1 -timeout 2h -run TestTopology -v ./internal/topology/ -args -topology.duration $(DURATION) -topology.out $(abspath $(OUT))
	@cat $(OUT)/summary.txt
