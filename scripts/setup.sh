#!/usr/bin/env bash
# Installs what llm-oncall and its tests need on a fresh Debian machine (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v prometheus >/dev/null 2>&1 || ! command -v prometheus-alertmanager >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends prometheus prometheus-alertmanager >/dev/null
    # Debian starts the packaged services where an init system runs; tests start their own.
    pkill -x prometheus 2>/dev/null || true
    pkill -x prometheus-alertmanager 2>/dev/null || true
  else
    echo "note: prometheus/prometheus-alertmanager missing; run as root or: sudo apt-get install prometheus prometheus-alertmanager" >&2
  fi
fi
# The console's browser tests drive the system Chromium (tests/web/test_browser.py; in CI they fail without it).
if [ ! -x /usr/bin/chromium ] || ! command -v chromedriver >/dev/null 2>&1; then
  if [ "$(id -u)" = "0" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # a CJK font, so that screenshots of the Chinese runbook pages show the text
    apt-get install -y -qq --no-install-recommends chromium chromium-driver fonts-wqy-microhei >/dev/null
  else
    echo "note: chromium/chromium-driver missing; run as root or: sudo apt-get install chromium chromium-driver" >&2
  fi
fi
python -m pip install -q -e '.[test]'
