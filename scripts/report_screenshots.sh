#!/usr/bin/env bash
# Screenshots of the run, plan and adaptive pages (headless Chromium) for docs/reports.md:
#   scripts/report_screenshots.sh [OUT]     # OUT: scratch folder, default out/screenshots
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-out/screenshots}")
edgetwin=("${PYTHON:-.venv/bin/python}" -m edgetwin)
rm -rf "$out"
"${edgetwin[@]}" run scenarios/prism_jetson.yaml --out "$out/run" --quiet
"${edgetwin[@]}" plan scenarios/plan_crossover.plan.yaml --out "$out/plan" >/dev/null
"${edgetwin[@]}" evaluate scenarios/adaptive_devices.eval.yaml --out "$out/adaptive" >/dev/null
shot() {  # page, PNG, window height (px: the figures, not the tables below them), scale
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=5000 \
    --force-device-scale-factor="$4" --window-size="1100,$3" --screenshot="docs/figures/$2" \
    "file://$out/$1" 2>/dev/null
}
mkdir -p docs/figures
shot run/report.html report_run.png 2900 0.9
shot plan/plan.html report_plan.png 1400 0.9
shot adaptive/evaluation.html report_adaptive.png 3900 0.75
ls -l docs/figures
