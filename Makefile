# citeflow: two commands on a fresh machine (Python 3.11 and Java 17 needed):
#   make demo   create .venv, install, run the pipeline on a generated sample, print where the artifacts are
#   make test   the test suite
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO   ?= demo
DEMO_PAPERS ?= 20000
PYTEST_ARGS ?=

.PHONY: install demo test test-fast bench lock clean-demo

$(STAMP): setup.cfg pyproject.toml requirements.lock
	@command -v java >/dev/null || { echo "citeflow needs Java 17+ for Spark (apt-get install openjdk-17-jre-headless)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first and alone: pip then keeps the CPU build instead of pulling CUDA wheels.
	$(BIN)/pip install -q --disable-pip-version-check "torch==2.13.0"
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	@test -f $(DEMO)/snapshot/generator.json || $(BIN)/citeflow generate --papers $(DEMO_PAPERS) --out $(DEMO)/snapshot --overwrite
	$(BIN)/citeflow run --snapshot demo --corpus $(DEMO)/snapshot/corpus --scidocs $(DEMO)/snapshot/scidocs \
		--paper-ids $(DEMO)/snapshot/paper-ids --artifacts $(DEMO)/artifacts
	$(BIN)/citeflow artifacts --snapshot demo --artifacts $(DEMO)/artifacts

test: $(STAMP)
	$(BIN)/python -m pytest -q -ra $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -ra -m "not slow and not cluster" $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/bench_stages.py --sizes 100000 1000000 --out bench/results

lock: $(STAMP)
	( head -2 requirements.lock; $(BIN)/pip freeze --all --exclude-editable | grep -v -E '^(torch|pip)==' ) > requirements.lock.new
	mv requirements.lock.new requirements.lock

clean-demo:
	rm -rf $(DEMO)
