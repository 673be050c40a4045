#!/usr/bin/env bash
# The whole test suite: unit, simulator, drills, integration (real Prometheus) and the real-engine tier.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e '.[test]' >/dev/null 2>&1 || python -m pip install -q -e '.[test]'
exec python -m pytest -q -n 2 --dist loadgroup "$@"
