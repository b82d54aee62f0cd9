#!/usr/bin/env bash
# Set up (idempotent), then lint, type-check and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check edgetwin tests benchmarks docs/tutorial.ipynb
.venv/bin/ruff format --check edgetwin tests benchmarks docs/tutorial.ipynb
.venv/bin/mypy edgetwin benchmarks
.venv/bin/lint-imports --no-cache --no-logo
.venv/bin/python -m pytest -q -n auto "$@"
