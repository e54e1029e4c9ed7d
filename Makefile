# threadbot: `make run` starts the bot, `make test` runs the suite, `make bench` the benchmarks.
# Both create .venv on first use and install the project into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: run test lint bench clean sandbox-check

# Python keeps its compiled modules (__pycache__, ignored by git) even where the
# environment says not to: the suite starts hundreds of bot processes, and each would
# compile every module of threadbot again (about 0.8 s a process on a 2-CPU machine).
unexport PYTHONDONTWRITEBYTECODE

$(STAMP): pyproject.toml
	@echo "threadbot: installing threadbot and its dependencies into $(VENV) (once; about 2 minutes)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)
	@echo "threadbot: installed"

# The benchmarks also run DBOS, side by side (the bench extra).
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

run: $(STAMP) sandbox-check
	$(BIN)/threadbot run

# The suite runs on every core (pytest-xdist); tests share no port, folder or process marker.
# Tests marked xdist_group run in one worker per group (the Ray tests share one cluster).
test: $(STAMP) sandbox-check
	$(BIN)/python -m pytest -q -n auto --dist loadgroup

# The agent's commands run under bubblewrap; without it they run unconfined and ask first.
sandbox-check:
	@command -v bwrap >/dev/null || echo "note: bubblewrap is not installed: commands will not be sandboxed (apt install bubblewrap slirp4netns); its tests skip (and fail under CI=true)"
	@command -v slirp4netns >/dev/null || echo "note: slirp4netns is not installed: a network granted by a policy rule cannot be given (apt install slirp4netns)"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .threadbot .pytest_cache .mypy_cache .ruff_cache
