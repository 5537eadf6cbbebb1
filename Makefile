# One entry point for what CI checks. `make check` before every push; each step is also
# a target of its own. Everything runs through uv, so nothing but uv is needed.

PG15 ?= postgresql://postgres@127.0.0.1:5432/postgres
PYTEST_ARGS ?=

.PHONY: check lint format typecheck imports test test-pg15 test-docs reference help

check: lint typecheck imports test  ## everything CI runs on the embedded PostgreSQL

lint:  ## ruff: lint rules and formatting (never rewrites files)
	uv run ruff check .
	uv run ruff format --check .

format:  ## ruff: rewrite files into shape, fix what it can
	uv run ruff format .
	uv run ruff check --fix .

typecheck:  ## mypy --strict on yuxi/
	uv run mypy

imports:  ## import-linter: the layers and forbidden imports of pyproject.toml
	uv run lint-imports

test:  ## the whole suite on a fresh embedded PostgreSQL 18 (or YUXI_TEST_DATABASE_URL)
	uv run pytest $(PYTEST_ARGS)

test-pg15:  ## the whole suite again on the PostgreSQL at $(PG15)
	YUXI_TEST_DATABASE_URL=$(PG15) uv run pytest $(PYTEST_ARGS)

test-docs:  ## the README walkthrough and the psql recipes of docs/operations.md
	uv run pytest tests/docs $(PYTEST_ARGS)

reference:  ## regenerate docs/reference/sql.md from a scratch migrated database
	uv run python -m yuxi.db.reference > docs/reference/sql.md

help:  ## this list
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
