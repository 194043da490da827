# factory: build, run the example, test, benchmark.
GO       ?= go
BIN      := bin/factory
DATA     ?= .factory
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build run test test-short lint bench fuzz clean

all: build

build: ## build bin/factory
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/factory

run: build ## serve the bundled example factory on 127.0.0.1:8080 (store in ./.factory)
	./scripts/example-setup.sh $(BIN) $(DATA)
	$(BIN) --data $(DATA) serve --source examples/factory --name example

# The measured fast paths (BENCHMARKS.md) are exempt from the complexity bound.
FASTPATHS := \(\*fastNode\)\.valid |\(\*fastCompiler\)\.compile | validJSON 

lint: ## gofmt, go vet, and cyclomatic complexity at most 25 (gocyclo)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@out=$$($(GO) tool gocyclo -over 25 $$(git ls-files '*.go') | grep -Ev '$(FASTPATHS)'); if [ -n "$$out" ]; then echo "cyclomatic complexity over 25: split these into named steps:"; echo "$$out"; exit 1; fi

test: lint ## everything CI runs
	$(GO) test -count=1 -timeout 15m ./...

bench: ## benchmarks (installs wrk for the ingress one); figures go into BENCHMARKS.md
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; } || echo "wrk is not installed: the ingress benchmark will be skipped"
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./...

fuzz: ## run each fuzz target for a while (FUZZTIME=30s)
	./scripts/fuzz.sh $${FUZZTIME:-30s}

clean:
	rm -rf bin
