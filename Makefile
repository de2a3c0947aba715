# Prosody build and test entry points. Every target installs or builds what
# it needs, so each works on a fresh clone (see README.md).

GO       ?= go
GOTEST   ?= $(GO) test -race -count=1 -timeout 30m
SERVICES := scripts/services

.DEFAULT_GOAL := help
.PHONY: wheels npm-prebuilds test-dist help deps services-up services-down services-status test test-scripts test-go test-python test-node demo lint fmt lib test-c install example bench bench-quick bench-c bench-timers fuzz fuzz-short

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

deps: ## install what a fresh machine lacks (Java 17, Maven, Go modules)
	@scripts/install-deps

services-up: deps ## start Kafka (localhost:9094; SASL_SSL 9096, mTLS 9097), Cassandra (9042) and cassandra-auth (9043, TLS + login), reusing healthy ones
	@$(SERVICES) start

services-down: ## stop the test services and delete their data
	@$(SERVICES) stop

services-status: ## report whether each test service answers
	@$(SERVICES) status

test: services-up test-scripts test-go fuzz-short test-c test-python test-node chaos-short test-dist ## start the services if needed, then run every test suite

test-scripts: ## tests of the scripts that need no service (which process a pid file of scripts/services names)
	bash tests/scripts/services_test.sh

test-go: ## Go tests with the race detector (needs the services: make services-up)
	$(GOTEST) ./...
	$(GOTEST) -tags capitest ./capi
	$(GOTEST) -tags capitest,prosody_pipefd -run 'WakeFD|Notify|Poll' ./capi # the pipe that replaces the eventfd off Linux

# The boundary's fuzz targets: the JSON configuration, the payload id/type
# scanner (against encoding/json) and trace header decoding.
FUZZ_TARGETS := ./core/config:FuzzFromJSON ./core/payload:FuzzMeta ./core/tracing:FuzzHeaders
FUZZTIME     ?= 10m

# fuzz-short counts executions rather than seconds: a duration ends in a
# deadline, and the fuzzer sometimes reports the deadline itself as a
# failure ("context deadline exceeded"), twice in a row on a loaded machine.
# 30,000 executions take about 10 s here.
fuzz-short: ## each fuzz target for 30,000 executions, about 10 s each (part of make test)
	@$(MAKE) --no-print-directory fuzz FUZZTIME=30000x

# A real finding is written to testdata/fuzz ("Failing input written")
# and fails the target. A failed run that wrote no input is the fuzzer's
# own machinery (its race at the end of -fuzztime, "context deadline
# exceeded", or a worker that lost its coordinator on a loaded machine),
# not a finding: the target runs once more, and fails if that run fails.
fuzz: ## each fuzz target for FUZZTIME (default 10m), one worker each; findings land in testdata/fuzz
	@set -e; log=$$(mktemp); trap 'rm -f $$log' EXIT; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== fuzz $$name ($$pkg) for $(FUZZTIME)"; \
		rc=0; $(GO) test -run XXX -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -timeout 0 -parallel 1 $$pkg >$$log 2>&1 || rc=$$?; \
		cat $$log; \
		if [ $$rc -ne 0 ]; then \
			if ! grep -q 'Failing input written' $$log; then \
				echo "== the fuzzer failed without a failing input, not a finding: $$name again"; \
				$(GO) test -run XXX -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -timeout 0 -parallel 1 $$pkg; \
			else exit 1; fi; \
		fi; \
	done

.PHONY: chaos-short chaos chaos-planted
# The fault harness (docs/reliability.md) on its own Kafka and Cassandra.
chaos-short: ## every fault kind once against Go, Python and Node members (about 6 minutes; part of make test)
	scripts/chaos/run short

CHAOS_DURATION ?= 32m
chaos: ## the long fault soak (CHAOS_DURATION, default 32m; CHAOS_SEED to replay), seed printed
	scripts/chaos/run long -duration $(CHAOS_DURATION) $(if $(CHAOS_SEED),-seed $(CHAOS_SEED))

chaos-planted: ## the harness built with scripts/chaos/planted-bug.patch must report commit-past-unhandled, the unpatched one pass (about 3 minutes)
	scripts/chaos/run planted

test-python: ## build the Python package into build/python-venv; mypy --strict and pytest (mock + services)
	bindings/python/run-tests.sh

test-node: ## build the Node package (addon + libprosody.so); tsc --strict, node --test (mock + services), npm pack install check
	bindings/node/run-tests.sh
	bindings/node/pack-check.sh

demo: lib ## mock-mode demos: Go (two clients, per-key order, timers), then the README's Quick Starts (Go, Python, Node, C) and keyed-state examples
	$(GO) run ./cmd/prosody-demo
	PROSODY_LOG=warn $(GO) run ./examples/go/quickstart
	bindings/python/run-demo.sh
	bindings/node/run-demo.sh
	@mkdir -p build/c
	$(CC) -Wall -Wextra -O2 -Iinclude examples/c/quickstart.c -L$(LIB_DIR) -lprosody \
		-Wl,-rpath,$(CURDIR)/$(LIB_DIR) -lpthread -o build/c/quickstart
	PROSODY_LOG=warn build/c/quickstart

