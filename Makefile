# attest-gateway — the two commands a newcomer needs:
#   make run    install what is missing, build (release) and serve gateway.yml in front of the dev echo upstream
#   make test   install what is missing, run the Swift tests and the end-to-end tests
#   make fuzz   libFuzzer over the parsers, FUZZ_SECONDS (60) per target; FUZZ_TARGETS picks (docs/hardening.md)
#   make sanitize  the Swift and end-to-end tests under AddressSanitizer and ThreadSanitizer (docs/hardening.md)
#   make soak   mixed load for SOAK_SECONDS (600), RSS/FD/threads checked for growth (docs/hardening.md)
SHELL := /bin/bash
export PATH := $(PATH):/opt/swift/usr/bin

SWIFT ?= swift
CONFIG ?= gateway.yml
ECHO_LISTEN ?= 127.0.0.1:3000
STRICT := -Xswiftc -warnings-as-errors
BIN := .build/release/attest-gateway
DEV_BIN := .build/release/attest-gateway-dev
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= http1-request jose cbor-appattest config-yaml receipt http2-session request-target h2-request-head play-integrity
SANITIZERS ?= address thread

.PHONY: run demo test unit e2e build deps test-deps bench fuzz sanitize soak check-config clean

deps:
	@scripts/install-deps.sh build

test-deps:
	@scripts/install-deps.sh test

# The gateway and, separately, the development tools (dev echo, dev issuer, simulated App Attest device): the
# production binary never contains them.
build: deps
	$(SWIFT) build -c release $(STRICT) --product attest-gateway
	$(SWIFT) build -c release $(STRICT) --product attest-gateway-dev

# Serves the repository's gateway.yml; the dev echo upstream runs beside it and stops with it.
run: build
	@$(BIN) check-config --config $(CONFIG)
	@echo "attest-gateway: serving $(CONFIG) (attest-gateway-dev echo upstream on $(ECHO_LISTEN)); Ctrl-C stops both"
	@$(DEV_BIN) echo --listen $(ECHO_LISTEN) & echo_pid=$$!; \
	  trap 'kill $$echo_pid 2>/dev/null' EXIT; \
	  $(BIN) serve --config $(CONFIG)

demo: build
	@scripts/demo.sh

test: test-deps unit e2e

unit:
	$(SWIFT) build $(STRICT)
	$(SWIFT) test $(STRICT)

e2e: build
	GATEWAY_BIN=$(CURDIR)/$(BIN) GATEWAY_DEV_BIN=$(CURDIR)/$(DEV_BIN) python3 -m pytest -q Tests/e2e

bench: build
	@scripts/install-deps.sh bench
	@scripts/bench.sh

# Builds into .build/fuzz (never the normal build); works on copies of Tests/Fuzz/Corpus; non-zero on any crash.
fuzz: deps
	FUZZ_SECONDS="$(FUZZ_SECONDS)" FUZZ_TARGETS="$(FUZZ_TARGETS)" scripts/fuzz.sh

# Builds into .build/asan and .build/tsan (never the normal build); non-zero on any sanitizer report or failed test.
# SANITIZERS picks ("address thread"); SANITIZE_E2E=0 runs the Swift tests only.
sanitize: test-deps
	SANITIZERS="$(SANITIZERS)" scripts/sanitize.sh

# Bounded (SOAK_SECONDS, default 600) mixed load on a real gateway; non-zero on growth or an unexpected answer.
soak: build
	@scripts/install-deps.sh soak
	@scripts/soak.sh

check-config: build
	$(BIN) check-config --config $(CONFIG)

clean:
	rm -rf .build data
