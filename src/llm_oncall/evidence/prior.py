"""A word-level prior: a naive Bayes over words and word pairs, the fallback for a file the catalogue recognises
nothing in.

The catalogue reads messages it knows; a failure told in prose or in a format no signature knows is answered
``unknown`` at confidence 0 (benign). This module is a statistical reading of the same text: which words the
gated corpus' samples of each class use. It never reads a file something else recognised (classify.py calls it
only when no parser found anything) and answers at a low confidence, below the signatures'.

Knowledge as data: the model is ``catalog/prior.json``, written by ``scripts/prior.py train`` from the gated
corpus (``tests/evidence/real``), with the corpus hash, sample counts and date; ``tests/evidence/test_prior.py``
checks it is current. The model keeps, for the tokens that tell the classes apart best, each class' log
probability (binarised multinomial naive Bayes, Laplace smoothing).

Tokens: lower-cased words of two letters or more (numbers, hex, paths and URLs dropped: ``Xid 79`` gives
``xid``; ``RaySystemError`` gives ``ray system error``), the pairs of adjacent words on a line (``cuda graph``),
and character pairs of CJK text. A document is the set of its tokens.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from llm_oncall.evidence import reported
from llm_oncall.evidence.catalog import HINT_OF_CATEGORY
from llm_oncall.evidence.model import CJK_RUN, Finding, compact, line_numbers

MODEL_PATH = Path(__file__).parent / "catalog" / "prior.json"
MAX_LINES = 5000  # a file longer than this is read as its first 5000 lines: the fallback stays cheap
MAX_LINE_CHARS = 2000
BENIGN = "benign"

_DROP = re.compile(
    r"https?://\S+"  # URLs
    r"|(?:[A-Za-z]:)?(?:[\\/][\w.\-@+]+){2,}[\\/]?"  # paths (two components or more)
    r"|\b0x[0-9a-fA-F]+\b"  # hex
    r"|\b[0-9a-fA-F]{8,}\b"  # hashes, ids
)
_WORD = re.compile(r"[A-Za-z]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+")
_STOPWORDS_TEXT = (
    "the a an and or of to in on at for is are was were be been it its this that with as by from we i you he she "
    "they them our my me your if then so but not no do does did have has had can could will would should may "
    "there here which what when where who how all any some into out up about than also just only"
)
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def line_tokens(line: str) -> list[str]:
    """The tokens of one line, in order, with repeats: words, adjacent word pairs, CJK character pairs."""
    line = _DROP.sub(" ", line[:MAX_LINE_CHARS])
    words: list[str] = []
    for m in _WORD.finditer(line):
        for part in _CAMEL.findall(m.group(0)):
            w = part.lower()
            if len(w) >= 2:
                words.append(w)
    out = [w for w in words if w not in STOPWORDS]
    out += [f"{a} {b}" for a, b in itertools.pairwise(words)
            if not (a in STOPWORDS and b in STOPWORDS)]
    for run in CJK_RUN.findall(line):
        out += [run] if len(run) == 1 else [run[i:i + 2] for i in range(len(run) - 1)]
    return out


def doc_tokens(text: str) -> set[str]:
    """The set of a document's tokens (its first MAX_LINES lines)."""
    out: set[str] = set()
    for i, line in enumerate(text.splitlines()):
        if i >= MAX_LINES:
            break
        out.update(line_tokens(line))
    return out


NAIVE_BAYES = "naive-bayes"
# Round 3zb's candidate (docs/evidence.md): a multinomial logistic regression over the same token sets, trained by
# prior_train.train_logistic. ``log_prior`` holds its biases and ``log_prob`` its weights; a document's score for a
# class is the bias plus the sum of its known tokens' weights over the square root of their number.
LOGISTIC = "logistic"
KINDS = (NAIVE_BAYES, LOGISTIC)


