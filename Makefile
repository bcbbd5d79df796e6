# Everyday commands. The two that matter are also plain Python: `python3 dev.py serve|test`.
PY := .venv/bin/python

.PHONY: setup serve test lint format typecheck openapi bench lock ci clean

setup:
	python3 dev.py setup

serve: setup
	python3 dev.py serve

test: setup
	python3 dev.py test

lint: setup
	.venv/bin/ruff check server tests client/python bench
	.venv/bin/ruff format --check server tests client/python bench
	.venv/bin/lint-imports

format: setup
	.venv/bin/ruff format server tests client/python bench
	.venv/bin/ruff check --fix server tests client/python bench

typecheck: setup
	.venv/bin/mypy

openapi: setup
	.venv/bin/werk openapi --output openapi/openapi.json

bench: setup
	$(PY) -m bench run all

lock:
	.venv/bin/uv pip compile pyproject.toml --extra dev -o requirements.lock --python $(PY)

ci:
	bash .ci/run

clean:
	rm -rf .venv .pytest_cache .mypy_cache .ruff_cache
