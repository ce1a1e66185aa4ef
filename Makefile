# goverbs' habits as make targets. The two that matter:
#   make demo   boot the rxe test VM and run the main job
#   make test   everything CI checks, VM integration tests included
#
# Integration tests run in a qemu VM with a real Debian 12 kernel and real rxe
# devices (hack/vm), once per kernel in KERNELS; hack/vm/batch.sh builds the
# test binaries on the host and runs them in two guests that take them from
# one queue (hack/vm/go-test-exec does the same for `go test -exec`, one
# boot per package), where GOVERBS_REQUIRE_DEVICE=1 makes a missing device a
# failure instead of a skip.

SHELL    := /bin/bash
GO       ?= go
PKGS     ?= ./...
VMEXEC   := $(CURDIR)/hack/vm/go-test-exec
LOGDIR   := $(CURDIR)/.cache/test
GOVERBS  := $(CURDIR)/bin/goverbs
# Kernel series the integration suite runs on (hack/vm/fetch-kernel.sh takes
# the newest build of each); the first is the newest, used by make demo.
KERNELS  ?= 6.12 6.1
# go test's -timeout governs each package's test binary. The slowest,
# cmd/goverbs, takes about 9 minutes on an idle 2-core machine: 40 minutes
# leaves room for a busy machine. The VM's own limit is longer still, so that
# go test's timeout fires first and prints the stacks.
TEST_TIMEOUT ?= 40m
export GOVERBS_VM_TIMEOUT ?= 3000
# Packages whose tests touch neither a device nor the kernel: the API
# checks (internal/testutil/apicheck type-checks the whole module: 131 s
# in a 6.12 guest under TCG), the log summarizer (hack/testsum), the
# provider seam's layout and lock, the object table, the errno a failed
# connect of rsocket and valkeyrdma wraps (internal/rdmaconn), and the
# tools' and examples' argument and format parsers (none skips on the
# host). unit runs them with -race on the host; the amd64 VM stages leave
# them out, since a guest adds nothing to what they check and costs a
# boot each (10-15 s). test-arm64 keeps them: it is their only arm64 run.
HOST_ONLY_RE ?= /(internal/testutil/apicheck|hack/testsum|internal/provider|internal/provider/registry|internal/provider/mlx5|internal/provider/mlx5/difftest|internal/kobj|internal/rdmaconn|examples/rpma/internal/common|internal/tools/(cmcommon|rping|pingpong))$$
# $(call vm-pkgs[,RE]) in a recipe: PKGS without HOST_ONLY_RE's packages
# (and RE's).
vm-pkgs = $$($(GO) list $(PKGS) | grep -v -E -e '$(HOST_ONLY_RE)'$(if $(1), -e '$(1)'))
# The VM stages run their packages' test binaries through hack/vm/batch.sh:
# VM_JOBS guests at once (as go test -p 2 ran two), each taking the next
# binary from one queue, so that a stage boots VM_JOBS times instead of
# once per package (8-15 s each: 41 packages on 6.12, 24 on 6.1, 22 on siw,
# 30 on arm64). Each guest's limit, GOVERBS_VM_TIMEOUT, covers its share of
# the stage and one binary's TEST_TIMEOUT: the longest share, 6.12's, took
# about 15 minutes in a fresh-clone run.
VM_JOBS ?= 2
VM_BATCH = GOVERBS_VM_TIMEOUT=5400 GO=$(GO) hack/vm/batch.sh -j $(VM_JOBS)
# VM_SKIP: tests that touch no device, which unit runs with -race on the
# host and a guest would only run again, slowly: rsocket's protocol
# simulations (TestSimTransfer: 14 s on the host under -race, 203 s in
# the 6.12 guest). The amd64 stages skip them; test-arm64 runs them, as
# their only arm64 run.
VM_SKIP ?= ^(TestSimTransfer|TestSimTransferMsgSend)$$
# CMD_SPLIT: cmd/goverbs' longest tests (its interop matrices), one
# batch entry of their own, the rest of its tests another: as one binary
# it took 1044 s of the 6.12 stage and 543 s of 6.1's, longer than all the
# other packages of 6.1 together.
CMD_SPLIT ?= ^(TestPerfInterop|TestPingpongInterop|TestRpingInterop|TestMckeyInterop)$$
# $(call vm-entries,PACKAGES,SKIP) in a recipe: batch.sh's entries for
# PACKAGES (a shell word, as vm-pkgs gives) with the -skip pattern SKIP,
# longest first: cmd/goverbs in two (CMD_SPLIT), rsocket and qp, then the
# rest in go list's order.
vm-entries = $$(skip='$(2)'; pkgs=$(1); \
	for p in $$pkgs; do case $$p in */cmd/goverbs) \
		echo "$$p@"'$(CMD_SPLIT)'"@$$skip"; echo "$$p@@$${skip:+$$skip|}"'$(CMD_SPLIT)';; esac; done; \
	for p in $$pkgs; do case $$p in */rsocket|*/qp) echo "$$p@@$$skip";; esac; done; \
	for p in $$pkgs; do case $$p in */cmd/goverbs|*/rsocket|*/qp) ;; *) echo "$$p@@$$skip";; esac; done)
# Nested modules: directories with a go.mod of their own, so that the
# library's go.mod keeps only x/sys and go-cmp; the root's ./... does not
# reach them. Each is vetted, cross-built, unit-tested and tested on the
# test bed from its own directory, with the same flags as the root's
# packages (rsocket/nettest: x/net/nettest's TestConn; examples/grpc:
# gRPC-Go over rsocket; examples/valkey: valkey-go over valkeyrdma). bench/cgo
# is not one of them: it needs cgo.
MODULES  ?= rsocket/nettest examples/grpc examples/valkey
# $(call in-modules,COMMAND): COMMAND in each of MODULES' directories, each
# one even when an earlier one failed; the status is the last failure's.
in-modules = rc=0; for m in $(MODULES); do echo "== module $$m: $(1)"; (cd $$m && $(1)) || rc=$$?; done; exit $$rc

.PHONY: all test deps vet fmt-check unit generate generate-check cross integration $(addprefix integration-,$(KERNELS)) demo bench bench-pvrdma bench-cmtime bench-rstream bench-valkey faults-valkey fuzz fuzz-long build clean