@dataclass(frozen=True)
class Model:
    classes: tuple[str, ...]
    log_prior: tuple[float, ...]
    log_prob: dict[str, tuple[float, ...]]  # token -> log P(token | class), in the order of ``classes``
    meta: dict[str, Any]
    kind: str = NAIVE_BAYES

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"meta": self.meta, "classes": list(self.classes)}
        if self.kind != NAIVE_BAYES:  # a naive Bayes file stays as it was written before there were two kinds
            doc["kind"] = self.kind
        return doc | {"log_prior": [round(x, 4) for x in self.log_prior],
                      "tokens": {t: [round(x, 3) for x in v] for t, v in sorted(self.log_prob.items())}}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Model:
        classes = tuple(str(c) for c in doc["classes"])
        if BENIGN not in classes:
            raise ValueError("a prior model needs the benign class")
        kind = str(doc.get("kind", NAIVE_BAYES))
        if kind not in KINDS:
            raise ValueError(f"unknown prior model kind {kind!r}")
        n = len(classes)
        tokens = {str(t): tuple(float(x) for x in v) for t, v in doc["tokens"].items()}
        if any(len(v) != n for v in tokens.values()) or len(doc["log_prior"]) != n:
            raise ValueError("a prior model's rows must have one value per class")
        return cls(classes, tuple(float(x) for x in doc["log_prior"]), tokens, dict(doc.get("meta", {})), kind)


def train(docs: Sequence[tuple[str, str]], top_k: int = 300, min_df: int = 2, alpha: float = 1.0,
          meta: dict[str, Any] | None = None, tokenize: Callable[[str], Set[str]] = doc_tokens) -> Model:
    """A binarised multinomial naive Bayes from ``(text, class)`` pairs. Tokens in fewer than ``min_df``
    documents are dropped (one sample's wording teaches nothing general); of the rest, each class keeps the
    ``top_k`` tokens most typical of it against the other classes (log-probability ratio, ties by token), and
    the model keeps the union. Deterministic: the same documents give the same model. ``tokenize``: doc_tokens, or
    a cached equivalent when one corpus is trained on many times (prior_train's leave-one-set-out)."""
    classes = tuple(sorted({c for _, c in docs}))
    if BENIGN not in classes:
        raise ValueError("training needs benign documents")
    df: dict[str, Counter[str]] = {c: Counter() for c in classes}
    ndocs: Counter[str] = Counter()
    for text, c in docs:
        df[c].update(tokenize(text))
        ndocs[c] += 1
    total: Counter[str] = Counter()
    for c in classes:
        total.update(df[c])
    vocab = sorted(t for t, n in total.items() if n >= min_df)

    def log_probs(counts: Counter[str]) -> dict[str, float]:
        denom = sum(counts[t] for t in vocab) + alpha * len(vocab)
        return {t: math.log((counts[t] + alpha) / denom) for t in vocab}

    lp = {c: log_probs(df[c]) for c in classes}
    keep: set[str] = set()
    for c in classes:
        rest: Counter[str] = Counter()
        for o in classes:
            if o != c:
                rest.update(df[o])
        lrest = log_probs(rest)
        ranked = sorted(vocab, key=lambda t: (-(lp[c][t] - lrest[t]), t))
        keep.update(ranked[:top_k])
    n = sum(ndocs.values())
    log_prior = tuple(math.log(ndocs[c] / n) for c in classes)
    return Model(classes, log_prior, {t: tuple(lp[c][t] for c in classes) for t in sorted(keep)},
                 dict(meta or {}, samples=n, samples_per_class={c: ndocs[c] for c in classes}, top_k=top_k,
                      min_df=min_df, alpha=alpha, tokens=len(keep)))


@dataclass(frozen=True)
class Reading:
    """What the prior says about a document: the failure class whose words it shares most against benign."""

    cls: str  # the best failure class
    margin: float  # mean log-likelihood ratio of that class against benign over the document's known tokens
    tokens: int  # the document's tokens the model knows
    top_tokens: tuple[str, ...]  # the tokens that weigh most for ``cls`` against benign
    posterior: float  # P(cls | document) of the naive Bayes (overconfident on long texts: a tie-breaker only)
    ranking: tuple[str, ...] = ()  # the failure classes, best first


