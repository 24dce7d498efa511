# The two commands of the README: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit daemon bench bench-scale soak clean sysdeps sandbox install uninstall

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP) sandbox
	$(BIN)/agentrio

daemon: $(STAMP)
	$(BIN)/agentrio daemon

# `agentrio` on PATH without activating the venv: a link in ~/.local/bin (BINDIR=…
# elsewhere) to this checkout's .venv/bin/agentrio, whose first line names the venv's
# Python. `make uninstall` removes the link (only if it is ours).
BINDIR ?= $(HOME)/.local/bin
install: $(STAMP)
	mkdir -p $(BINDIR)
	ln -sfn $(CURDIR)/$(BIN)/agentrio $(BINDIR)/agentrio
	@echo "installed $(BINDIR)/agentrio -> $(CURDIR)/$(BIN)/agentrio"
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; *) echo "$(BINDIR) is not on PATH: add  export PATH=\"$(BINDIR):\$$PATH\"  to your shell's profile";; esac

uninstall:
	@if [ "$$(readlink $(BINDIR)/agentrio)" = "$(CURDIR)/$(BIN)/agentrio" ]; then rm $(BINDIR)/agentrio && echo "removed $(BINDIR)/agentrio"; else echo "$(BINDIR)/agentrio is not this checkout's link: left alone"; fi

# bubblewrap for `make run`: without it nothing runs unasked (every command asks).
sandbox:
	@command -v bwrap >/dev/null || { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null 2>&1; } || echo "bubblewrap could not be installed: every command will ask first (docs/security.md)"

lint: $(STAMP)
	$(BIN)/ruff check engine protocol repl agentrio tests bench examples
	$(BIN)/ruff format --check engine protocol repl agentrio tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy -p agentrio

# System programs the end-to-end tests drive (a fresh machine has none of them; the
# Redis store's tests start their own redis-server, docs/deployment.md), and
# bubblewrap, the sandbox of commands that run unasked (docs/security.md).
sysdeps:
	@command -v bwrap >/dev/null || { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }
	@command -v tmux >/dev/null || { apt-get update -qq && apt-get install -y -qq tmux >/dev/null; }
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; }
	@command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server >/dev/null; }
	@command -v zsh >/dev/null || { apt-get update -qq && apt-get install -y -qq zsh >/dev/null; }
	@command -v npm >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null; }

# aimock, the mock LLM server the model tests and B13 talk to (tests/aimock.py),
# pinned by package-lock.json into ./node_modules.
AIMOCK := node_modules/@copilotkit/aimock/dist/cli.js

$(AIMOCK): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $(AIMOCK)

# The suite runs in parallel processes (pytest-xdist): most of its time is spent waiting
# on real daemons, bots, tmux and chromium, so even two cores run four workers well.
# Every test owns its home, ports, tmux socket and browser profile.
PYTEST_WORKERS ?= 4

# AGENTRIO_REQUIRE_REDIS / _AIMOCK: sysdeps installed redis-server and node, and
# $(AIMOCK) aimock, so such a test fails here rather than skip (outside make, a machine
# without them skips those tests with the reason).
unit: $(STAMP) sysdeps $(AIMOCK)
	AGENTRIO_REQUIRE_REDIS=1 AGENTRIO_REQUIRE_AIMOCK=1 $(BIN)/pytest -q -n $(PYTEST_WORKERS)

test: lint typecheck unit

# The long reliability runs (docs/reliability.md): the tests of tests/reliability with
# their big sizes. Not part of `make test`, which runs the same tests small.
soak: $(STAMP) sysdeps
	AGENTRIO_SOAK=1 $(BIN)/pytest -q -s -o timeout=0 tests/reliability

# Benchmarks against the anchors (docs/benchmarks.md). They run in their own venv so
# langgraph (a baseline, never a dependency) stays out of .venv.
BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): pyproject.toml
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[test,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) sysdeps $(AIMOCK)
	$(BENCH_VENV)/bin/python -m bench.run_all

# B9's growth table at 1k / 10k / 100k tasks (about 8 minutes on 2 cores); it prints
# the table and leaves docs/benchmarks.md alone (`make bench` runs B9 at 1k / 5k).
bench-scale: $(BENCH_STAMP) sysdeps
	$(BENCH_VENV)/bin/python -m bench.b9_scale_growth --scale

clean:
	rm -rf $(VENV) $(BENCH_VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis
