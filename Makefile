# factory: build, run the example, test, benchmark.
GO       ?= go
BIN      := bin/factory
DATA     ?= .factory
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: all build run test test-short lint browser docker harnesses bench fuzz vulncheck clean

all: build

build: ## build bin/factory
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/factory

run: build ## serve the bundled example factories on 127.0.0.1:8080 (store in ./.factory)
	./scripts/example-setup.sh $(BIN) $(DATA)
	$(BIN) --data $(DATA) serve --config examples/serve.yaml

# The measured fast paths (BENCHMARKS.md) are exempt from the complexity bound.
FASTPATHS := \(\*fastNode\)\.valid |\(\*fastCompiler\)\.compile | validJSON 

lint: ## gofmt, go vet, and cyclomatic complexity at most 25 (gocyclo)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@out=$$($(GO) tool gocyclo -over 25 $$(git ls-files '*.go') | grep -Ev '$(FASTPATHS)'); if [ -n "$$out" ]; then echo "cyclomatic complexity over 25: split these into named steps:"; echo "$$out"; exit 1; fi

# The packages with concurrency run again under the race detector.
RACE_PKGS := ./internal/runtime ./internal/runs ./internal/worker ./internal/writeback ./internal/ingress ./internal/store ./internal/backup ./internal/server ./internal/automations ./internal/schedules ./internal/workers ./internal/foreman

test: lint browser docker harnesses ## everything CI runs
	FACTORY_TEST_HARNESSES=$(CURDIR)/.test-harnesses/harnesses $(GO) test -count=1 -timeout 15m ./...
	$(GO) test -count=1 -race -timeout 15m $(RACE_PKGS)

# The dashboard's browser tests drive Debian's Chromium; they say why they
# skip where it cannot be installed.
browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
		{ apt-get update -qq >/dev/null 2>&1; apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1; }; } || true
	@command -v chromium >/dev/null 2>&1 || echo "chromium is not installed (apt-get install chromium): the dashboard's browser tests will skip"

# The real agents' tests (internal/harness) run Claude Code, Codex and Gemini
# CLI installed from npm at their pinned versions; they skip, saying why,
# where npm is not there.
harnesses: build
	@if command -v npm >/dev/null 2>&1; then $(BIN) --data .test-harnesses harnesses list | grep -q 'not installed\|pins' && \
		{ $(BIN) --data .test-harnesses harnesses install >/dev/null || echo "the harnesses could not be installed: their tests will skip"; }; true; \
	else echo "npm is not installed: the real agents' tests will skip"; fi

# The docker backend's tests need a Docker daemon: one is started where none
# answers and the machine allows it; they say why they skip where not.
docker:
	@./scripts/dockerd.sh

bench: ## benchmarks (installs wrk for the ingress one); figures go into BENCHMARKS.md
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; } || echo "wrk is not installed: the ingress benchmark will be skipped"
	$(GO) test -run '^$$' -bench . -benchmem -count 3 ./...

fuzz: ## run each fuzz target for a while (FUZZTIME=30s)
	./scripts/fuzz.sh $${FUZZTIME:-30s}

vulncheck: ## govulncheck over the module (needs its database at vuln.go.dev; says so when it cannot reach it)
	@out=$$($(GO) run golang.org/x/vuln/cmd/govulncheck@v1.9.0 ./... 2>&1); rc=$$?; \
	if echo "$$out" | grep -q 'fetching vulnerabilities'; then echo "govulncheck: its vulnerability database is not reachable from this machine; nothing was checked"; echo "$$out" | tail -1; exit 0; fi; \
	echo "$$out"; exit $$rc

clean:
	rm -rf bin
