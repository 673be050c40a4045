"""Leave-one-set-out, in the fresh regime, of a fallback that reads a document as a sentence embedding.

The packaged fallback reads words (naive Bayes over words and word pairs, with the failure-report reader). This
script measures whether a reader of meaning does better where the catalogue recognises nothing: WordLlama's static
embeddings (PyPI ``wordllama``, a 256-dimension token table distilled from large language models, shipped inside the
wheel: no download), each document the mean of its token vectors beside the element-wise maximum over its lines'
mean vectors, and a multinomial logistic regression over them. For each set in ``fresh_readings.json`` held out in
turn, both are trained on the gated corpus and every other set; the held-out set's found-nothing samples are answered
by each (the embedding reader answers a failure class when its probability exceeds benign's by the margin), and by
the naive Bayes first with the embedding reader where it answers nothing. Measurement only: nothing packaged reads
it (docs/evidence.md, "An embedding reader, measured").

    pip install 'wordllama==0.4.0.post1'
    PYTHONPATH=src python scripts/embedding_loso.py [--penalty 0.01] [--features FILE.npz] [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from llm_oncall.evidence import prior
from llm_oncall.evidence import prior_train as pt

MARGINS = (0.0, 0.1, 0.2, 0.3, 0.5)


def _embedder():  # type: ignore[no-untyped-def]
    try:
        import wordllama
        from safetensors import safe_open
        from tokenizers import Tokenizer
    except ImportError:
        sys.exit("error: this measurement needs WordLlama: pip install 'wordllama==0.4.0.post1'")
    pkg = Path(wordllama.__file__).parent
    # the wheel ships its tokenizer under tokenizers/, where WordLlama.load does not look (it would download it)
    tok = Tokenizer.from_file(str(pkg / "tokenizers" / "l2_supercat_tokenizer_config.json"))
    tok.no_padding()
    tok.no_truncation()
    with safe_open(str(pkg / "weights" / "l2_supercat_256.safetensors"), framework="np") as f:
        table = f.get_tensor("embedding.weight").astype(np.float32)

    def embed(text: str) -> np.ndarray:
        lines = [ln for ln in text.splitlines()[:5000] if ln.strip()][:3000]
        vecs, ids = [], []
        for enc in tok.encode_batch(lines, add_special_tokens=False) if lines else []:
            if enc.ids:
                i = np.asarray(enc.ids[:400], dtype=np.int64)
                ids.append(i)
                vecs.append(table[i].mean(0))
        if not vecs:
            return np.zeros(2 * table.shape[1], np.float32)
        mean = table[np.concatenate(ids)].mean(0)
        per_line = np.stack(vecs)
        per_line /= np.linalg.norm(per_line, axis=1, keepdims=True) + 1e-9
        return np.concatenate([mean / (np.linalg.norm(mean) + 1e-9), per_line.max(0)])
    return embed


def fit(x: np.ndarray, y: np.ndarray, k: int, penalty: float, steps: int = 500) -> tuple[np.ndarray, ...]:
    """Multinomial logistic regression on standardised features, full-batch Adam; deterministic."""
    mu, sd = x.mean(0), x.std(0) + 1e-6
    z = (x - mu) / sd
    w, b = np.zeros((z.shape[1], k)), np.zeros(k)
    target = np.eye(k)[y]
    moments = [[np.zeros_like(w), np.zeros_like(w)], [np.zeros_like(b), np.zeros_like(b)]]
    for t in range(1, steps + 1):
        p = z @ w + b
        p = np.exp(p - p.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        g = (p - target) / len(z)
        for param, grad, (m, v) in ((w, z.T @ g + penalty * w, moments[0]), (b, g.sum(0), moments[1])):
            m *= 0.9
            m += 0.1 * grad
            v *= 0.999
            v += 0.001 * grad * grad
            param -= 0.05 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return mu, sd, w, b


def proba(model: tuple[np.ndarray, ...], x: np.ndarray) -> np.ndarray:
    mu, sd, w, b = model
    p = ((x - mu) / sd) @ w + b
    p = np.exp(p - p.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--penalty", type=float, default=0.01, help="L2 penalty of the logistic regression")
    ap.add_argument("--features", type=Path, help="the documents' vectors from a file (scripts/lm_features.py) "
                    "instead of WordLlama's")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    root = Path(".")
    fresh, gate = pt.recorded_sets(root)
    sets = {**fresh, pt.GATE_DIR: gate}
    if args.features:
        saved = np.load(args.features)
        vec = dict(zip(saved["keys"].tolist(), saved["vals"], strict=True))
        missing = [r.rel for rs in sets.values() for r in rs if r.rel not in vec]
        if missing:
            sys.exit(f"error: {args.features} has no vector for {len(missing)} documents, e.g. {missing[0]}")
    else:
        embed = _embedder()
        vec = {r.rel: embed(r.text) for rs in sets.values() for r in rs}
    classes = sorted({r.expected for rs in sets.values() for r in rs})
    benign = classes.index(prior.BENIGN)
    reports = pt.empty_reports(fresh)
    packaged = prior.packaged()
    cache: dict[tuple[str, ...], prior.Model] = {}
    totals: dict[str, np.ndarray] = {}
    for n, (held, rs) in enumerate(fresh.items(), 1):
        train = [r for name, s in sets.items() if name != held for r in s]
        model = fit(np.stack([vec[r.rel] for r in train]), np.array([classes.index(r.expected) for r in train]),
                    len(classes), args.penalty)
        empty = [r for r in rs if r.empty]
        texts = {r.rel: r.text for r in empty}
        nb = pt._train_without(sets, [held], cache)
        nb_answers = pt.reader_decisions({rel: prior.read(nb, t) for rel, t in texts.items()}, reports,
                                         packaged.settings, packaged.reader, texts)
        runs: dict[str, dict[str, str | None]] = {"without a fallback": {}, "naive Bayes and reader": nb_answers}
        p = proba(model, np.stack([vec[r.rel] for r in empty])) if empty else np.zeros((0, len(classes)))
        for margin in MARGINS:
            emb: dict[str, str | None] = {}
            for i, r in enumerate(empty):
                q = p[i].copy()
                against, q[benign] = q[benign], -1.0
                best = int(q.argmax())
                emb[r.rel] = classes[best] if q[best] - against >= margin else None
            runs[f"embedding, margin {margin}"] = emb
            runs[f"naive Bayes, then embedding {margin}"] = {rel: nb_answers.get(rel) or emb.get(rel) for rel in texts}
        for name, answers in runs.items():
            s = pt.score(rs, answers)
            row = np.array([s.correct, s.samples, s.fired_on_benign, s.benign_correct, s.benign_predicted])
            totals[name] = totals.get(name, 0) + row
        print(f"[{n}/{len(fresh)}] {held}", file=sys.stderr)
    out = {k: {"right": int(v[0]), "samples": int(v[1]), "benign_alarms": int(v[2]),
               "benign_precision": [int(v[3]), int(v[4])]} for k, v in totals.items()}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for k, v in out.items():
        bc, bp = v["benign_precision"]
        print(f"{k:36s} right {v['right']}/{v['samples']} = {v['right'] / v['samples']:.3f}; "
              f"benign alarms {v['benign_alarms']}; benign precision {bc}/{bp} = {bc / max(bp, 1):.3f}")


if __name__ == "__main__":
    main()
