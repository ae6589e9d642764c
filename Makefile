# rxgate. `make help` lists the targets.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# The race detector needs cgo (a C compiler); without one the tests still run.
RACE    := $(shell [ "$$($(GO) env CGO_ENABLED)" = "1" ] && echo -race)
PKGS    := ./...

.PHONY: help sandbox test build bench bench-load soak fuzz lint tidy-check

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-11s %s\n", $$1, $$2}'

sandbox: ## run a throwaway sandbox with demo data (Ctrl-C stops it)
	$(GO) run -ldflags "$(LDFLAGS)" . sandbox $(ARGS)

test: ## run every test
	$(GO) test $(RACE) -count=1 -timeout 10m $(PKGS)

build: ## build the static binary ./rxgate
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o rxgate .

bench: ## run the benchmarks (bench-load apart)
	$(GO) test -run '^$$' -bench . -skip BenchmarkLoad -benchmem -count=1 $(PKGS)

bench-load: ## load the real binary on loopback: webhooks and durable creates (3 rounds, a few minutes)
	$(GO) test -run '^$$' -bench BenchmarkLoad -benchtime 1x -count=1 -timeout 30m ./testsuite/

soak: ## kill -9 the real binary under load and check nothing is lost (SOAK_KILLS=500, SOAK_SECONDS=600)
	$(GO) test -tags soak -run '^TestSoak$$' -count=1 -v -timeout 3h ./testsuite/

fuzz: ## run each fuzz target for FUZZTIME (default 20s)
	@for t in $$(grep -rhoE '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' . | sed 's/func //' | sort -u); do \
		pkg=$$(grep -rlE "^func $$t\(" --include='*_test.go' . | head -1 | xargs dirname); \
		echo "== $$pkg $$t"; $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $${FUZZTIME:-20s} $$pkg || exit 1; \
	done

lint: ## go vet and gofmt
	$(GO) vet $(PKGS)
	$(GO) vet -tags soak ./testsuite/
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

tidy-check: ## fail when go.mod or go.sum are not tidy
	$(GO) mod tidy -diff
