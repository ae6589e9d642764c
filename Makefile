# rxgate. `make help` lists the targets.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
# The race detector needs cgo (a C compiler); without one the tests still run.
RACE    := $(shell [ "$$($(GO) env CGO_ENABLED)" = "1" ] && echo -race)
PKGS    := ./...

.PHONY: help sandbox test build bench bench-load bench-backends bench-read soak powercut test-failover fuzz lint lint-openapi tidy-check screenshots

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-11s %s\n", $$1, $$2}'

sandbox: ## run a throwaway sandbox with demo data (Ctrl-C stops it)
	$(GO) run -ldflags "$(LDFLAGS)" . sandbox $(ARGS)

# The packages whose tests take longest, first: go test starts packages
# in the order it is given them, -p (the number of cores) at a time, so
# these do not end up running alone at the end of the run.
SLOW_PKGS := ./testsuite/ ./app/cli/ ./storage/badger/ ./storage/postgres/ ./app/
TEST_PKGS := $(if $(filter ./...,$(PKGS)),$(SLOW_PKGS) $(PKGS),$(PKGS))

# With RXGATE_TEST_POSTGRES_URL set, the PostgreSQL backend's conformance
# suite and the replica tests run with the rest, and the queue's tests and
# the black-box testsuite run a second time on PostgreSQL. That second
# pass runs alongside the first, one package at a time (-p 1), its output
# kept until the first has printed: much of either pass waits (on
# PostgreSQL, fsync, subprocesses, the browser), so together they finish
# well before one after the other would. Tests whose server is not an
# in-process one on the pass's backend skip in it (testsuite: badgerPassOnly).
test: ## run every test (PostgreSQL too when RXGATE_TEST_POSTGRES_URL is set)
	@pg=""; pglog=""; \
	if [ -n "$$RXGATE_TEST_POSTGRES_URL" ]; then \
		pglog=$$(mktemp); \
		RXGATE_TEST_STORE=postgres $(GO) test $(RACE) -count=1 -timeout 10m -p 1 ./testsuite/ ./queue/ >"$$pglog" 2>&1 & pg=$$!; \
	else \
		echo "PostgreSQL tests skipped: set RXGATE_TEST_POSTGRES_URL (e.g. postgres://postgres@127.0.0.1:5432/test) to run them"; \
	fi; \
	echo "$(GO) test $(RACE) -count=1 -timeout 10m $(TEST_PKGS)"; \
	$(GO) test $(RACE) -count=1 -timeout 10m $(TEST_PKGS); rc=$$?; \
	if [ -n "$$pg" ]; then \
		wait $$pg; pgrc=$$?; \
		echo "== the testsuite and the queue again, on PostgreSQL"; \
		cat "$$pglog"; rm -f "$$pglog"; \
		[ $$pgrc -eq 0 ] || rc=$$pgrc; \
	fi; \
	exit $$rc

build: ## build the static binary ./rxgate
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o rxgate .

bench: ## run the benchmarks (bench-load, bench-backends and bench-read apart)
	$(GO) test -run '^$$' -bench . -skip 'BenchmarkLoad|BenchmarkBackends|BenchmarkRead' -benchmem -count=1 $(PKGS)

bench-load: ## load the real binary on loopback: webhooks and durable creates (3 rounds, a few minutes; RXGATE_TEST_DURABILITY=journal|syncwrites)
	$(GO) test -run '^$$' -bench BenchmarkLoad -benchtime 1x -count=1 -timeout 30m ./testsuite/

bench-read: ## the partner page against a bare Echo handler with wrk: one token, rotating tokens, 304 (READ_BENCH_SECONDS=10, READ_BENCH_TOKENS=40000, READ_BENCH_PERF=dir for perf profiles)
	@command -v wrk >/dev/null 2>&1 || { echo "bench-read: wrk is missing; apt-get install -y wrk"; exit 0; }; \
	$(GO) test -run '^$$' -bench '^BenchmarkRead$$' -benchtime 1x -count=1 -timeout 30m ./testsuite/

