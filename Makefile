# Two commands matter: `make run` and `make test`. Everything else is for engineers.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NODE_PACKAGES := sdk/typescript integrations/vercel-ai
INSTALL_INPUTS := pyproject.toml sdk/python/pyproject.toml $(foreach p,$(NODE_PACKAGES),$(p)/package-lock.json)
STAMP := $(VENV)/.installed-$(shell cat $(INSTALL_INPUTS) | sha1sum | cut -c1-12)

.PHONY: run test install migrate demo lint bench clean-db fuzz load sdk-types

$(STAMP): $(INSTALL_INPUTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@# The Python SDK (its own package; the tests drive it) with its framework adapters' extras.
	$(PY) -m pip install --quiet -e 'sdk/python[langgraph,llamaindex]'
	@# The TypeScript SDK first: the Vercel AI SDK tools depend on its built package (file:../../sdk/typescript).
	for p in $(NODE_PACKAGES); do (cd $$p && npm ci --no-audit --no-fund --loglevel=error && npm run build --silent) || exit 1; done
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

migrate: install
	$(PY) manage.py migrate --noinput

demo: migrate
	$(PY) manage.py cairn_demo
	@# Memories without a vector of the configured EMBEDDING_MODEL (it changed since they were written) are queued
	@# for the workers; semantic search covers them as they finish. A memory's own embeddingModel is left alone.
	$(PY) manage.py reembed --enqueue --default-only

run: demo
	$(PY) scripts/serve.py

test: install
	$(PY) -m pytest

# Style and types, as CI checks them before the tests: ruff (lint and format) and mypy with django-stubs.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# After an API change: the TypeScript SDK's types regenerated from this checkout's OpenAPI document, then built
# (a type error names each call the change affects). tests/integrations fails until they match the server.
sdk-types: install
	mkdir -p var
	$(PY) -c "import json, os, django; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'config.settings'); django.setup(); from django.test import Client; json.dump(Client().get('/api/sdk/v1/openapi.json').json(), open('var/openapi.json', 'w'))"
	cd sdk/typescript && node scripts/generate-types.mjs ../../var/openapi.json > src/openapi.ts && npm run build --silent

bench: install
	$(PY) bench/api_latency.py

# API fuzzing: 1000 generated requests per operation, random seed (the suite runs a fixed, small profile).
fuzz: install
	FUZZ_EXAMPLES=1000 FUZZ_RANDOM=1 $(PY) -m pytest tests/ops/test_fuzz.py -p no:warnings

# Load test: gunicorn (2 workers) + qcluster, 8 clients, mixed workload; LOAD_SECONDS=600 for the full run.
load: install
	$(PY) bench/load_test.py --seconds $${LOAD_SECONDS:-600} --clients 8

clean-db:
	rm -rf var/pgdata
