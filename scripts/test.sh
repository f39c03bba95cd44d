#!/usr/bin/env bash
# Set up, then run the whole offline test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh local,test,plots
exec .venv/bin/python -m pytest -q "$@"