all: build

## deps: install what the project needs on a Debian 12 machine (as root)
deps:
	hack/vm/install-deps.sh
	@# The nested modules' dependencies (gRPC, x/net), fetched here so that
	@# a cold machine's missing module fails this stage, not a test stage.
	@$(call in-modules,$(GO) mod download)

## test: the per-submission run, what CI runs on every landing: BASE_STAGES,
## then the extra stages of one rotation slot (ROTATION_0..2), chosen by the
## committed number in .ci/rotation (ROTATION, mod 3; `make rotate` advances
## it). Each submission advances it once, so any three consecutive landings
## together run every stage of make test-full. Every stage runs even when an
## earlier one failed (hack/test-stages.sh), then one summary: each stage's
## result, time and counts, the rotation slot, the time against CI_BUDGET
## and CI's limit, every failed test with its output's last lines; full logs
## in .cache/test/stages/STAGE.log. Exit status non-zero if any stage failed.
## test-full: BASE_STAGES and every slot's stages, in one command.
## docs/testing.md has the stages' measured times and why each is where it is.
BASE_STAGES ?= deps vet fmt-check unit generate-check cross test-mlx5 \
	integration-$(firstword $(KERNELS)) faults
ROTATION_0 ?= $(addprefix integration-,$(wordlist 2,$(words $(KERNELS)),$(KERNELS))) test-valkey faults-valkey
ROTATION_1 ?= test-arm64 test-siw test-mlx5-arm64
ROTATION_2 ?= test-pvrdma-full
ROTATION ?= $(shell cat $(CURDIR)/.ci/rotation 2>/dev/null || echo 0)
rotation-slot = $(shell echo $$(( $(ROTATION) % 3 )))
TEST_STAGES ?= $(BASE_STAGES) $(ROTATION_$(rotation-slot))
FULL_STAGES ?= $(BASE_STAGES) $(ROTATION_0) $(ROTATION_1) $(ROTATION_2)
# CI_BUDGET: the seconds a per-submission run should take (CI's limit is
# 5400 s for all of .ci/run); the summary warns past it, it fails nothing.
export CI_BUDGET ?= 3000
export CI_LIMIT ?= 5400
.PHONY: test-full rotate
test:
	@TEST_ROTATION="slot $(rotation-slot) of 3 ($(strip $(ROTATION_$(rotation-slot)))), from .ci/rotation = $(ROTATION); the other slots: $(strip $(foreach i,0 1 2,$(if $(filter $(i),$(rotation-slot)),,$(i) ($(strip $(ROTATION_$(i)))))))" \
		hack/test-stages.sh $(TEST_STAGES)
test-full:
	@TEST_ROTATION="none: make test-full runs every slot" hack/test-stages.sh $(FULL_STAGES)
## rotate: advance .ci/rotation by one (commit it with the submission)
rotate:
	@n=$$(( $$(cat .ci/rotation 2>/dev/null || echo 0) + 1 )); echo $$n > .ci/rotation; \
	echo "rotate: .ci/rotation = $$n: the next make test runs slot $$((n % 3)) ($(strip $(ROTATION_0)) / $(strip $(ROTATION_1)) / $(strip $(ROTATION_2)))"

vet:
	$(GO) vet $(PKGS)
	@$(call in-modules,$(GO) vet ./...)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## unit: host tests (device tests skip here), with the race detector
unit:
	$(GO) test -race -count=1 -v -timeout 10m $(PKGS)
	@$(call in-modules,$(GO) test -race -count=1 -v -timeout 10m ./...)

## generate: regenerate the ABI (uverbs/z*.go, uverbs/abi.pin) from the newest
## Debian 12 linux-headers-6.12.*-common (fetched into .cache, never installed).
## Run it after editing uverbs/types_linux.go or mkabi.sh, or to adopt newer
## kernel headers when generate-check reports them.
generate:
	uverbs/mkabi.sh

## generate-check: the committed ABI is what mkabi.sh generated from its pin
generate-check:
	uverbs/mkabi.sh -check

cross:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build $(PKGS)
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build $(PKGS)
	@$(call in-modules,CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -o /dev/null ./...)
	@$(call in-modules,CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -o /dev/null ./...)

## integration: every package's tests (MODULES' too; not HOST_ONLY_RE's) in the VM against real rxe devices, on
## each kernel in KERNELS (integration-6.12 / integration-6.1 run one)
integration: $(addprefix integration-,$(KERNELS))

## bed-STAGE: build what STAGE's VMs need (packages, kernel, siw.ko, arm64
## userland, initramfs) without booting: hack/vm/run.sh --prepare. make test
## runs it before the stage, so a bed that cannot be built fails the stage
## once, with the bed's own error, before any test binary asks for it.
.PHONY: $(addprefix bed-integration-,$(KERNELS)) bed-test-arm64 bed-faults bed-test-siw
$(addprefix bed-integration-,$(KERNELS)): bed-integration-%:
	GOVERBS_KERNEL=$* hack/vm/run.sh --prepare
bed-test-arm64:
	GOVERBS_VM_ARCH=arm64 GOVERBS_KERNEL=6.12 hack/vm/run.sh --prepare
bed-faults:
	hack/vm/run.sh --prepare --link listen:1:169.254.77.11
bed-test-siw:
	GOVERBS_PROVIDER=siw GOVERBS_KERNEL=$(SIW_KERNEL) hack/vm/run.sh --prepare

