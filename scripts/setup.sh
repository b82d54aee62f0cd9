#!/usr/bin/env bash
# Installs everything edgetwin and its tests need on a fresh Debian machine:
# Debian packages (Chromium for the report test) and a virtual environment
# in .venv with edgetwin and its development tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: chromium is missing and this is not root; the browser test will be skipped" >&2
  fi
fi
# the emulator (mode emu): Mininet, Linux bridges, iperf3, and for loss and latency
# without netem iptables, ethtool and ping; edgetwin loads Debian's Mininet package
# from /usr/lib/python3/dist-packages/mininet itself
emu_missing=0
for tool in mnexec iperf3 iptables ethtool ping; do
  command -v "$tool" >/dev/null 2>&1 || emu_missing=1
done
if [ "$emu_missing" = 1 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mininet bridge-utils iperf3 \
      iptables ethtool iputils-ping >/dev/null
  else
    echo "setup: Mininet/iperf3/iptables/ethtool/ping are missing and this is not root; the emulator tests will be skipped" >&2
  fi
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
# the CPU build of torch first (a bare "torch" could pull a multi-GB CUDA build)
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e '.[dev,emu]'
