# Two set-up commands work on a fresh machine: `make lab` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab demo test test-under-load bench mutation install clean screenshot

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## JupyterLab on notebooks/ with the server extension enabled
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ServerApp.open_browser=False $(ROOT_FLAG) $(LAB_ARGS)

## The headless main job
demo: $(STAMP)
	$(PY) -m kernel_ext demo

## The whole test suite (pytest's "no tests collected" exit 5 is a failure)
test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

## A check, not a set-up: `make test` while stress-ng loads the machine (two CPU hogs, one I/O hog),
## as a busy CI machine would; the suite waits on events, never on time, so it must pass here too.
## stress-ng is Debian's package: installed when root and missing, else a named message.
test-under-load: $(STAMP)
	@command -v stress-ng >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq --no-install-recommends stress-ng; \
	  else echo "test-under-load: stress-ng is missing and this is not root; install it first (apt-get install stress-ng)" >&2; exit 1; fi; }
	@stress-ng --cpu 2 --io 1 --timeout 6h --quiet & load=$$!; \
	  $(PY) -m pytest $(PYTEST_ARGS); status=$$?; \
	  kill $$load 2>/dev/null; wait $$load 2>/dev/null; \
	  echo "test-under-load: pytest exited $$status with stress-ng --cpu 2 --io 1 beside it"; exit $$status

## docs/run-view.png, the README's picture: the browser test on notebook 01 (JupyterLab, Chromium), the run view
## at its pending card (pinned under the banner, the decided calls as one-line rows below)
screenshot: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider tests/test_browser.py -k lab-ipykernel7
	cp tests/artifacts/browser/lab-ipykernel7/1-approval-card.png docs/run-view.png

## Side-by-side benchmarks
bench: $(STAMP)
	$(PY) bench/run_all.py

## Mutation testing of the guarantee-carrying modules, each against its own tests (MODULES="read_ids env" for some)
MUTATION_STAMP := $(VENV)/.installed-mutation

$(MUTATION_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,mutation]'
	touch $(MUTATION_STAMP)

mutation: $(MUTATION_STAMP)
	$(PY) bench/mutation.py $(MODULES)

clean:
	rm -rf $(VENV) .pytest_cache
