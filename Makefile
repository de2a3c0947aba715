# Prosody build and test entry points. Every target installs or builds what
# it needs, so each works on a fresh clone (see README.md).

GO       ?= go
GOTEST   ?= $(GO) test -race -count=1 -timeout 30m
SERVICES := scripts/services

.DEFAULT_GOAL := help
.PHONY: help deps services-up services-down services-status test test-go demo lint fmt

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

deps: ## install what a fresh machine lacks (Java 17, Maven, Go modules)
	@scripts/install-deps

services-up: deps ## start Kafka (localhost:9094) and Cassandra (localhost:9042), reusing healthy ones
	@$(SERVICES) start

services-down: ## stop the test services and delete their data
	@$(SERVICES) stop

services-status: ## report whether each test service answers
	@$(SERVICES) status

test: services-up test-go ## start the services if needed, then run every test suite

test-go: ## Go tests with the race detector (needs the services: make services-up)
	$(GOTEST) ./...

demo: ## run the mock-mode demo: produce, consume, check per-key order
	$(GO) run ./cmd/prosody-demo

lint: ## gofmt and go vet
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

fmt: ## format the Go sources
	gofmt -w $$(git ls-files '*.go')