# The workflows' linter, as a Go module (built once into the module cache).
ACTIONLINT := github.com/rhysd/actionlint/cmd/actionlint@v1.7.12

lint: ## gofmt, go vet, actionlint on .github/workflows, one version everywhere
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags capitest ./capi
	@# The wheels and npm packages are built for macOS too: the Go packages
	@# must compile there (capi needs cgo, which a cross vet does not have).
	GOOS=darwin GOARCH=arm64 $(GO) vet $$($(GO) list ./... | grep -v /capi$$)
	$(GO) run $(ACTIONLINT) .github/workflows/*.yml
	python3 scripts/dist version --check

fmt: ## format the Go sources
	gofmt -w $$(git ls-files '*.go')

# The C ABI (capi/ -> build/lib/libprosody.so, contract include/prosody.h).
# exports.map keeps the dynamic symbol table to the public prosody_*
# functions; go build's cache makes rebuilding cheap, so lib always runs.
LIB_DIR := build/lib
PREFIX  ?= /usr/local

lib: ## build the C library build/lib/libprosody.so
	@mkdir -p $(LIB_DIR)
	$(GO) build -buildmode=c-shared \
		-ldflags "-extldflags '-Wl,--version-script=$(CURDIR)/capi/exports.map -Wl,-soname,libprosody.so'" \
		-o $(LIB_DIR)/libprosody.so ./capi
	@rm -f $(LIB_DIR)/libprosody.h # cgo's generated header; include/prosody.h is the contract

test-c: lib ## C ABI tests under AddressSanitizer, ABI/header check, fork, pkg-config, real Kafka
	tests/c/run.sh

example: lib ## run the C example (mock mode)
	@mkdir -p build/c
	$(CC) -Wall -Wextra -O2 -Iinclude examples/c/prosody_example.c -L$(LIB_DIR) -lprosody \
		-Wl,-rpath,$(CURDIR)/$(LIB_DIR) -lpthread -o build/c/prosody_example
	build/c/prosody_example

bench-c: lib ## events/s through the C ABI vs the Go engine alone, same real-Kafka topic
	@mkdir -p build/c
	$(CC) -Wall -O2 -Iinclude tests/c/bench.c -L$(LIB_DIR) -lprosody -Wl,-rpath,$(CURDIR)/$(LIB_DIR) \
		-lpthread -o build/c/prosody_bench_c
	$(GO) run ./tests/c/benchgo $(BENCH_ARGS)

bench: ## every benchmark (about half an hour on 2 cores), into docs/bench/results.json, its plots and docs/benchmarks.md's tables (BENCH_FLAGS: --quick, --only IDS)
	scripts/bench $(BENCH_FLAGS)

bench-quick: ## every benchmark at a small size (about 10 minutes), same outputs as bench
	scripts/bench --quick $(BENCH_FLAGS)

bench-timers: ## mixed timer benchmark: Go, Python, Node and the original prosody-events 0.4.0 readers (TIMER_BENCH_ARGS)
	python3 -m venv build/python-venv
	build/python-venv/bin/python -m pip install -q .
	npm ci --no-audit --no-fund
	scripts/original-venv >/dev/null
	$(GO) build -o build/prosody-timer-bench ./cmd/prosody-timer-bench
	build/prosody-timer-bench mixed -readers go,python,node,python-original $(TIMER_BENCH_ARGS)

# Release artifacts, cross-built here with a pinned Zig (scripts/dist).
wheels: ## Python wheels for every platform (manylinux and macOS, x86-64 and arm64; stable ABI) and the sdist into dist/python, checked by auditwheel and abi3audit
	python3 scripts/dist wheels
	python3 scripts/dist check-wheels

npm-prebuilds: ## npm packages of prebuilt binaries for every platform and the main package that depends on them, into dist/npm
	npm ci --ignore-scripts --no-audit --no-fund
	python3 scripts/dist npm

test-dist: ## the x86-64 and aarch64 Linux wheels and npm binaries built, checked and installed without Go or a compiler: the Quick Starts, the aarch64 ones under qemu
	python3 scripts/dist wheels linux-x64-gnu linux-arm64-gnu
	python3 scripts/dist check-wheels
	python3 scripts/dist smoke-wheels
	npm ci --ignore-scripts --no-audit --no-fund
	python3 scripts/dist npm linux-x64-gnu linux-arm64-gnu
	python3 scripts/dist smoke-npm

install: lib ## install libprosody.so, prosody.h and prosody.pc under PREFIX (default /usr/local)
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include
	install -m 0755 $(LIB_DIR)/libprosody.so $(DESTDIR)$(PREFIX)/lib/libprosody.so
	install -m 0644 include/prosody.h $(DESTDIR)$(PREFIX)/include/prosody.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|'"$$(sed -n 's/^#define PROSODY_VERSION "\(.*\)"/\1/p' include/prosody.h)"'|g' \
		capi/prosody.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/prosody.pc