# KERNELS_LIGHT: kernels whose integration stage runs without the race
# detector, without LIGHT_SKIP_RE's packages and without LIGHT_CMD_SKIP's
# tests, for CI's time (with them the 6.1 stage took 1637 s on a slow
# machine, where it takes about 500 s without). Data races are the Go code's,
# and 6.1 runs the same provider code as 6.12 (rxe), which runs -race, as
# does unit; what a second kernel checks is the kernel's side: every
# library package and cmd/goverbs' interop with rdma-core's tools. The
# nested modules (nettest's TestConn, gRPC) keep -race: they are short.
# (Without it TestConn/small/ConcurrentMethods hung once on 6.1: a wake-up
# lost in internal/pollfd, since fixed; 100 runs without -race passed.)
# LIGHT_SKIP_RE: librpma's example programs against ours (examples/rpma,
# 812 s of that stage's 3000 s of test binaries), a protocol between
# user-space programs (C's and ours) whose kernel side rpma's own tests
# cover on every kernel and provider; they run on 6.12 (rxe).
# LIGHT_CMD_SKIP: the tools' option handling, as test-arm64 leaves out
# (ARM64_CMD_SKIP).
# GOVERBS_LEAK_CYCLES=short (testutil.LeakCycles): every stage but 6.12's
# runs the leak tests' create/destroy loops a tenth as long (1,000 cycles
# of MR, CQ, QP, SRQ and AH instead of 10,000, which took 180 s on 6.1 and
# 207 s on arm64 on a slow machine). A leak per cycle shows after any
# number of cycles; the full count runs once, on 6.12.
KERNELS_LIGHT ?= 6.1
LIGHT_SKIP_RE ?= /examples/rpma/
LIGHT_CMD_SKIP ?= $(ARM64_CMD_SKIP)
light = $(filter $(1),$(KERNELS_LIGHT))
$(addprefix integration-,$(KERNELS)): integration-%: bed-integration-%
	@mkdir -p $(LOGDIR)
	@echo "== integration on kernel $*$(if $(call light,$*), (KERNELS_LIGHT: no -race, no $(LIGHT_SKIP_RE), no option tests))"
	@set -o pipefail; start=$$SECONDS; export GOVERBS_KERNEL=$*$(if $(call light,$*), GOVERBS_LEAK_CYCLES=short); \
	{ $(VM_BATCH) -name integration-$* -timeout $(TEST_TIMEOUT) $(if $(call light,$*),,-race) $(call vm-entries,$(call vm-pkgs,$(if $(call light,$*),$(LIGHT_SKIP_RE))),$(VM_SKIP)$(if $(call light,$*),|$(LIGHT_CMD_SKIP))) && rc=0 || rc=$$?; \
	  mstart=$$SECONDS; ($(call in-modules,$(GO) test -race -count=1 -v -timeout $(TEST_TIMEOUT) -exec $(VMEXEC) ./...)) || rc=$$?; \
	  echo "integration-$*: nested modules ($(MODULES)): $$((SECONDS - mstart)) s"; \
	  exit $$rc; } 2>&1 | tee $(LOGDIR)/integration-$*.log; \
	rc=$$?; echo "integration-$*: $$((SECONDS - start)) s"; exit $$rc
	@grep -E '^(ok|FAIL)[[:space:]]' $(LOGDIR)/integration-$*.log | sed 's/^/integration-$*: /'
	@# No device test may skip in the VM unless the device lacks a capability.
	@hack/vm/check-integration-log.sh $(LOGDIR)/integration-$*.log | sed 's/^/integration-$*: /'; exit $${PIPESTATUS[0]}

## test-arm64: the same on an arm64 kernel (hack/vm with GOVERBS_VM_ARCH=arm64,
## 6.12 only): every library package's tests, and cmd/goverbs' devinfo and
## Go <-> C interop (pingpong rc/uc/ud/srq, rping, ucmatose, udaddy) against
## rdma-core's arm64 tools. No -race: on arm64 it needs cgo. Measured: 1901 s
## on the loaded 2-core machine, of which cmd/goverbs 1265 s (its package
## binary, hence the timeout); librpma's examples (examples/rpma: their
## interop matrix) stay out, since their C peers build with the guest's gcc:
## about 3 min under TCG, and 10 min in all.
ARM64_TIMEOUT ?= 45m
ARM64_CMD_RUN ?= Devinfo|RXE|Usage|Pingpong|Rping|Udaddy|Ucmatose|CM
# Left out on arm64 for CI time: the bench, and the option-handling tests
# (validation, rx depths, error exits, persistent servers), which exercise
# flags and exit codes, not the rings; the interop matrices stay whole.
ARM64_CMD_SKIP ?= TestPingpongBench|TestPingpongValidate|TestPingpongRxDepth|TestRpingErrors|TestRpingPersistent
.PHONY: test-arm64
test-arm64: bed-test-arm64
	@mkdir -p $(LOGDIR)
	@echo "== arm64 (kernel 6.12)"
	@set -o pipefail; start=$$SECONDS; export GOARCH=arm64 CGO_ENABLED=0 GOVERBS_VM_ARCH=arm64 GOVERBS_KERNEL=6.12 GOVERBS_LEAK_CYCLES=short; \
	$(VM_BATCH) -name arm64 -timeout $(ARM64_TIMEOUT) './cmd/goverbs@$(ARM64_CMD_RUN)@$(ARM64_CMD_SKIP)' \
	  $(call vm-entries,$$($(GO) list $(PKGS) | grep -v -e /cmd/ -e /examples/),) 2>&1 | tee $(LOGDIR)/arm64.log; \
	rc=$$?; echo "test-arm64: $$((SECONDS - start)) s"; exit $$rc
	@grep -E '^(ok|FAIL)[[:space:]]' $(LOGDIR)/arm64.log | sed 's/^/test-arm64: /'
	@hack/vm/check-integration-log.sh $(LOGDIR)/arm64.log | sed 's/^/test-arm64: /'; exit $${PIPESTATUS[0]}

## test-valkey: valkeyrdma's tests in one boot (VALKEY_KERNEL) with valkey-server
## 8.1.1 built with RDMA (hack/vm/build-valkey.sh: once, on the host, into
## .cache/valkey): the Go client against the server (SET/GET, a pipeline of
## 10,000 commands, values beyond the RX buffers, pub/sub, MULTI/EXEC, 8
## connections, CLIENT KILL, the server killed), examples/valkey (valkey-go
## over RDMA) against it, and Valkey's C client (tests/rdma/rdma-test)
## against the Go listener
VALKEY_KERNEL ?= $(firstword $(KERNELS))
VALKEY_EXAMPLE := $(CURDIR)/.cache/valkey-example
.PHONY: bed-test-valkey test-valkey
bed-test-valkey:
	hack/vm/build-valkey.sh >/dev/null
	cd examples/valkey && CGO_ENABLED=0 $(GO) build -trimpath -o $(VALKEY_EXAMPLE) .
	GOVERBS_KERNEL=$(VALKEY_KERNEL) hack/vm/run.sh --prepare
