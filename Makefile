# goverbs' habits as make targets. The two that matter:
#   make demo   boot the rxe test VM and run the main job
#   make test   everything CI checks, VM integration tests included
#
# Integration tests run in a qemu VM with Debian's 6.1 kernel and real rxe
# devices (hack/vm); `go test -exec` builds on the host and runs each test
# binary in the guest, where GOVERBS_REQUIRE_DEVICE=1 makes a missing device a
# failure instead of a skip.

SHELL    := /bin/bash
GO       ?= go
PKGS     ?= ./...
VMEXEC   := $(CURDIR)/hack/vm/go-test-exec
LOGDIR   := $(CURDIR)/.cache/test
GOVERBS  := $(CURDIR)/bin/goverbs

.PHONY: all test deps vet fmt-check unit generate generate-check cross integration demo bench fuzz build clean

all: build

## deps: install what the project needs on a Debian 12 machine (as root)
deps:
	hack/vm/install-deps.sh
	@command -v gcc >/dev/null && test -r /usr/include/rdma/ib_user_verbs.h || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc libc6-dev linux-libc-dev; }

## test: vet, gofmt, unit tests (race), generation check, arm64 build, VM integration tests
test: deps vet fmt-check unit generate-check cross integration

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## unit: host tests (device tests skip here), with the race detector
unit:
	$(GO) test -race -count=1 $(PKGS)

## generate: regenerate the ABI from /usr/include/rdma
generate:
	$(GO) generate ./uverbs

generate-check:
	uverbs/mkabi.sh -check

cross:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(PKGS)
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build $(PKGS)

## integration: every package's tests in the VM against real rxe devices
integration:
	@mkdir -p $(LOGDIR)
	@set -o pipefail; $(GO) test -race -count=1 -v -exec $(VMEXEC) $(PKGS) 2>&1 | tee $(LOGDIR)/integration.log
	@n=$$(grep -c 'goverbs-integration: using RDMA device' $(LOGDIR)/integration.log); \
	if [ "$$n" -eq 0 ]; then echo "integration: no test used an RDMA device"; exit 1; fi; \
	echo "integration: $$n device tests ran in the VM; $$(grep -c '^--- PASS' $(LOGDIR)/integration.log) passed, $$(grep -c '^--- SKIP' $(LOGDIR)/integration.log) skipped, $$(grep -c '^--- FAIL' $(LOGDIR)/integration.log) failed"

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(GOVERBS) ./cmd/goverbs

## demo: boot the test VM and run the main job
demo: deps build
	hack/vm/run.sh -- hack/demo.sh $(GOVERBS)

## bench: Go benchmarks in the VM, then Go vs rdma-core ping-pong, side by side in one boot
bench:
	$(GO) test -run '^$$' -bench . -benchmem -exec $(VMEXEC) $(PKGS)
	GOVERBS_PINGPONG_BENCH=1 $(GO) test -count=1 -v -run TestPingpongBench -exec $(VMEXEC) ./cmd/goverbs

## fuzz: a short run of every fuzz target
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzParseAttrs -fuzztime 20s ./internal/rdmanl
	$(GO) test -run '^$$' -fuzz FuzzParseMessages -fuzztime 20s ./internal/rdmanl
	$(GO) test -run '^$$' -fuzz FuzzPollCQ -fuzztime 20s ./internal/rxe
	$(GO) test -run '^$$' -fuzz FuzzSendWR -fuzztime 20s ./qp
	$(GO) test -run '^$$' -fuzz FuzzEvent -fuzztime 20s ./cm

clean:
	rm -rf bin .cache/test
