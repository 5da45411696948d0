# maos — make targets. `make help` lists them.
GO      ?= go
BIN     := bin
PKGS    := ./...

.PHONY: help build test vet race bench demo clean fmt

help:
	@echo "make build   build bin/maosd and bin/maosctl"
	@echo "make test    go vet + go test -race (what CI runs)"
	@echo "make demo    start a local 3-node cluster, send through a follower, read back from every node"
	@echo "make bench   run the Go benchmarks (figures: docs/PERFORMANCE.md)"
	@echo "make clean   remove bin/ and demo leftovers"

build:
	$(GO) build -o $(BIN)/ ./cmd/maosd ./cmd/maosctl

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))" || { echo "gofmt needed:"; gofmt -l .; exit 1; }

test: vet
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchtime 2000x ./fsm ./cluster

demo: build
	./scripts/demo.sh

clean:
	rm -rf $(BIN) maos-data