test-valkey: bed-test-valkey
	@mkdir -p $(LOGDIR)
	@echo "== valkey on kernel $(VALKEY_KERNEL), one boot"
	@set -o pipefail; start=$$SECONDS; \
	export GOVERBS_VALKEY=$$(hack/vm/build-valkey.sh) GOVERBS_VALKEY_EXAMPLE=$(VALKEY_EXAMPLE) GOVERBS_KERNEL=$(VALKEY_KERNEL); \
	GO=$(GO) hack/vm/batch.sh -name valkey -timeout 20m -race ./valkeyrdma 2>&1 | tee $(LOGDIR)/valkey.log; \
	rc=$$?; echo "test-valkey: $$((SECONDS - start)) s"; exit $$rc
	@grep -E '^(ok|FAIL)[[:space:]]' $(LOGDIR)/valkey.log | sed 's/^/test-valkey: /'
	@hack/vm/check-integration-log.sh $(LOGDIR)/valkey.log | sed 's/^/test-valkey: /'; exit $${PIPESTATUS[0]}

## build: static bin/goverbs, and librpma's examples as bin/NN-name
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(GOVERBS) ./cmd/goverbs
	CGO_ENABLED=0 $(GO) build -trimpath -o $(CURDIR)/bin/ ./examples/rpma/...

## demo: boot the test VM and run the main job
demo: deps build
	GOVERBS_KERNEL=$(firstword $(KERNELS)) hack/vm/run.sh -- hack/demo.sh $(GOVERBS)

## bench: one table from one VM boot (6.1 unless GOVERBS_KERNEL): C (libibverbs) vs goverbs vs cgo, interleaved rounds, median per-round ratios
BENCH_OUT ?= $(CURDIR)/.cache/bench
# BENCH_ROWS: row-name prefixes to run (bench/run.sh); empty runs every row.
BENCH_ROWS ?=
BENCH_ROUNDS ?= 7
# bench-wrap,NAME,BIN,VAR=VALUE: writes the column bench-NAME, a script
# that runs bench-BIN with VAR=VALUE in its environment.
bench-wrap = printf '\043!/bin/sh\n%s exec "$$(dirname "$$0")/bench-%s" "$$@"\n' '$(3)' '$(2)' > $(BENCH_OUT)/bench-$(1) && chmod +x $(BENCH_OUT)/bench-$(1)
bench:
	@mkdir -p $(BENCH_OUT)
	gcc -O2 -Wall -o $(BENCH_OUT)/bench-c bench/c/main.c bench/c/bench.c -libverbs -lpthread
	CGO_ENABLED=0 $(GO) build -o $(BENCH_OUT)/bench-go ./bench/go
	cd bench/cgo && GOWORK=off CGO_ENABLED=1 $(GO) build -o $(BENCH_OUT)/bench-cgo .
	@rm -f $(BENCH_OUT)/bench-cunpinned $(BENCH_OUT)/bench-gounpinned $(BENCH_OUT)/bench-cthread $(BENCH_OUT)/bench-csleeper $(BENCH_OUT)/bench-gonopreempt $(BENCH_OUT)/bench-cingo
	@# BENCH_UNPINNED=1 adds C and Go columns with the single-thread rows unbound
	@if [ -n "$${BENCH_UNPINNED:-}" ]; then $(call bench-wrap,cunpinned,c,BENCH_UNPINNED=1); $(call bench-wrap,gounpinned,go,BENCH_UNPINNED=1); fi
	@# BENCH_C_THREAD=1 adds a C column whose process has a second, idle thread (as every Go program has)
	@if [ -n "$${BENCH_C_THREAD:-}" ]; then $(call bench-wrap,cthread,c,BENCH_C_THREAD=1); fi
	@# BENCH_C_SLEEPER=1 adds a C column whose process has a second thread that reads the clock and sleeps 10 ms in a loop (Go's sysmon at its longest sleep)
	@if [ -n "$${BENCH_C_SLEEPER:-}" ]; then $(call bench-wrap,csleeper,c,BENCH_C_SLEEPER=1); fi
	@# BENCH_GO_NOPREEMPT=1 adds a Go column run with GODEBUG=asyncpreemptoff=1 (no preemption signals)
	@if [ -n "$${BENCH_GO_NOPREEMPT:-}" ]; then $(call bench-wrap,gonopreempt,go,GODEBUG=asyncpreemptoff=1); fi
	@# BENCH_C_IN_GO=1 adds a column: bench-c's whole program run inside a Go process (one cgo call to its main)
	@if [ -n "$${BENCH_C_IN_GO:-}" ]; then cd bench/cgo && GOWORK=off CGO_ENABLED=1 $(GO) build -o $(BENCH_OUT)/bench-cingo ./cingo; fi
	set -o pipefail; GOVERBS_VM_LOCK_EXCLUSIVE=1 GOVERBS_KERNEL=$${GOVERBS_KERNEL:-6.1} hack/vm/run.sh -- bench/run.sh $(BENCH_OUT) $(BENCH_ROUNDS) $(BENCH_ROWS) | tee $(BENCH_OUT)/raw.txt
	$(GO) run ./bench/report < $(BENCH_OUT)/raw.txt | tee $(BENCH_OUT)/table.md

## bench-pvrdma: the bench in the nested pvrdma bed (6.1), C on libvmw_pvrdma
## vs goverbs vs cgo, into .cache/bench-pvrdma. Only the rows qemu 7.2's
## model can run: it turns every work request into a SEND (docs/providers.md),
## so no RDMA WRITE rows, and post_recv_rts for post_recv (whose reset
## leaks the model's receive contexts); the _list32 rows post 32 WRs per
## doorbell.
PVRDMA_BENCH_ROUNDS ?= 5
PVRDMA_BENCH_ROWS ?= post_recv_rts poll_cq_empty post_send_send round_send pingpong msgrate_send msgtimed_send
bench-pvrdma: bed-test-pvrdma
	$(MAKE) --no-print-directory bench GOVERBS_PROVIDER=pvrdma GOVERBS_KERNEL=$(PVRDMA_KERNEL) \
		GOVERBS_VM_TIMEOUT=$${GOVERBS_VM_TIMEOUT:-5400} BENCH_ROUNDS=$(PVRDMA_BENCH_ROUNDS) \
		BENCH_OUT=$(CURDIR)/.cache/bench-pvrdma BENCH_ROWS="$(PVRDMA_BENCH_ROWS)"

## bench-cmtime: rdma-core's cmtime against goverbs cmtime (1, 100 and
## 1000 connections, BENCH_ROUNDS rounds, one boot), each client against a
## server of its own kind; per-step medians and Go/C ratios
bench-cmtime:
	@mkdir -p $(CURDIR)/.cache/bench
	CGO_ENABLED=0 $(GO) build -o $(CURDIR)/.cache/bench/goverbs ./cmd/goverbs
	set -o pipefail; GOVERBS_VM_LOCK_EXCLUSIVE=1 GOVERBS_KERNEL=$${GOVERBS_KERNEL:-6.1} hack/vm/run.sh -- bench/cmtime/run.sh $(CURDIR)/.cache/bench/goverbs $${BENCH_ROUNDS:-5} | tee $(CURDIR)/.cache/bench/cmtime-raw.txt
	awk -f bench/cmtime/report.awk $(CURDIR)/.cache/bench/cmtime-raw.txt | tee $(CURDIR)/.cache/bench/cmtime-table.md

## bench-rstream: librdmacm's rstream against goverbs rstream and TCP
## (rstream -T s) over rxe, latency and bandwidth 64 B to 1 MiB,
## BENCH_ROUNDS rounds in one boot; medians and Go/C ratios, also against
## C whose memcpy avoids "rep movsb", slow under TCG (cvec: run.sh).
## RSTREAM_BEFORE=path/to/goverbs adds that binary as another column
## (before/after in one boot).
RSTREAM_BEFORE ?=
bench-rstream:
	@mkdir -p $(CURDIR)/.cache/bench
	CGO_ENABLED=0 $(GO) build -o $(CURDIR)/.cache/bench/goverbs ./cmd/goverbs
	set -o pipefail; GOVERBS_VM_LOCK_EXCLUSIVE=1 GOVERBS_KERNEL=$${GOVERBS_KERNEL:-6.1} hack/vm/run.sh -- bench/rstream/run.sh $(CURDIR)/.cache/bench/goverbs $${BENCH_ROUNDS:-5} $(RSTREAM_BEFORE) | tee $(CURDIR)/.cache/bench/rstream-raw.txt
	awk -f bench/rstream/report.awk $(CURDIR)/.cache/bench/rstream-raw.txt | tee $(CURDIR)/.cache/bench/rstream-table.md

## bench-valkey: valkey's C client (tests/rdma/rdma-test, value size made
## a parameter and its loops timed: bench/valkey/build-c.sh) against the Go
## client over valkeyrdma (bench/valkey) and over TCP, one valkey-server
## 8.1.1, values of 64 B, 1 KiB and 16 KiB, BENCH_ROUNDS rounds in one boot
## (VALKEY_KERNEL); ops/s medians and Go/C per-round ratios
bench-valkey:
	@mkdir -p $(CURDIR)/.cache/bench/valkey
	hack/vm/build-valkey.sh >/dev/null
	bench/valkey/build-c.sh $$(dirname $$(hack/vm/build-valkey.sh))/valkey_8.1.1+dfsg1.orig.tar.xz $(CURDIR)/.cache/bench/valkey 64 1024 16384
	CGO_ENABLED=0 $(GO) build -trimpath -o $(CURDIR)/.cache/bench/valkey/bench-valkey ./bench/valkey
	set -o pipefail; GOVERBS_VM_LOCK_EXCLUSIVE=1 GOVERBS_KERNEL=$(VALKEY_KERNEL) hack/vm/run.sh -- bench/valkey/run.sh $$(hack/vm/build-valkey.sh) $(CURDIR)/.cache/bench/valkey $${BENCH_ROUNDS:-5} | tee $(CURDIR)/.cache/bench/valkey-raw.txt
	awk -f bench/valkey/report.awk $(CURDIR)/.cache/bench/valkey-raw.txt | tee $(CURDIR)/.cache/bench/valkey-table.md

## fuzz: a short run of every fuzz target (found with go test -list)
fuzz:
	hack/fuzz.sh 20s

## fuzz-long: five minutes per target; what the fuzzer finds is added to the
## committed corpora (testdata/fuzz), which every go test replays
fuzz-long:
	hack/fuzz.sh -save 5m

## faults: the fault tests (internal/testutil/faults, race detector on) on two VMs
## joined by one link (hack/vm/two-host.sh): netem loss/duplication/
## reordering/delay, link down, peer process killed, peer VM powered off, for
## an RC verbs stream, an rpma write+flush stream and rdma_cm connections;
## prints the per-fault table (WRs posted, OK, in error, lost, time to detect).
## A guest kernel panic (6.12's rxe corrupts its slab now and then under
## these tests: docs/kernels.md) runs both VMs again, at most twice, and
## hack/testsum lists the earlier runs' failures as flaky
.PHONY: faults
faults: bed-faults
	@mkdir -p $(LOGDIR)
	$(GO) test -c -race -o $(LOGDIR)/faults.test ./internal/testutil/faults
	@set -o pipefail; start=$$SECONDS; \
	hack/vm/two-host.sh --timeout 900 --rerun-after-panic -- $(LOGDIR)/faults.test -test.v -test.timeout 12m 2>&1 | tee $(LOGDIR)/faults.log; \
	rc=$$?; echo "faults: $$((SECONDS - start)) s"; exit $$rc
	@grep '^a| faults: |' $(LOGDIR)/faults.log | sed 's/^a| faults: //'

