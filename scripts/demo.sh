#!/usr/bin/env bash
# Set up (idempotent), then run the Jetson scenario in the twin and write
# out/prism_jetson/{results.csv,scenario.resolved.yaml,report.html,provenance.json}
# (--force: a second demo replaces the folder of the first).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/edgetwin run scenarios/prism_jetson.yaml --out out/prism_jetson --force "$@"