bench-backends: ## the product on Badger, PostgreSQL and three PostgreSQL replicas side by side (needs RXGATE_TEST_POSTGRES_URL)
	$(GO) test -run '^$$' -bench BenchmarkBackends -benchtime 1x -count=1 -timeout 30m ./testsuite/

soak: ## kill -9 the real binary under load and check nothing is lost (SOAK_KILLS=500, SOAK_SECONDS=600)
	$(GO) test -tags soak -run '^TestSoak$$' -count=1 -v -timeout 3h ./testsuite/

powercut: ## cut the power under the real binary and check nothing is lost (root, loop devices, mkfs.ext4 or xfsprogs; POWERCUTS=200 per mode, POWERCUT_FS=ext4|xfs, POWERCUT_DURABILITY=journal|syncwrites)
	$(GO) test -tags powercut -run '^TestPowercut$$' -count=1 -v -timeout 6h ./testsuite/

test-failover: ## switch the PostgreSQL primary under two replicas and load, check nothing is lost (root, pg_autoctl; FAILOVERS=20)
	$(GO) test -tags failover -run '^TestFailover$$' -count=1 -v -timeout 3h ./testsuite/

# A target that ends with nothing but "context deadline exceeded" hit Go's
# fuzz coordinator race at the end of -fuzztime (golang/go#75804, fixed in
# Go 1.27): no input failed and none was written, so it is reported and the
# run goes on. Any other failure, and every written crasher, fails it.
fuzz: ## run each fuzz target for FUZZTIME (default 20s)
	@for t in $$(grep -rhoE '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' . | sed 's/func //' | sort -u); do \
		pkg=$$(grep -rlE "^func $$t\(" --include='*_test.go' . | head -1 | xargs dirname); \
		echo "== $$pkg $$t"; \
		out=$$($(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $${FUZZTIME:-20s} $$pkg 2>&1); rc=$$?; echo "$$out"; \
		if [ $$rc -ne 0 ]; then \
			if echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -qE 'Failing input written|panic:|_test.go:[0-9]+:'; then \
				echo "fuzz: $$t stopped on Go's fuzztime race (golang/go#75804); no input failed"; \
			else exit 1; fi; \
		fi; \
	done

lint: ## go vet and gofmt
	$(GO) vet $(PKGS)
	$(GO) vet -tags soak ./testsuite/
	$(GO) vet -tags powercut ./testsuite/
	$(GO) vet -tags failover ./testsuite/
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Pinned versions of the OpenAPI linters partners' tooling runs.
SPECTRAL := @stoplight/spectral-cli@6.15.0
REDOCLY  := @redocly/cli@1.34.5

lint-openapi: ## lint both OpenAPI documents with Spectral and Redocly: no error, no warning (needs npx)
	@command -v npx >/dev/null 2>&1 || { echo "lint-openapi: npx is missing; install nodejs and npm"; exit 1; }
	cd app/openapi/lint && npx -y $(SPECTRAL) lint --fail-severity=warn --ruleset .spectral.yaml ../partner.yaml ../admin.yaml
	@cd app/openapi/lint && out=$$(npx -y $(REDOCLY) lint --config redocly.yaml ../partner.yaml ../admin.yaml 2>&1); \
		echo "$$out"; echo "$$out" | grep -q "Woohoo" && ! echo "$$out" | grep -qE "You have [0-9]+ warning|error"

screenshots: ## run the console's browser test and keep its screenshots in docs/console (needs chromium)
	RXGATE_TEST_REQUIRE_BROWSER=1 RXGATE_TEST_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -run '^TestConsoleInBrowser$$' -count=1 ./testsuite/

tidy-check: ## fail when go.mod or go.sum are not tidy
	$(GO) mod tidy -diff