## faults-valkey: TestValkeyLinkDown alone on the two-host bed: the Go client
## (valkeyrdma) pipelining SETs to valkey-server 8.1.1 on VM b (built by
## hack/vm/build-valkey.sh), b's link down 15 s mid-pipeline; the reader and
## the writer must get errors, and every replied SET must be on the server
.PHONY: faults-valkey
faults-valkey: bed-faults
	@mkdir -p $(LOGDIR)
	hack/vm/build-valkey.sh >/dev/null
	$(GO) test -c -race -o $(LOGDIR)/faults.test ./internal/testutil/faults
	@set -o pipefail; start=$$SECONDS; GOVERBS_VALKEY=$$(hack/vm/build-valkey.sh) \
	hack/vm/two-host.sh --timeout 600 --rerun-after-panic -- $(LOGDIR)/faults.test -test.v -test.run '^TestValkeyLinkDown$$' -test.timeout 8m 2>&1 | tee $(LOGDIR)/faults-valkey.log; \
	rc=$$?; echo "faults-valkey: $$((SECONDS - start)) s"; exit $$rc
	@grep '^a| faults: |' $(LOGDIR)/faults-valkey.log | sed 's/^a| faults: //'

## soak: the fault tests' soak for SOAK (default 6m), race detector on: the
## stream over a mildly lossy, duplicating, reordering link; then
## TestCMPeerPoweredOff (b's VM powered off under an rdma_cm connection: a's
## DISCONNECTED comes when the DREQ's retries run out, 16 x 4.6 s, too long
## for make faults). With the boots, under 10 minutes.
SOAK ?= 6m
.PHONY: soak
soak:
	@mkdir -p $(LOGDIR)
	$(GO) test -c -race -o $(LOGDIR)/faults.test ./internal/testutil/faults
	@set -o pipefail; GOVERBS_FAULT_SOAK=$(SOAK) GOVERBS_FAULT_CM_POWEROFF=1 hack/vm/two-host.sh --timeout 1200 -- \
		$(LOGDIR)/faults.test -test.v -test.run '^(TestSoak|TestCMPeerPoweredOff)$$' -test.timeout 15m 2>&1 | tee $(LOGDIR)/soak.log
	@grep '^a| faults: |' $(LOGDIR)/soak.log | sed 's/^a| faults: //'

## test-siw: every package (library and cmd/goverbs; not HOST_ONLY_RE's or LIGHT_SKIP_RE's) on siw0, soft-iWARP
## (hack/vm with GOVERBS_PROVIDER=siw), on the newest kernel; tests that
## need what the device reports it lacks (UD on iWARP, atomics, windows)
## skip naming the capability. A test that fails runs once more, alone
## (hack/rerun-failed.sh: at most 3 of them, none after a build failure,
## panic or timeout); one that passes then is reported flaky, with its
## first output, and one that fails again fails the stage: siw's
## connection-setup races fail about one test in a thousand, a different
## one each run, C against C too (docs/providers.md).
SIW_KERNEL ?= $(firstword $(KERNELS))
# SIW_SKIP: a -skip pattern for ad-hoc runs; empty, so every test runs.
SIW_SKIP ?=
# SIW_RACE: empty in CI, as on KERNELS_LIGHT (SIW_RACE=-race turns the
# race detector on): it doubles the time of the interop tests, whose Go
# side is the test binary (cmd/goverbs: 544 s without it on 6.1, 1113 s
# with it), and the Go code's races are the same on every provider but
# for siw's own ring code, whose unit tests run with -race in unit.
SIW_RACE ?=
# A rerun is one test (the longest, cmd/goverbs' interop matrices' leaves,
# take under a minute; a pair's guards end a hang in 3 to 6 minutes).
SIW_RERUN_TIMEOUT ?= 15m
.PHONY: test-siw
test-siw: bed-test-siw
	@mkdir -p $(LOGDIR)
	@echo "== siw on kernel $(SIW_KERNEL)"
	@set -o pipefail; start=$$SECONDS; export GOVERBS_PROVIDER=siw GOVERBS_KERNEL=$(SIW_KERNEL) GOVERBS_LEAK_CYCLES=short; \
	$(VM_BATCH) -name siw -timeout $(TEST_TIMEOUT) $(SIW_RACE) $(call vm-entries,$(call vm-pkgs,$(LIGHT_SKIP_RE)),$(VM_SKIP)$(if $(SIW_SKIP),|$(SIW_SKIP))) 2>&1 | tee $(LOGDIR)/siw.log; \
	rc=$$?; \
	if [ $$rc != 0 ]; then \
	  GO=$(GO) hack/rerun-failed.sh $(LOGDIR)/siw.log -- $(SIW_RACE) -count=1 -v -timeout $(SIW_RERUN_TIMEOUT) -exec $(VMEXEC) 2>&1 | tee $(LOGDIR)/siw-rerun.log; \
	  rc=$$?; \
	fi; \
	echo "test-siw: $$((SECONDS - start)) s"; exit $$rc
	@grep -E '^(ok|FAIL)[[:space:]]' $(LOGDIR)/siw.log | sed 's/^/test-siw: /'
	@hack/vm/check-integration-log.sh $(LOGDIR)/siw.log | sed 's/^/test-siw: /'; exit $${PIPESTATUS[0]}

## test-pvrdma: tests on vmw_pvrdma0, qemu 7.2's paravirtual RDMA device,
## in the nested bed (hack/vm/pvrdma-outer.sh: an outer guest lends rxe0 to
## qemu's pvrdma backend, the tests run in the inner guest; docs in run.sh),
## all in ONE boot of the two guests (hack/vm/batch.sh): TCG in TCG, a boot
## and its set-up take about 2 minutes, and each test binary spends 30-45 s
## starting up before its first test. PVRDMA_SET's entries are PKG@RUN@SKIP
## (batch.sh): every verbs test but the fuzz seeds (sysfs parsing, which
## unit and integration run); qp's UD send through an address handle built
## in user space (the one UD sender of the boot: the model lets one PD per
## GID send UD); cq's test of the completions a QP's close or reset removes
## from a CQ (CQCleaner); devinfo against ibv_devinfo (-v too); the rc and
## srq ping-pongs against ibv_rc_pingpong and ibv_srq_pingpong on
## libvmw_pvrdma, both ways, at 12388 bytes; perftest's ib_send_bw -R
## against goverbs perf both ways (rdma_cm with depth 0). -short gives
## verbs' open/close leak test 100 cycles instead of 1000.
## test-pvrdma-full: the same boot with PVRDMA_FULL_SET, every pvrdma test
## that passes on qemu's model: PVRDMA_SET, the verbs fuzz seeds, and srq's
## tests but the three that need what the model gets wrong (QUERY_SRQ, the
## SRQ limit, receives taken off the ring at once: docs/providers.md traces
## each in qemu's source). It is rotation slot 2 of make test.
## pvrdma-survey: PVRDMA_FULL_PKGS, every test, one boot per package (go
## test -exec hack/vm/pvrdma-test-exec): a survey of the model, not a gate;
## what the model cannot do fails there, as docs/providers.md lists.
## Smoke of the bed alone: GOVERBS_PROVIDER=pvrdma GOVERBS_KERNEL=6.1
## hack/vm/run.sh -- hack/vm/pvrdma-smoke.sh
PVRDMA_KERNEL ?= 6.1
PVRDMA_SET ?= './verbs@@^Fuzz' \
	'./qp@^TestUD$$' \
	'./cq@^TestQPCompletionsAfterCloseOrReset$$' \
	'./cmd/goverbs@^(TestDevinfoMatchesIbvDevinfo|TestPingpongInterop|TestPerfInterop)$$/^(-.*|rc|srq|send-bw-R)$$/.*/.*/^s12388$$@^(TestPingpongInterop|TestPerfInterop)$$/.*/^go-server$$/^go-client$$'
PVRDMA_FULL_SET ?= ./verbs $(filter-out './verbs@@^Fuzz',$(PVRDMA_SET)) \
	'./srq@@^(TestSRQSharedByQPs|TestSRQLimitEvent|TestSRQResizeQueryAndFull)$$'
PVRDMA_FULL_PKGS ?= ./verbs/ ./cq/ ./qp/ ./srq/ ./mr/ ./cm/ ./cmd/goverbs/
PVRDMA_TIMEOUT ?= 50m
.PHONY: bed-test-pvrdma bed-test-pvrdma-full test-pvrdma test-pvrdma-full pvrdma-survey
bed-test-pvrdma bed-test-pvrdma-full:
	GOVERBS_PROVIDER=pvrdma GOVERBS_KERNEL=$(PVRDMA_KERNEL) hack/vm/run.sh --prepare
# $(call pvrdma-batch,STAGE,LOG,ENTRIES): one nested boot running ENTRIES.
define pvrdma-batch
	@mkdir -p $(LOGDIR)
	@echo "== $(1): pvrdma on kernel $(PVRDMA_KERNEL), one boot"
	@set -o pipefail; start=$$SECONDS; \
	GOVERBS_PROVIDER=pvrdma GOVERBS_VM_TIMEOUT=5400 GOVERBS_KERNEL=$(PVRDMA_KERNEL) GO=$(GO) hack/vm/batch.sh -timeout $(PVRDMA_TIMEOUT) -short $(3) 2>&1 | tee $(LOGDIR)/$(2).log; \
	rc=$$?; echo "$(1): $$((SECONDS - start)) s"; exit $$rc
	@grep -E '^(ok|FAIL)[[:space:]]' $(LOGDIR)/$(2).log | sed 's/^/$(1): /'
	@hack/vm/check-integration-log.sh $(LOGDIR)/$(2).log | sed 's/^/$(1): /'; exit $${PIPESTATUS[0]}
endef
test-pvrdma: bed-test-pvrdma
	$(call pvrdma-batch,test-pvrdma,pvrdma,$(PVRDMA_SET))
test-pvrdma-full: bed-test-pvrdma
	$(call pvrdma-batch,test-pvrdma-full,pvrdma-full,$(PVRDMA_FULL_SET))
pvrdma-survey: bed-test-pvrdma
	@mkdir -p $(LOGDIR)
	@echo "== pvrdma on kernel $(PVRDMA_KERNEL), every test, one boot per package"
	@set -o pipefail; start=$$SECONDS; \
	GOVERBS_VM_TIMEOUT=3600 GOVERBS_KERNEL=$(PVRDMA_KERNEL) $(GO) test -count=1 -p 1 -v -timeout $(PVRDMA_TIMEOUT) -exec $(CURDIR)/hack/vm/pvrdma-test-exec $(PVRDMA_FULL_PKGS) 2>&1 | tee $(LOGDIR)/pvrdma-survey.log; \
	rc=$$?; echo "pvrdma-survey: $$((SECONDS - start)) s"; exit $$rc

clean:
	rm -rf bin .cache/test

## test-hw: the device tests and the interop with rdma-core's programs
## (pingpong, rping, rstream, perftest, ...) on this host's own RDMA device,
## with no VM: for a host with hardware (GOVERBS_TEST_DEVICE=mlx5_0, or the
## host's only device). Runs as root; fails with a clear message when the
## host has no device. hack/test-hw.sh says what it detects and leaves out.
.PHONY: test-hw
test-hw:
	HW_PKGS="$${HW_PKGS:-$(call vm-pkgs,$(LIGHT_SKIP_RE))}" GO=$(GO) hack/test-hw.sh

## test-mlx5: the mlx5 provider against rdma-core's libmlx5 44, on the host
## with no device and no VM: each scenario (internal/provider/mlx5/difftest/
## testdata/scenarios, and MLX5_SCENARIOS=DIR's *.scn) runs through
## libibverbs + libmlx5 under a fake kernel (an LD_PRELOAD library built here
## into .cache/mlx5) and through goverbs under the Go fake kernel; their
## traces (driver data, queue bytes, doorbells, completions) must be equal.
## Then goverbs devinfo -v on the Go fake against rdma-core's ibv_devinfo -v
## on the C one (TestDevinfo): the outputs must be equal.
## Needs gcc, libibverbs-dev, ibverbs-providers and ibverbs-utils (make deps).
MLX5_CACHE := $(CURDIR)/.cache/mlx5
MLX5_C     := internal/provider/mlx5/difftest/c
.PHONY: test-mlx5 mlx5-c bench-mlx5
mlx5-c:
	@hack/vm/install-deps.sh gcc libc6-dev libibverbs-dev ibverbs-providers ibverbs-utils
	@mkdir -p $(MLX5_CACHE)
	gcc -O1 -g -Wall -Wextra -Werror -fPIC -shared -o $(MLX5_CACHE)/fake.so $(MLX5_C)/fake.c $(MLX5_C)/device.c -ldl
	gcc -O1 -g -Wall -Wextra -Werror -o $(MLX5_CACHE)/driver $(MLX5_C)/driver.c -libverbs -ldl
