# maos — make targets. `make help` lists them.
GO      ?= go
BIN     := bin
PKGS    := ./...

.PHONY: help build test vet bench demo chaos clean

help:
	@echo "make build   build bin/maosd, bin/maosctl and bin/maos-chaos"
	@echo "make test    go vet + go test -race (what CI runs)"
	@echo "make demo    a local 3-node cluster with watcher agents (a stub model) answering a task"
	@echo "make bench   run the Go benchmarks (figures: docs/PERFORMANCE.md)"
	@echo "make chaos   the full chaos run: every nemesis on 3 and on 5 nodes (docs/RELIABILITY.md)"
	@echo "make clean   remove bin/ and demo leftovers"

build:
	$(GO) build -o $(BIN)/ ./cmd/maosd ./cmd/maosctl ./cmd/maos-chaos ./testing/stubmodel

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

test: vet
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./fsm ./transport ./cluster

demo: build
	./scripts/demo.sh

# The full chaos run: several minutes. Reports land in chaos-out/. Every
# node runs two watcher agents (the stub model) whose requests must each
# get exactly one reply.
CHAOS := $(BIN)/maos-chaos --maosd $(BIN)/maosd --stubmodel $(BIN)/stubmodel --watchers 2
chaos: build
	rm -rf chaos-out
	$(CHAOS) --nodes 3 --hold 5s --out chaos-out
	$(CHAOS) --nodes 5 --hold 5s --out chaos-out
	$(CHAOS) --nodes 3 --together --hold 4s --out chaos-out

clean:
	rm -rf $(BIN) maos-data chaos-out