def read(model: Model, text: str) -> Reading | None:
    """The prior's reading of ``text``, or None when it knows none of its tokens. The margin: for naive Bayes, the
    best failure class' mean log-likelihood ratio against benign per known token; for the logistic model, the best
    failure class' probability less benign's (-1 … 1)."""
    toks = sorted(t for t in doc_tokens(text) if t in model.log_prob)
    if not toks:
        return None
    b = model.classes.index(BENIGN)
    sums = [0.0] * len(model.classes)
    for t in toks:
        row = model.log_prob[t]
        for i in range(len(sums)):
            sums[i] += row[i]
    fail = [i for i in range(len(model.classes)) if i != b]
    if model.kind == LOGISTIC:
        scores = [bias + s / math.sqrt(len(toks)) for bias, s in zip(model.log_prior, sums, strict=True)]
    else:
        scores = [p + s for p, s in zip(model.log_prior, sums, strict=True)]
    best = max(fail, key=lambda i: (scores[i], -i))
    top = max(scores)
    z = sum(math.exp(s - top) for s in scores)
    if model.kind == LOGISTIC:
        margin = (math.exp(scores[best] - top) - math.exp(scores[b] - top)) / z
    else:
        margin = (sums[best] - sums[b]) / len(toks)
    weights = sorted(((model.log_prob[t][best] - model.log_prob[t][b], t) for t in toks), key=lambda x: (-x[0], x[1]))
    ranking = tuple(model.classes[i] for i in sorted(fail, key=lambda i: (-scores[i], i)))
    return Reading(model.classes[best], margin, len(toks), tuple(t for w, t in weights[:8] if w > 0),
                   math.exp(scores[best] - top) / z, ranking)


def evidence_lines(model: Model, text: str, cls: str, limit: int = 5) -> list[int]:
    """0-based indices of the lines whose tokens weigh most for ``cls`` against benign (positive weight only),
    in line order."""
    c = model.classes.index(cls)
    b = model.classes.index(BENIGN)
    scored = []
    for i, line in enumerate(text.splitlines()):
        if i >= MAX_LINES:
            break
        w = sum(model.log_prob[t][c] - model.log_prob[t][b] for t in set(line_tokens(line)) if t in model.log_prob)
        if w > 0:
            scored.append((-w, i))
    return sorted(i for _, i in sorted(scored)[:limit])


@dataclass(frozen=True)
class Settings:
    """When the prior answers: its best failure class beats benign by at least ``min_margin`` (mean log ratio
    per known token) on a document with at least ``min_tokens`` known tokens. Chosen by cross-validation on the
    gated corpus (docs/evidence.md, "Round 3k")."""

    min_margin: float
    min_tokens: int
    confidence: float = 0.3


def decide(reading: Reading | None, settings: Settings) -> str | None:
    if reading is None or reading.tokens < settings.min_tokens or reading.margin < settings.min_margin:
        return None
    return reading.cls


@dataclass(frozen=True)
class ReaderSettings:
    """When a document the failure-report reader (reported.py) reads as a report takes the prior's best failure
    class: at least ``min_lines`` report lines and no mark of a text that only names failures, and the class' margin
    at least ``min_margin`` (lower than the plain prior's: whether a failure is reported is the reader's to say, the
    prior only says which). Chosen leave-one-set-out (docs/evidence.md, "Round 3r")."""

    min_lines: int
    min_margin: float
    # "prior": the prior's best failure class; "lexicon": the class the reader's cues name, else the prior's;
    # "cues": only a class the cues name (no cue, no answer)
    classes: str = "prior"
    headings: bool = True  # a bug template's report heading counts alone
    # The reader also answers a document whose only findings are benign (healthy lines pasted beside a person's report
    # that the run then hung: "it hangs after printing Init COMPLETE"): a benign line says the line is no failure, not
    # that the report is none. The plain prior never reads past a benign finding.
    over_benign: bool = False


def decide_with_reader(reading: Reading | None, report: reported.Report | None, settings: Settings,
                       reader: ReaderSettings | None, text: str = "", plain: bool = True) -> str | None:
    """The plain prior's answer (unless ``plain`` is False); failing that, with ``reader``, the class of a reported
    failure: the prior's best failure class, or (``classes="lexicon"``) the class the report's cues name, ties and no
    cue to the prior's ranking. With no reading at all (the prior knows none of the words), the class the cues name
    alone, never on a tie or in a document that asks a question."""
    answer = decide(reading, settings) if plain else None
    if answer is not None or reader is None or report is None:
        return answer
    if reading is None:
        # The prior knows none of the words (a short report in plain words): only the report's own cues can name it
        # (round 3zq). No margin holds a benign look-alike back here, so a document that asks anything stays
        # unanswered, and so do cues that tie.
        if reader.classes == "prior" or not report.reports(reader.min_lines, reader.headings):
            return None
        if any(reported.asks(line) for line in text.splitlines()):
            return None
        return reported.cue_class(text, report, ())
    if not report.reports(reader.min_lines, reader.headings) or reading.margin < reader.min_margin:
        return None
    if reader.classes == "prior":
        return reading.cls
    cue = reported.cue_class(text, report, reading.ranking)
    return cue if reader.classes == "cues" else (cue or reading.cls)


