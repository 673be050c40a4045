"""The word-level prior (src/llm_oncall/evidence/prior.py): train it on the training directories (by default the
gated corpus and the labelled held-out sets: prior_train.TRAINING_DIRS), cross-validate it, measure a held-out set
with and without it, check the packaged model is current.

  PYTHONPATH=src python scripts/prior.py train          # round 3w: write catalog/prior.json (TRAINING_DIRS)
  PYTHONPATH=src python scripts/prior.py cv [DIR…]       # the cross-validated figures only
  PYTHONPATH=src python scripts/prior.py eval DIR [DIR…]  # held-out sets, without and with the fallback
  PYTHONPATH=src python scripts/prior.py check            # exit 1 when catalog/prior.json is stale
  PYTHONPATH=src python scripts/prior.py loso             # round 3r: the failure-report reader, leave-one-set-out
  PYTHONPATH=src python scripts/prior.py reader-eval DIR…  # a held-out set with the reader (prior.READER_MEASURED)
  PYTHONPATH=src python scripts/prior.py fresh-readings   # round 3w: each held-out set read as when it was committed
  PYTHONPATH=src python scripts/prior.py fresh-loso       # round 3w: the fallback chosen in that regime, per set
  PYTHONPATH=src python scripts/prior.py fresh-eval DIR…  # round 3w: a held-out set with round 3w's candidate
  PYTHONPATH=src python scripts/prior.py over-benign-eval DIR…  # round 3z: the reader past benign-only findings
  PYTHONPATH=src python scripts/prior.py logistic-candidate FILE  # round 3ze: write the guarded logistic candidate
  PYTHONPATH=src python scripts/prior.py logistic-loso       # round 3ze: naive Bayes beside the logistic prior
  PYTHONPATH=src python scripts/prior.py logistic-eval [--model FILE] DIR…  # round 3ze: a set with the candidate
  PYTHONPATH=src python scripts/prior.py more-data        # round 3zn: the packaged model beside one trained on all
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from llm_oncall.evidence import corpus, prior, prior_train
from llm_oncall.evidence.classify import classify_text, read_text

ROOT = Path(__file__).resolve().parents[1]


def _dirs(args: list[str]) -> list[str]:
    """The training directories as the repository names them: the arguments, or prior_train.TRAINING_DIRS."""
    if not args:
        return list(prior_train.TRAINING_DIRS)
    return [Path(a).resolve().relative_to(ROOT).as_posix() for a in args]


def _fmt(s: dict[str, Any]) -> str:
    return (f"{s['correct']}/{s['samples']} = {s['accuracy']:.3f}; benign precision "
            f"{s['benign_correct']}/{s['benign_predicted']} = {s['benign_precision']:.3f}; answered {s['fired']} "
            f"({s['fired_correct']} right, {s['fired_on_benign']} on benign)")


def _cv(dirs: list[str]) -> dict[str, Any]:
    cv = prior_train.cross_validate(prior_train.rows(prior_train.training_roots(ROOT, dirs)))
    print(f"{', '.join(dirs)}: {cv['folds']}-fold CV grouped by thread; nothing found in {cv['eligible']} samples "
          f"{cv['eligible_by_class']}; benign precision bound {cv['bound']:.4f}")
    print(f"  without: {_fmt(cv['without'])}")
    s = cv["settings"]
    print(f"  with, chosen (margin {s.min_margin}, tokens {s.min_tokens}): {_fmt(cv['with'])}")
    for part, v in cv["by_part"].items():
        print(f"  {part or '.'} (nothing found in {v['eligible']})\n    without: {_fmt(v['without'])}\n"
              f"    with:    {_fmt(v['with'])}")
    for k, v in cv["grid"].items():
        print(f"  with, {k}: {_fmt(v)}")
    for rel, (exp, got) in sorted(cv["answers"].items()):
        print(f"    {exp} → {got}: {rel}")
    return cv


def loso_table(res: dict[str, Any]) -> list[str]:
    """The leave-one-set-out figures, one Markdown table row per held-out set (docs/evidence.md, "Round 3r")."""
    out = []
    for d, v in res.items():
        w, b, a = v["without"], v["before"], v["after"]
        r = v["reader"]
        chosen = "none" if r is None else (f"{r['min_lines']} line(s), margin {r['min_margin']}, "
                                           f"headings {'count' if r['headings'] else 'do not count alone'}")
        out.append(f"| {d.split('/')[-1]} ({w['samples']}; {v['eligible']} empty, {v['eligible_failures']} failures) "
                   f"| {w['correct']}/{w['samples']}; {w['benign_correct']}/{w['benign_predicted']} "
                   f"| {b['correct']}/{b['samples']}; {b['benign_correct']}/{b['benign_predicted']} "
                   f"| {a['correct']}/{a['samples']}; {a['benign_correct']}/{a['benign_predicted']} "
                   f"| {a['fired'] - b['fired']:+d} answers | {v['classes']}; {chosen} |")
    return out


def _evaluate(dirs: list[str], reader: prior.ReaderSettings | None) -> int:
    """A held-out set's figures without and with the packaged fallback (and the reader, when given)."""
    model = prior.default_model()
    settings = prior.default_settings(model)
    if model is None or settings is None:
        print("no packaged model: run train first", file=sys.stderr)
        return 2
    for d in dirs:
        r = prior_train.evaluate(Path(d), model, settings, reader)
        print(f"{d} (nothing found in {r['eligible']})" + (f", reader {reader}" if reader is not None else ""))
        print(f"  without: {_fmt(r['without'])}\n  with:    {_fmt(r['with'])}")
        for rel, exp, got in r["fired"]:
            print(f"    {exp} → {got}: {rel}")
    return 0


# Run by the interpreter with PYTHONPATH at an old source tree: that tree's catalogue reads one set with the prior
# off (the parameter did not exist before round 3k) and prints {file: [predicted, found nothing, expected]}.
_OLD_READER = """
import inspect, json, sys
from pathlib import Path
from llm_oncall.evidence import corpus
from llm_oncall.evidence.classify import classify_all, read_text
root = Path(sys.argv[1])
kw = {"word_prior": False} if "word_prior" in inspect.signature(classify_all).parameters else {}
out = {}
for s in corpus.load(root):
    found = classify_all(read_text(s.path), str(s.path), **kw)
    best = found[0] if found else None
    rel = s.path.resolve().relative_to(root.resolve()).as_posix()
    out[rel] = ["benign" if best is None else corpus.predicted(best), not found, s.expected]
json.dump(out, sys.stdout)
"""


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def fresh_readings() -> int:
    """Every held-out set read by the source tree of the commit that added it (its manifest's first commit)."""
    holdout = ROOT / "tests/evidence/holdout"
    sets: dict[str, Any] = {}
    dirs = sorted(p.parent for p in holdout.glob("*/manifest.yaml"))
    for i, d in enumerate(dirs, 1):
        rel = d.relative_to(ROOT).as_posix()
        added = _git("log", "--diff-filter=A", "--format=%H", "--", f"{rel}/manifest.yaml").splitlines()
        if not added:
            print(f"{rel}: not committed yet; commit the set first", file=sys.stderr)
            return 2
        commit = added[-1]
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(["git", "archive", "--format=tar", commit, "src"], cwd=ROOT,
                                     capture_output=True, check=True).stdout
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(tmp, filter="data")
            env = {**os.environ, "PYTHONPATH": str(Path(tmp) / "src")}
            res = subprocess.run([sys.executable, "-c", _OLD_READER, str(d)], cwd=tmp, env=env,
                                 capture_output=True, text=True, check=True)
        got = json.loads(res.stdout)
        sets[rel] = {"commit": commit, "readings": {
            k: {"predicted": p, "found_nothing": e, "expected": x} for k, (p, e, x) in sorted(got.items())}}
        right = sum(v[0] == v[2] for v in got.values())
        print(f"[{i}/{len(dirs)}] {rel} at {commit[:10]}: {right}/{len(got)} right, nothing found in "
              f"{sum(v[1] for v in got.values())}", file=sys.stderr)
    doc = {"about": "each held-out set classified (prior off) by the source tree of the commit that added it: "
                    "the catalogue's reading of the set while it was unseen (docs/evidence.md, 'Round 3w'); "
                    "written by scripts/prior.py fresh-readings",
           "sets": sets}
    (ROOT / prior_train.FRESH_READINGS).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {prior_train.FRESH_READINGS}", file=sys.stderr)
    return 0


def _candidate_sets() -> tuple[dict[str, list[prior_train.Row]], list[prior_train.Row]]:
    return (prior_train.fresh_sets(ROOT, prior_train.CANDIDATE_DIRS),
            prior_train.text_rows(ROOT / prior_train.GATE_DIR, prior_train.GATE_DIR))


def logistic_candidate(args: list[str]) -> int:
    """Write the logistic candidate (round 3ze's, with its guard) to the file given: trained on the gated corpus and
    every fresh set (docs/evidence.md, "Round 3ze")."""
    if len(args) != 1:
        print("logistic-candidate takes the file to write", file=sys.stderr)
        return 2
    out = Path(args[0])
    fresh, gate = _candidate_sets()
    try:
        commit = _git("rev-parse", "HEAD")
    except (OSError, subprocess.CalledProcessError):
        commit = None
    built = prior_train.logistic_candidate(fresh, gate, commit=commit)
    out.write_text(json.dumps(built.to_json(), separators=(",", ":"), sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {out}: {built.meta['tokens']} tokens, {built.meta['samples']} "
          f"samples, settings {built.meta['settings']}; out of set on the fresh sets: {built.meta['chosen_on']}")
    return 0


_SCORE_FIELDS = ("correct", "benign_correct", "benign_predicted", "samples", "fired_on_benign")


def _score_cells(v: dict[str, Any], keys: tuple[str, ...], tot: dict[str, list[int]]) -> list[str]:
    """One table row's cells for the scores ``v[k]`` of ``keys`` (right; benign right/said benign; benign alarms),
    each added to its running total in ``tot``."""
    cells = []
    for k in keys:
        s = v[k]
        cells.append(f"{s['correct']}; {s['benign_correct']}/{s['benign_predicted']}; {s['fired_on_benign']}")
        t = tot.setdefault(k, [0] * len(_SCORE_FIELDS))
        for j, f in enumerate(_SCORE_FIELDS):
            t[j] += s[f]
    return cells


def logistic_loso() -> int:
    """The packaged naive Bayes fallback beside the guarded logistic prior (round 3ze), each fresh set held out in
    turn."""
    fresh, gate = _candidate_sets()
    main = prior.packaged()
    if main is None:
        print("no packaged model: run train first", file=sys.stderr)
        return 2
    res = prior_train.logistic_loso(fresh, gate, main, progress=lambda d: print(f"  {d} done", file=sys.stderr))
    print("| held-out set (samples; nothing found in) | without the prior | naive Bayes, packaged settings and reader "
          "| logistic prior | its margin (chosen on the other sets) |")
    print("|---|---|---|---|---|")
    tot: dict[str, list[int]] = {}
    for d, v in res.items():
        cells = _score_cells(v, ("without", "packaged", "logistic"), tot)
        print(f"| {d.split('/')[-1]} ({v['without']['samples']}; {v['found_nothing']}) | " + " | ".join(cells)
              + f" | {v['margin']} |")
    print("| **sum** | " + " | ".join(f"{c}/{n} = {c / n:.3f}; {bc}/{bp} = {bc / bp:.3f}; {a}"
                                       for c, bc, bp, n, a in tot.values()) + " | |")
    print("(each cell: right; benign right/said benign; benign samples the fallback answered a failure class on)")
    for v in res.values():
        for rel, exp, a, b in v["changed"]:
            print(f"    {exp}: {a} → {b}: {rel}")
    return 0


def _reader(r: dict[str, Any] | None) -> str:
    return "none" if r is None else f"margin {r['min_margin']}, {r['min_lines']} line"


def fresh_loso() -> int:
    fresh = prior_train.fresh_sets(ROOT)
    gate = prior_train.text_rows(ROOT / prior_train.GATE_DIR, prior_train.GATE_DIR)
    res = prior_train.fresh_loso(fresh, gate, prior_train.PLAIN_3O)
    packaged = prior_train.PLAIN_3O
    print(f"| held-out set (samples; nothing found in; of which failures) | without the prior | packaged settings "
          f"(margin {packaged.min_margin}, {packaged.min_tokens} tokens) | plain prior, chosen | with the reader, "
          "chosen | the packaged settings and a reader chosen beside them | settings chosen on the other sets |")
    print("|---|---|---|---|---|---|---|")
    tot: dict[str, list[int]] = {}
    for d, v in res.items():
        cells = []
        for k in ("without", "packaged", "plain", "reader", "candidate"):
            s = v[k]
            cells.append(f"{s['correct']}; {s['benign_correct']}/{s['benign_predicted']}")
            t = tot.setdefault(k, [0, 0, 0, 0])
            for j, f in enumerate(("correct", "benign_correct", "benign_predicted", "samples")):
                t[j] += s[f]
        r, c = v["reader_settings"], v["candidate_reader"]
        chosen = (f"margin {v['settings']['min_margin']}, {v['settings']['min_tokens']} token(s); reader "
                  f"{_reader(r)}; beside the packaged settings {_reader(c)}")
        print(f"| {d.split('/')[-1]} ({v['without']['samples']}; {v['found_nothing']}; "
              f"{v['failures_in_found_nothing']}) | " + " | ".join(cells) + f" | {chosen} |")
    print("| **sum** | " + " | ".join(f"{c}/{n} = {c / n:.3f}; {bc}/{bp} = {bc / bp:.3f}"
                                       for c, bc, bp, n in tot.values()) + " | |")
    model, plain, reader = prior_train.fresh_candidate(fresh, gate)
    print(f"candidate (chosen on every set): {plain}, {reader}; trained on {model.meta.get('samples', '?')} samples")
    return 0


def more_data() -> int:
    """The sets written since the packaged model was trained, each read by it and by a model trained on every other
    set (round 3zn)."""
    fresh, gate = prior_train.recorded_sets(ROOT)
    main = prior.packaged()
    if main is None:
        print("no packaged model: run train first", file=sys.stderr)
        return 2
    held_out = [d for d in fresh if d not in main.model.meta.get("corpus", [])]
    res = prior_train.more_data(fresh, gate, main, held_out)
    print("| held-out set (samples) | without the prior | packaged model | trained on every other set |")
    print("|---|---|---|---|")
    tot: dict[str, list[int]] = {}
    for d, v in res.items():
        cells = _score_cells(v, ("without", "packaged", "more data"), tot)
        print(f"| {d.split('/')[-1]} ({v['without']['samples']}) | " + " | ".join(cells) + " |")
    print("| **sum** | " + " | ".join(f"{c}/{n} = {c / n:.3f}; {bc}/{bp}; {a}" for c, bc, bp, n, a in tot.values())
          + " |")
    print("(each cell: right; benign right/said benign; benign samples the fallback answered a failure class on)")
    for v in res.values():
        for rel, exp, a, b in v["changed"]:
            print(f"    {exp}: {a} → {b}: {rel}")
    return 0


def fresh_eval(dirs: list[str]) -> int:
    """Held-out sets with the packaged fallback and with round 3w's candidate (trained and chosen on
    prior_train.FRESH_DIRS only)."""
    fresh = prior_train.fresh_sets(ROOT)
    gate = prior_train.text_rows(ROOT / prior_train.GATE_DIR, prior_train.GATE_DIR)
    model, plain, reader = prior_train.fresh_candidate(fresh, gate)
    status = _evaluate(dirs, None)
    for d in dirs:
        r = prior_train.evaluate(Path(d), model, plain, reader)
        print(f"{d}, round 3w's candidate ({plain}, {reader})\n  with:    {_fmt(r['with'])}")
        for rel, exp, got in r["fired"]:
            print(f"    {exp} → {got}: {rel}")
    return status


def over_benign_eval(dirs: list[str]) -> int:
    """Held-out sets classified with the packaged fallback and with the same fallback whose reader also answers
    documents the catalogue found only benign lines in (round 3z's candidate, ``ReaderSettings.over_benign``)."""
    if not dirs:
        print("usage: scripts/prior.py over-benign-eval DIR…", file=sys.stderr)
        return 2
    main = prior.packaged()
    if main is None or main.reader is None:
        print("no packaged model with a reader: run train first", file=sys.stderr)
        return 2
    return compare(dirs, main, dataclasses.replace(main, reader=dataclasses.replace(main.reader, over_benign=True)))


def logistic_eval(args: list[str]) -> int:
    """Held-out sets classified with the packaged fallback and with round 3ze's candidate, the guarded logistic
    prior: the model file given with --model (written by logistic-candidate), else trained here (a few minutes)."""
    model_file = None
    if args[:1] == ["--model"] and len(args) >= 2:
        model_file, args = Path(args[1]), args[2:]
    if not args or any(a.startswith("-") for a in args):
        print("usage: scripts/prior.py logistic-eval [--model FILE] DIR…", file=sys.stderr)
        return 2
    main = prior.packaged()
    if main is None:
        print("no packaged model: run train first", file=sys.stderr)
        return 2
    if model_file is not None:
        candidate = prior.fallback_from(model_file)
        if candidate is None:
            print(f"{model_file}: not a readable model file", file=sys.stderr)
            return 2
    else:
        candidate = prior.fallback_of(prior_train.logistic_candidate(*_candidate_sets()))
        assert candidate is not None  # logistic_candidate records its settings
    return compare(args, main, candidate)


def compare(dirs: list[str], main: prior.Fallback, candidate: prior.Fallback) -> int:
    """Each set classified with two fallbacks: right, benign precision, benign alarms, and every changed answer."""
    totals = {"main": [0, 0, 0, 0], "candidate": [0, 0, 0, 0]}
    for d in dirs:
        got: dict[str, list[str]] = {"main": [], "candidate": []}
        samples = corpus.load(Path(d))
        for smp in samples:
            text = read_text(smp.path)
            for k, fb in (("main", main), ("candidate", candidate)):
                got[k].append(corpus.predicted(classify_text(text, str(smp.path), word_prior=fb)))
        print(d)
        for k in ("main", "candidate"):
            right = sum(p == smp.expected for p, smp in zip(got[k], samples, strict=True))
            said_benign = sum(p == "benign" for p in got[k])
            benign_right = sum(p == "benign" == smp.expected for p, smp in zip(got[k], samples, strict=True))
            alarms = sum(p not in ("benign", "unknown") and smp.expected == "benign"
                         for p, smp in zip(got[k], samples, strict=True))
            for j, v in enumerate((right, said_benign, benign_right, len(samples))):
                totals[k][j] += v
            print(f"  {k:9} {right}/{len(samples)}; benign precision {benign_right}/{said_benign}; "
                  f"benign alarms {alarms}")
        for a, b, smp in zip(got["main"], got["candidate"], samples, strict=True):
            if a != b:
                print(f"    {smp.expected}: {a} → {b}: {smp.path.name}")
    for k, (right, said_benign, benign_right, n) in totals.items():
        print(f"all {k:9} {right}/{n} = {right / n:.3f}; benign precision {benign_right}/{said_benign}")
    return 0


def main(argv: list[str]) -> int:
    cmd = argv[0] if argv else "check"
    if cmd == "cv":
        _cv(_dirs(argv[1:]))
        return 0
    if cmd == "train":
        if argv[1:]:
            print("train takes no directories: the packaged model is trained on prior_train.TRAINING_DIRS",
                  file=sys.stderr)
            return 2
        try:
            commit = _git("rev-parse", "HEAD")
        except (OSError, subprocess.CalledProcessError):
            commit = None
        built = prior_train.build_fresh(ROOT, commit=commit, adopted=prior.ADOPTED)
        prior.MODEL_PATH.write_text(json.dumps(built.to_json(), separators=(",", ":"), sort_keys=True) + "\n",
                                    encoding="utf-8")
        print(f"wrote {prior.MODEL_PATH.relative_to(ROOT)}: {built.meta['tokens']} tokens, "
              f"{built.meta['samples']} samples, settings {built.meta['settings']}, reader {built.meta['reader']}")
        return 0
    if cmd in ("eval", "reader-eval"):
        return _evaluate(argv[1:], prior.READER_MEASURED if cmd == "reader-eval" else None)
    if cmd == "loso":
        sets = prior_train.loso_sets(ROOT)
        res = prior_train.leave_one_set_out(sets)
        print("| held-out set | without the prior | before: the plain prior | after: with the reader | reader "
              "answers | class mode; reader settings (chosen on the other sets) |")
        print("|---|---|---|---|---|---|")
        print("\n".join(loso_table(res)))
        for d, v in res.items():
            print(f"{d}: class accuracy of reported failures {v['class_accuracy']}")
            for rel, exp, before, after in v["changed"]:
                print(f"    {exp}: {before} → {after}: {rel}")
        fin = prior_train.final_reader(sets, prior.default_settings() or prior.Settings(1.85, 3))
        print(f"every set pooled (out of set): without {_fmt(fin['without'])}\n  plain prior {_fmt(fin['plain'])}\n"
              f"  with the reader {_fmt(fin['with'])}\n  chosen: {fin['reader']}")
        return 0
    if cmd == "over-benign-eval":
        return over_benign_eval(argv[1:])
    if cmd == "logistic-eval":
        return logistic_eval(argv[1:])
    if cmd == "logistic-candidate":
        return logistic_candidate(argv[1:])
    if cmd == "logistic-loso":
        return logistic_loso()
    if cmd == "fresh-readings":
        return fresh_readings()
    if cmd == "fresh-loso":
        return fresh_loso()
    if cmd == "fresh-eval":
        return fresh_eval(argv[1:])
    if cmd == "more-data":
        return more_data()
    if cmd == "check":
        packaged = prior.default_model()
        want = prior_train.training_sha256(prior_train.training_set(prior_train.training_roots(ROOT)))
        have = packaged.meta.get("corpus_sha256") if packaged else None
        if have != want or packaged is None or packaged.meta.get("corpus") != list(prior_train.TRAINING_DIRS):
            print(f"catalog/prior.json is stale (corpus {want[:12]}, model {str(have)[:12]}): run train",
                  file=sys.stderr)
            return 1
        print("catalog/prior.json is current")
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
