# citeflow: two commands on a fresh machine (Python 3.11 and Java 17 needed):
#   make demo     create .venv, install, rebuild a generated sample through Airflow, print the artifact summary
#   make test     the test suite but its long scopes (make test-long; make test-all runs both; CI runs both tiers)
#   make test-fast  the unit tests that start no Spark JVM and no child training
#   make airflow  start Airflow locally (standalone, SQLite, sized for 2 cores) with citeflow's DAGs and the demo's runs;
#                 prints URL and login
#   make deploy   citeflow's DAGs as teams deploy Airflow: PostgreSQL, Redis, Celery workers on citeflow's queues
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The package files the development install links (below), one a line: a module added or removed changes it.
LINKED := $(VENV)/.linked-files
PACKAGE_FILES = $(shell find citeflow jobs spark models evaluation cockpit synthcorpus -name '*.py' -o -name '*.properties' | LC_ALL=C sort)
DEMO   ?= demo
DEMO_PAPERS ?= 20000
PYTEST_ARGS ?=
# pytest-xdist workers for make test / test-fast (0: one process)
TEST_WORKERS ?= 2

# One Airflow home for `make demo` and `make airflow`, set up by one program (cockpit/local_airflow/, which
# names its database, task log folder, DAG folder and pools): the server shows the demo's runs, task logs and
# Artifacts tabs.
AIRFLOW_DEMO_HOME := $(abspath $(DEMO))/airflow
LOCAL_AIRFLOW := CITEFLOW_HOME=$(abspath $(DEMO)) $(BIN)/python -m citeflow.cockpit.local_airflow --home $(AIRFLOW_DEMO_HOME)

.PHONY: install demo demo-cli airflow deploy test test-long test-all test-fast lint format bench lock clean-demo FORCE

$(STAMP): setup.cfg setup.py pyproject.toml requirements.lock
	@command -v java >/dev/null || { echo "citeflow needs Java 17+ for Spark (apt-get install openjdk-17-jre-headless)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first and alone: pip then keeps the CPU build instead of pulling CUDA wheels.
	$(BIN)/pip install -q --disable-pip-version-check "torch==2.13.0"
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	touch $(STAMP)

# citeflow itself, as a strict editable install: under build/, a tree of links to this checkout's package files laid
# out as the installed names (jobs/pipeline.py as citeflow/jobs/pipeline.py), which editors and the type checker read
# like any installed package, where setuptools' default editable install maps the folders with an import hook that
# only the interpreter runs (docs/development.md). The tree holds the files there were when it was made: every
# target links again when a package file was added or removed since, or after the dependencies were installed.
$(LINKED): $(STAMP) FORCE
	@printf '%s\n' $(PACKAGE_FILES) > $@.new
	@if [ $@ -nt $(STAMP) ] && cmp -s $@.new $@; then rm $@.new; else \
		echo "pip install -e . (strict editable: citeflow's files linked under build/)"; \
		$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
			--config-settings editable_mode=strict -e . && mv $@.new $@; fi

install: $(LINKED)

# The whole rebuild through Airflow itself (embedded SQLite, `airflow dags test`: no server left running), in
# the home `make airflow` serves.
demo: install
	@test -f $(DEMO)/snapshot/generator.json || $(BIN)/citeflow generate --papers $(DEMO_PAPERS) --out $(DEMO)/snapshot --overwrite
	@mkdir -p $(AIRFLOW_DEMO_HOME)
	@echo "airflow dags test citeflow_rebuild (log: $(AIRFLOW_DEMO_HOME)/demo-run.log)"
	@$(LOCAL_AIRFLOW) --dags-test citeflow_rebuild > $(AIRFLOW_DEMO_HOME)/demo-run.log 2>&1 || { \
		grep -E "citeflow:|local_airflow:|failed \(|Error|error" $(AIRFLOW_DEMO_HOME)/demo-run.log | tail -20; exit 1; }
	@grep -E "(built|cached) version|DagRun Finished" $(AIRFLOW_DEMO_HOME)/demo-run.log | sed -E 's/.*(DagRun Finished).*(run_duration=[0-9.]+), (state=[a-z]+).*/\1: \2 s, \3/'
	$(BIN)/citeflow artifacts --snapshot demo --artifacts $(DEMO)/artifacts

# The same pipeline without Airflow, from the command line.
demo-cli: install
	@test -f $(DEMO)/snapshot/generator.json || $(BIN)/citeflow generate --papers $(DEMO_PAPERS) --out $(DEMO)/snapshot --overwrite
	$(BIN)/citeflow run --snapshot demo --corpus $(DEMO)/snapshot/corpus --scidocs $(DEMO)/snapshot/scidocs \
		--paper-ids $(DEMO)/snapshot/paper-ids --artifacts $(DEMO)/artifacts
	$(BIN)/citeflow artifacts --snapshot demo --artifacts $(DEMO)/artifacts

# Airflow's UI on http://localhost:8080 with citeflow's DAGs and the demo's runs (Ctrl-C stops every process it
# started).
airflow: install
	$(LOCAL_AIRFLOW)

# The deployed shape on this machine (docs/airflow.md, "Deploying citeflow's DAGs"): PostgreSQL and Redis of
# their own in $(DEMO)/deploy on free ports, Airflow's components and three Celery workers (default, gpu, PBG
# ranks); Ctrl-C stops every process it started. DEPLOY_ARGS: e.g. --port 8081, --worker NAME=QUEUE:SLOTS.
DEPLOY_ARGS ?=
deploy: install
	CITEFLOW_HOME=$(abspath $(DEMO)) $(BIN)/python -m citeflow.cockpit.deployment --home $(abspath $(DEMO))/deploy $(DEPLOY_ARGS)

PYTEST := $(BIN)/python -m pytest -q -ra --durations=25 -n $(TEST_WORKERS) --dist loadfile

# The tiers (docs/development.md): `long` marks the whole-pipeline, fault and multi-process scopes
# (tests/conftest.py LONG_SCOPES). CI (.ci/run) runs make test, then make test-long.
test: install
	$(PYTEST) -m "not long" $(PYTEST_ARGS)

test-long: install
	$(PYTEST) -m long $(PYTEST_ARGS)

test-all: install
	$(PYTEST) $(PYTEST_ARGS)

# ruff's linter and formatter, then the type checker (basedpyright), settings in pyproject.toml (CI runs this before
# the tests)
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/basedpyright

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test-fast: install
	$(BIN)/python -m pytest -q -ra --durations=10 -m "not slow and not cluster and not jvm" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS) tests/unit

bench: install
	$(BIN)/python bench/bench_stages.py --sizes 100000 1000000 --out bench/results

lock: install
	( head -2 requirements.lock; $(BIN)/pip freeze --all --exclude-editable | grep -v -E '^(torch|pip)==' ) > requirements.lock.new
	mv requirements.lock.new requirements.lock

clean-demo:
	rm -rf $(DEMO)

FORCE:
