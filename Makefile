# Two commands on a fresh machine: `make demo` and `make test`; each bootstraps .venv.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# Three stamps: the demo needs only the runtime dependencies; the suite adds the test extra; the site the docs extra.
RUNTIME := $(VENV)/.installed-runtime
STAMP   := $(VENV)/.installed-test
DOCS    := $(VENV)/.installed-docs
# setuptools explains at every editable install that a folder named like the package may shadow it (our flows/ maps
# to ldp_dask.flows, so it uses an import finder): known, and not the reader's concern; every other warning shows.
PIP     := PYTHONWARNINGS='ignore:Editable installation:UserWarning' $(PY) -m pip

.PHONY: demo test test-fast test-unit test-statistical test-integration lint bench stack clean venv docs

venv: $(STAMP)

$(RUNTIME): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -e .
	@touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(PIP) install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(RUNTIME)
	$(VENV)/bin/ldp-dask demo --out demo-output

# The whole suite (what CI runs): the linters, then real LocalClusters, Prefect flow runs, the local stack.
test: $(STAMP) lint
	$(PY) -m pytest -q --durations=20 tests

# ruff on the package, flows, benchmarks and tests, mypy on the package ([tool.ruff], [tool.mypy] in pyproject.toml);
# both must be clean.
lint: $(STAMP)
	$(VENV)/bin/ruff check ldp_dask flows benchmarks tests
	$(VENV)/bin/mypy

# One layer at a time: tests/unit (pure functions), tests/statistical (laws, audits, coverage),
# tests/integration (clusters, Prefect, S3, PostgreSQL, the stack, the docs).
test-unit test-statistical test-integration: test-%: $(STAMP)
	$(PY) -m pytest -q tests/$*

# Everything but the slow tests, the Prefect runs, the S3 server and the local stack: under 3 minutes on 2 cores.
test-fast: $(STAMP)
	$(PY) -m pytest -q tests -m "not slow and not prefect and not stack and not s3"

# The deploy topology as local processes (Prefect server, Dask scheduler + 2
# workers, Prefect worker), one nightly-release run on demo data, then stop.
stack: $(STAMP)
	$(PY) deploy/localstack.py

bench: $(STAMP)
	$(PIP) install --quiet -e '.[test,bench]'
	$(PY) benchmarks/throughput.py
	$(PY) benchmarks/wavelet_throughput.py
	$(PY) benchmarks/wavelet_rates.py
	$(PY) benchmarks/gof_power.py
	$(PY) benchmarks/quantiles.py
	$(PY) benchmarks/frequencies.py
	$(PY) benchmarks/frequency_channels.py
	$(PY) benchmarks/huge_domains.py
	$(PY) benchmarks/heavy_hitters.py
	$(PY) benchmarks/distributions.py
	$(PY) benchmarks/means.py
	$(PY) benchmarks/local_vs_central.py
	$(PY) benchmarks/quantile_coverage.py
	$(PY) benchmarks/tables.py
	$(PY) benchmarks/audit.py
	$(PY) benchmarks/lattice.py
	$(PY) benchmarks/units.py
	$(PY) benchmarks/scale.py
	$(PY) benchmarks/scaling.py
	$(PY) benchmarks/weak_scaling.py --s3
	$(PY) benchmarks/weak_scaling.py --strong
	$(PY) benchmarks/incremental.py
	$(PY) benchmarks/plans.py
	$(PY) benchmarks/longitudinal.py
	$(PY) benchmarks/ledger.py

clean:
	rm -rf demo-output .pytest_cache build *.egg-info

# The documentation site (mkdocs.yml) into site/; the suite builds it with --strict too.
$(DOCS): $(RUNTIME)
	$(PIP) install --quiet -e '.[docs]'
	@touch $(DOCS)

# NO_MKDOCS_2_WARNING: the theme's notice about its own future, printed at every build, is not about this site
docs: $(DOCS)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict
