# maos — make targets. `make help` lists them.
GO      ?= go
BIN     := bin
PKGS    := ./...
# make install puts maosd and maosctl in $(DESTDIR)$(PREFIX)/bin.
PREFIX  ?= /usr/local
DESTDIR ?=
# What --version prints (package cli/internal/version): VERSION defaults to
# `git describe --always --dirty` (a tag, else the commit; -dirty with
# uncommitted changes), COMMIT to the checked-out commit; a release build
# sets VERSION=v1.2.0. Go stamps the commit itself too (vcs.revision), but
# not in every checkout (a git worktree, -buildvcs=false), hence -X.
VERSION := $(or $(VERSION),$(shell git describe --always --dirty 2>/dev/null))
COMMIT  := $(or $(COMMIT),$(shell git rev-parse HEAD 2>/dev/null))
VERSION_PKG := github.com/maos-project/maos/cli/internal/version
LDFLAGS := $(if $(VERSION),-X $(VERSION_PKG).Version=$(VERSION)) $(if $(COMMIT),-X $(VERSION_PKG).Commit=$(COMMIT))
# Where scripts/demo.sh makes its temporary directories (maos-demo.XXXXXX).
DEMO_TMP = $(or $(TMPDIR),/tmp)

.PHONY: help build install test test-short vet bench demo chaos clean console-png

help:
	@echo "make build    build bin/maosd, bin/maosctl, bin/maos-chaos and bin/stubmodel (the demo's stub model); --version shows git describe (VERSION=v1.2.0 for a release)"
	@echo "make install  install maosd and maosctl into \$$(DESTDIR)\$$(PREFIX)/bin (PREFIX=$(PREFIX))"
	@echo "make test     go vet + go test -race (what CI runs)"
	@echo "make test-short  go test -short: a few minutes, no root, tmux or Chromium needed; skips say what the full run adds"
	@echo "make demo     a local 3-node cluster with watcher agents (a stub model) answering a task"
	@echo "make console-png  docs/console*.png: the console's browser tests (headless chromium) take the pictures"
	@echo "make bench    run the Go benchmarks (figures: docs/PERFORMANCE.md)"
	@echo "make chaos    the full chaos run: every nemesis on 3 and on 5 nodes, on loopback and in network namespaces (root; docs/RELIABILITY.md)"
	@echo "make clean    remove bin/, maos-data, chaos-out and the demo's temporary directories"

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/maosd ./cmd/maosctl ./cmd/maos-chaos ./testing/stubmodel

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

test: vet
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

# The developer's tier (testing/testenv): skips what needs root, a missing
# tool or a cluster of maosd processes, saying why; make test runs them.
test-short:
	$(GO) test -short -count=1 -timeout 10m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./fsm ./transport ./cluster

install: build
	install -d "$(DESTDIR)$(PREFIX)/bin"
	install -m 0755 $(BIN)/maosd $(BIN)/maosctl "$(DESTDIR)$(PREFIX)/bin/"

demo: build
	./scripts/demo.sh

# The full chaos run: several minutes. Reports land in chaos-out/. Every
# node runs two watcher agents (the stub model) whose requests must each
# get exactly one reply. The same again with every node in a network
# namespace of its own (--netns: root and iproute2), where a partition
# cuts Raft, forwarding and gossip, with the nemeses only that mode has.
CHAOS := $(BIN)/maos-chaos --maosd $(BIN)/maosd --stubmodel $(BIN)/stubmodel --watchers 2 --tasks 3
chaos: build
	rm -rf chaos-out
	$(CHAOS) --nodes 3 --hold 5s --out chaos-out
	$(CHAOS) --nodes 5 --hold 5s --out chaos-out
	$(CHAOS) --nodes 3 --together --hold 4s --out chaos-out
	$(CHAOS) --netns --nodes 3 --hold 5s --out chaos-out
	$(CHAOS) --netns --nodes 5 --hold 5s --out chaos-out
	$(CHAOS) --netns --nodes 3 --together --hold 4s --out chaos-out

# The console's picture in README.md and docs/CONSOLE.md, taken by its browser test.
console-png:
	MAOS_CONSOLE_PNG=$(CURDIR)/docs/console.png MAOS_CONSOLE_SHOTS=$(CURDIR)/docs $(GO) test -count=1 -run 'TestConsoleLiveFeedApprovalsAndCluster|TestConsoleViewsByURL' ./testing/system

clean:
	rm -rf $(BIN) maos-data chaos-out "$(DEMO_TMP)"/maos-demo.*