def corpus_hash(items: Iterable[tuple[str, str, bytes]]) -> str:
    """sha256 over the sorted (relative path, class, content) of the training samples."""
    h = hashlib.sha256()
    for rel, cls, data in sorted(items):
        h.update(rel.encode() + b"\0" + cls.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


@lru_cache(maxsize=1)
def default_model() -> Model | None:
    """The packaged model, or None when it is missing or unreadable (the fallback is then off)."""
    try:
        return Model.from_json(json.loads(MODEL_PATH.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def default_settings(model: Model | None = None) -> Settings | None:
    """The settings recorded in the model file (``meta.settings``), None when it records none."""
    m = model or default_model()
    s = (m.meta.get("settings") if m else None) or None
    if not isinstance(s, dict):
        return None
    return Settings(float(s["min_margin"]), int(s["min_tokens"]), float(s.get("confidence", 0.3)))


def default_reader(model: Model | None = None) -> ReaderSettings | None:
    """The failure-report reader's settings recorded in the model file (``meta.reader``; round 3w), None when it
    records none (the plain prior alone)."""
    m = model or default_model()
    r = (m.meta.get("reader") if m else None) or None
    if not isinstance(r, dict):
        return None
    return ReaderSettings(int(r["min_lines"]), float(r["min_margin"]), str(r.get("classes", "lexicon")),
                          bool(r.get("headings", True)), bool(r.get("over_benign", False)))


# Whether the fallback is on by default for documents (files, bundles, pastes): adopted in round 3o
# (docs/evidence.md, "Round 3o"; round 3k had not). The model file records it (``meta.adopted``).
ADOPTED = True


@dataclass(frozen=True)
class Fallback:
    """A model and the settings it answers with: what classify.py calls when nothing was recognised."""

    model: Model
    settings: Settings
    reader: ReaderSettings | None = None  # the failure-report reader beside the prior (round 3w: the model records it)

    def answer(self, text: str, name: str, plain: bool = True) -> Finding | None:
        """The prior's finding, or None; never raises (the fallback must never cost the file its reading).
        ``plain`` False: only the reader's answer (a document the catalogue found benign lines in)."""
        try:
            return finding(self.model, self.settings, text, name, self.reader, plain)
        except Exception:
            return None

    def reads_over_benign(self) -> bool:
        return self.reader is not None and self.reader.over_benign


@lru_cache(maxsize=1)
def packaged() -> Fallback | None:
    """The packaged model with the settings (and the reader's) it records, or None when there is none or they cannot
    be read (a damaged model file turns the fallback off; it must never cost a document its reading)."""
    m = default_model()
    return None if m is None else fallback_of(m)


def fallback_from(path: Path) -> Fallback | None:
    """The model in ``path`` with the settings (and the reader's) it records, or None when it cannot be read."""
    try:
        m = Model.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, KeyError, ValueError, TypeError):
        return None
    return fallback_of(m)


def fallback_of(m: Model) -> Fallback | None:
    """``m`` with the settings (and the reader's) it records, or None when it records none or they cannot be read."""
    try:
        s = default_settings(m)
        r = default_reader(m)
    except (KeyError, ValueError, TypeError):
        return None
    return Fallback(m, s, r) if s is not None else None


def resolve(use: Fallback | bool | None, stream: bool = False) -> Fallback | None:
    """The fallback a classification uses. ``use``: a Fallback (that one), True (the packaged one), False (none),
    None (the default: the packaged one when ADOPTED). Never for a stream: a container's log is a process's own
    output, not a paste, so its words say nothing about a report (docs/evidence.md, "How a file is classified")."""
    if stream or use is False:
        return None
    if isinstance(use, Fallback):
        return use
    return packaged() if (use or ADOPTED) else None


# The reader's settings round 3r chose on every labelled set's out-of-set readings (prior_train.final_reader) and
# measured on the 3p check set; not adopted (docs/evidence.md, "Round 3r"). Round 3w's, chosen in the fresh regime and
# adopted on the 3y check set, are the packaged model's (default_reader).
READER_MEASURED = ReaderSettings(min_lines=1, min_margin=1.25, classes="lexicon", headings=False)


def finding(model: Model, settings: Settings, text: str, name: str,
            reader: ReaderSettings | None = None, plain: bool = True) -> Finding | None:
    """The prior's finding for a text nothing recognised, or None when it is not clearly for a failure class. With
    ``reader``, a text the failure-report reader reads as a report takes a failure class at a lower margin
    (decide_with_reader): kind ``failure_reported``, its lines the report's. ``plain`` False: the reader's answer
    only."""
    r = read(model, text)
    cls = decide(r, settings) if plain else None
    if cls is None and reader is not None:
        report = reported.read(text)
        cls = decide_with_reader(r, report, settings, reader, text, plain)
        if cls is not None:
            return Finding(name, "failure_reported", False, HINT_OF_CATEGORY[cls], settings.confidence, compact({
                "prior_class": r.cls if r is not None else None,
                "class": cls,
                "margin": round(r.margin, 3) if r is not None else None,
                "report_lines": len(report.lines),
                "reading": "a failure told in prose: these lines report a malfunction in words the catalogue does "
                           f"not know; {cls} is the class their cues name or the word-level prior ranks first",
                "next_step": "read the lines; if they show a real failure in a new format, add a signature "
                             "(docs/evidence.md)",
            }), line_numbers(list(report.lines[:5])), "prior", severity="warning", category=cls)
    if r is None or cls is None:
        return None
    lines = evidence_lines(model, text, cls)
    facts = compact({
        "prior_class": cls,
        "margin": round(r.margin, 3),
        "known_tokens": r.tokens,
        "top_tokens": list(r.top_tokens),
        "model_corpus": str(model.meta.get("corpus_sha256", ""))[:12] or None,
        "reading": "a word-level prior, not a recognised message: nothing in the catalogue matched, and the "
                   f"words of these lines are those the corpus' {cls} samples use",
        "next_step": "read the lines; if they show a real failure in a new format, add a signature "
                     "(docs/evidence.md)",
    })
    return Finding(name, "word_prior", False, HINT_OF_CATEGORY[cls], settings.confidence, facts,
                   line_numbers(lines), "prior", severity="warning", category=cls)