test-mlx5: mlx5-c
	@mkdir -p $(MLX5_CACHE); set -o pipefail; start=$$SECONDS; \
	MLX5_C_DIR=$(MLX5_CACHE) MLX5_SCENARIOS=$(if $(MLX5_SCENARIOS),$(abspath $(MLX5_SCENARIOS))) $(GO) test -count=1 -race -run '^(TestDiff|TestDevinfo)$$' -v ./internal/provider/mlx5/difftest/ 2>&1 | tee $(MLX5_CACHE)/test.log; \
	rc=$$?; echo "test-mlx5: $$((SECONDS - start)) s"; exit $$rc

## test-mlx5-arm64: the same scenarios on arm64, under qemu-user on the host:
## Debian 12's arm64 libibverbs + libmlx5 44.0-2 (hack/mlx5-arm64-root.sh
## fetches them, with libc6, into .cache/mlx5-arm64/root, each .deb checked
## against hack/mlx5-arm64.pin), the fake kernel and the driver built with
## gcc-aarch64-linux-gnu, and difftest's test binary built for GOARCH=arm64
## (no -race: on arm64 it needs cgo); both run under qemu-aarch64-static -L
## ROOT. It checks what goverbs' arm64 build writes against what arm64
## libmlx5 writes; qemu-user models neither write combining nor the order
## in which stores become visible.
MLX5_ARM64 := $(CURDIR)/.cache/mlx5-arm64
MLX5_QEMU  ?= qemu-aarch64-static
# bed-test-mlx5-arm64: the cross compiler, qemu and the arm64 root (make test
# reports a pinned package Debian no longer serves as the stage's bed failing).
.PHONY: test-mlx5-arm64 mlx5-c-arm64 bed-test-mlx5-arm64
bed-test-mlx5-arm64:
	@hack/vm/install-deps.sh gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static
	@GOVERBS_MLX5_ARM64_CACHE=$(MLX5_ARM64) hack/mlx5-arm64-root.sh >/dev/null
mlx5-c-arm64: bed-test-mlx5-arm64
	@root=$$(GOVERBS_MLX5_ARM64_CACHE=$(MLX5_ARM64) hack/mlx5-arm64-root.sh) && set -x && \
	aarch64-linux-gnu-gcc -O1 -g -Wall -Wextra -Werror -fPIC -shared -I$$root/usr/include \
		-o $(MLX5_ARM64)/fake.so $(MLX5_C)/fake.c $(MLX5_C)/device.c -ldl && \
	aarch64-linux-gnu-gcc -O1 -g -Wall -Wextra -Werror -I$$root/usr/include -o $(MLX5_ARM64)/driver $(MLX5_C)/driver.c \
		-L$$root/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,$$root/usr/lib/aarch64-linux-gnu:$$root/lib/aarch64-linux-gnu -libverbs -ldl
test-mlx5-arm64: mlx5-c-arm64
	@set -o pipefail; start=$$SECONDS; root=$$(GOVERBS_MLX5_ARM64_CACHE=$(MLX5_ARM64) hack/mlx5-arm64-root.sh) || exit 1; \
	pkg=$$($(GO) list ./internal/provider/mlx5/difftest/) || exit 1; \
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) test -c -o $(MLX5_ARM64)/difftest.test ./internal/provider/mlx5/difftest/ || exit 1; \
	(cd internal/provider/mlx5/difftest && \
	MLX5_C_DIR=$(MLX5_ARM64) MLX5_C_EXEC="$(MLX5_QEMU) -L $$root" MLX5_SCENARIOS=$(if $(MLX5_SCENARIOS),$(abspath $(MLX5_SCENARIOS))) \
		$(MLX5_QEMU) $(MLX5_ARM64)/difftest.test -test.count=1 -test.run '^TestDiff$$' -test.v 2>&1; rc=$$?; \
	if [ $$rc = 0 ]; then printf 'ok  \t%s\t%ds (arm64, qemu-user)\n' "$$pkg" $$((SECONDS - start)); \
	else printf 'FAIL\t%s\t%ds (arm64, qemu-user)\n' "$$pkg" $$((SECONDS - start)); fi; exit $$rc) | tee $(MLX5_ARM64)/test.log; \
	rc=$$?; echo "test-mlx5-arm64: $$((SECONDS - start)) s"; exit $$rc

## bench-mlx5: post and poll on the fake mlx5 device of test-mlx5, on the
## host CPU (no device, no VM): libibverbs + libmlx5 under the C fake
## kernel against goverbs under the Go fake kernel, so a row costs what it
## costs on hardware less the doorbell's MMIO stores. Interleaved rounds
## (MLX5_BENCH_ROUNDS, default 9), each run a fresh process pinned to CPU 1;
## per row the medians, the median of the per-round Go/C ratios and their
## range, and Go's allocations per operation (docs/performance.md). Holds
## $GOVERBS_VM_LOCK exclusively while it measures, when that is set.
MLX5_BENCH_ROUNDS ?= 9
bench-mlx5: mlx5-c
	gcc -O2 -g -Wall -Wextra -Werror -o $(MLX5_CACHE)/bench $(MLX5_C)/bench.c -libverbs -ldl
	$(GO) test -c -o $(MLX5_CACHE)/difftest.test ./internal/provider/mlx5/difftest/
	$(GO) build -o $(MLX5_CACHE)/mlx5bench ./hack/mlx5bench
	@set -o pipefail; d=$(CURDIR)/internal/provider/mlx5/difftest; \
	$(if $(GOVERBS_VM_LOCK),flock -x $(GOVERBS_VM_LOCK)) $(MLX5_CACHE)/mlx5bench -rounds $(MLX5_BENCH_ROUNDS) \
		-c $(MLX5_CACHE)/bench -fake $(MLX5_CACHE)/fake.so -device $$d/testdata/device.txt \
		-go $(MLX5_CACHE)/difftest.test -dir $$d | tee $(MLX5_CACHE)/bench.txt
