"""Runs every registered parser over a file and classifies it by its most severe finding.

The registry is the plugin point: ``register("mine", fn)`` adds a parser taking ``(text, name)`` and
returning a Finding, a list of Findings, or None. The built-in ones are the signature catalogue (data:
catalog/signatures/*.yaml, Xid lines through catalog/xid.yaml) and the readers of structured formats that
need code (nvidia-smi, DCGM, py-spy, stats lines, NCCL watchdog ranks, kubectl, vLLM start-up, sampled model
outputs). Classification never raises: a parser that fails is skipped and named in the finding's facts.

When nothing known is found but the text has error lines (a traceback, ERROR/FATAL lines), the file is
``kind: unknown`` and not benign: something failed, in a format the catalogue does not know; no incident
is guessed. When nothing at all is found in a document (not a stream), the word-level prior (prior.py) may answer
a failure class at a low confidence: on by default since round 3o, ``word_prior=False`` turns it off.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from llm_oncall.evidence import (
    catalog,
    crashloop,
    dcgm_fields,
    dcgm_health,
    described,
    gauges,
    matcher,
    nccl,
    nvidia_smi,
    outputs,
    paste,
    prior,
    pyspy,
    stats,
    vllm_startup,
)
from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines, strength, unknown

Parser = Callable[[str, str], "Finding | Sequence[Finding] | None"]

# Head + tail of a huge file: the head says what produced it (nvidia-smi banner, first traceback), the
# tail holds the latest, usually decisive, lines.
MAX_READ_BYTES = 20 * 1024 * 1024
HEAD_BYTES = 2 * 1024 * 1024

_REGISTRY: dict[str, Parser] = {}


def register(name: str, parser: Parser) -> None:
    """Add or replace a parser; later registrations with the same name win."""
    _REGISTRY[name] = parser


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def parsers() -> dict[str, Parser]:
    return dict(_REGISTRY)


def _signatures(text: str, name: str) -> list[Finding]:
    return matcher.findings(text, name)


for _name, _fn in (
    ("signatures", _signatures),
    ("nccl", nccl.parse),
    ("pyspy", pyspy.parse),
    ("nvidia_smi", nvidia_smi.parse),
    ("dcgm_health", dcgm_health.parse),
    ("dcgm_nvlink", dcgm_health.parse_nvlink_status),
    ("dcgm_fields", dcgm_fields.parse),
    ("stats", stats.parse),
    ("gauges", gauges.parse),
    ("vllm_startup", vllm_startup.parse),
    ("crashloop", crashloop.parse),
    ("outputs", outputs.parse),
):
    register(_name, _fn)


def use_signatures(extra_dirs: Sequence[Path]) -> None:
    """Classify with the built-in signatures plus the user's (same id wins); raises CatalogError."""
    sigs = catalog.load(extra_dirs)

    def with_user_signatures(text: str, name: str) -> list[Finding]:
        return matcher.findings(text, name, sigs)

    register("signatures", with_user_signatures)


def reset_signatures() -> None:
    register("signatures", _signatures)


# Lines that say something failed, whatever wrote them. Strong: a Python exception line (also after a log
# prefix or vLLM's process prefix "(EngineCore_DP0 pid=402) "), a traceback header, FATAL/CRITICAL, a crash of the
# process, Go's logrus "FATA[0000]" / logfmt "level=fatal" (the process exits). Weak: an ERROR log level (also glog
# "E1022 ..." and c10d "[E ...]"), which many programs print for routine trouble (a client that went away); logfmt's
# "level=error" is not even that (containerd prints it for every closed pipe).
_STRONG_ERROR = re.compile(
    r"(?:^|\]\s|:\s|\bpid=\d{1,9}\)\s)\s{0,8}(?:[A-Za-z_][\w.]{0,80}\.)?[A-Z]\w{0,60}(?:Error|Exception)"
    r"(?::\s|\s*$)"
    r"|Traceback \(most recent call last\)"
    r"|(?:^|[\s\[(|])(?:FATAL|CRITICAL)(?:[\s\]:|)]|$)|^\s{0,8}FATA\[\d{1,8}\]|\blevel=(?:fatal|panic)\b"
    r"|Segmentation fault|core dumped|terminate called after throwing|(?:^|\s)panic: |Fatal Python error"
)
# A sentence that says the crash marker did not appear ("killed without an OOM or core dumped message") reports none:
# the negated marker is read out of the line before the error test. The negation governs the marker only within its
# own clause: in "could not allocate 4096 bytes; Segmentation fault (core dumped)" the crash happened.
_NEGATED_CRASH = re.compile(
    r"(?i)\b(?:without|no|not|never|nor)\b[^.;:,()\n]{0,40}?(?:core dumped|segmentation fault)")
_WEAK_ERROR = re.compile(r"(?:^|[\s\[(|])ERROR(?:[\s\]:|)]|$)|^\s{0,4}\[?[EF]\d{4} \d\d:\d\d:\d\d|\]:\[E[\s\d]")
MAX_ERROR_LINES = 20
# Every error line holds one of these: a cheap test before the regexes.
_ERROR_HINTS = ("Error", "Exception", "ERROR", "FATAL", "CRITICAL", "Traceback", "fault", "dumped", "terminate",
                "panic", "[E", "E0", "E1", "F0", "F1", "Fatal", "FATA[", "level=")


def _unknown_errors(text: str, name: str, found: Sequence[Finding]) -> Finding | None:
    """Error lines no finding explains. With a benign reading of the file, only strong ones count: an ERROR
    level next to a recognised healthy format is routine; a traceback is not."""
    covered = {n for f in found for n in f.lines}
    strong_only = bool(found)
    rows = []
    for i, line in enumerate(split_lines(text)):
        if (i + 1) in covered or not any(h in line for h in _ERROR_HINTS):
            continue
        strong = _STRONG_ERROR.search(_NEGATED_CRASH.sub(" ", line))
        if strong or (not strong_only and _WEAK_ERROR.search(line)):
            rows.append(i)
            if len(rows) >= 200:
                break
    if not rows:
        return None
    lines = split_lines(text)
    quoted = [lines[i].strip()[:200] for i in rows[:3]]
    facts = compact({
        "error_lines": len(rows),
        "first_errors": quoted,
        "reading": "error lines in a format the catalogue does not know: something failed, nothing here points "
                   "at an incident",
        "next_step": "read the first error; if it is a new real format, add a signature (docs/evidence.md)",
    })
    return Finding(name, "unknown", False, None, 0.2, facts, line_numbers(rows[:MAX_ERROR_LINES]), "unknown",
                   severity="warning", category="unknown")


# the catalogue's readings of an error's name; a sentence of a fix or a feature names them without an event
# the vLLM start-up parser's failure too: a fix PR's problem section quotes "Engine core initialization failed"
_MENTION_PARSERS = frozenset({"signatures", "xid", "vllm_startup"})
# a bad output told in prose (the catalogue's bad_output_reported) is demoted like any mention; the outputs
# parser's readings of a shown output are not among _MENTION_PARSERS
_NOT_DEMOTED = frozenset({"benign", "unknown"})


def _mentions_demoted(text: str, name: str, found: list[Finding]) -> list[Finding]:
    """The catalogue's findings whose every line is prose that names the error in a change document (a PR, a
    commit, a feature request) or in a sentence describing a behaviour ("when an X error is detected, ...")
    become one benign finding: the error is named, not reported (described.py)."""
    named = [f for f in found if not f.benign and f.parser in _MENTION_PARSERS and f.category not in _NOT_DEMOTED
             and described.mentioned_only(text, f.lines)]
    if not named:
        return found
    rows = sorted({n - 1 for f in named for n in f.lines})
    facts = compact({
        "named": sorted({f.kind for f in named}),
        "change_document": described.is_change_document(text) or None,
        "reading": "the error is named in prose that describes a fix, a feature or a behaviour, not reported "
                   "as an event",
    })
    mention = Finding(name, "error_named_in_prose", True, None, 0.5, facts, line_numbers(rows[:MAX_ERROR_LINES]),
                      "described", severity="info", category="benign")
    gone = {id(f) for f in named}
    return [f for f in found if id(f) not in gone] + [mention]


def _quoted_in_change_or_guide(text: str, u: Finding) -> Finding:
    """Error lines in a change document (a fix PR pasting the traceback it fixes, a commit quoting the error it
    handles) that no signature reads are the bug the change is about, not a failure on someone's node; in a how-to
    or reference page (an FAQ's "Error message / Cause / Solution") they are the errors it explains (round 3zn).
    Either way the unknown reading becomes benign. A catalogued failure in the same paste keeps its finding
    (described.py)."""
    if described.is_change_document(text):
        kind, mark, what = "error_quoted_in_change", "change_document", "a change document (the bug a fix is about)"
    elif described.is_guide(text):
        kind, mark, what = "error_quoted_in_guide", "guide", "a how-to or reference page (the errors it explains)"
    else:
        return u
    facts = compact({
        **{k: v for k, v in u.facts.items() if k in ("error_lines", "first_errors")},
        mark: True,
        "reading": f"error lines quoted in {what}, not reported as an event",
    })
    return u.replace(kind=kind, benign=True, confidence=0.3, facts=facts, parser="described",
                     severity="info", category="benign")


def classify_all(text: str, name: str, stream: bool = False,
                 word_prior: prior.Fallback | bool | None = None) -> list[Finding]:
    """Every parser's findings for ``text``, most severe first.

    ``stream``: the text is a process's own output as the runtime hands it over (a container's log tail), never a
    document someone wrote, so the document-level readings (a change document, a how-to, a resolved thread, a
    sentence describing a behaviour) do not apply; they are the costliest part of a live round's classification.
    The word-level prior never reads a stream either.

    ``word_prior``: the fallback where nothing at all was found (``prior.resolve``): None for the default (the
    packaged model, as adopted), False for none, True for the packaged one, or a ``prior.Fallback``.
    """
    fallback = prior.resolve(word_prior, stream)
    text_in = text
    found: list[Finding] = []
    failed: list[str] = []
    # every parser reads the paste reader's cleaned text (same line count, so line numbers are the paste's)
    try:
        text = paste.read(text).clean
        quoted = outputs.parse_quoted(text_in, name)
    except Exception:
        quoted = None
        failed.append("paste")
    for pname, fn in list(_REGISTRY.items()):
        try:
            result = fn(text, name)
        except Exception:  # a parser bug must not hide what the other parsers found
            failed.append(pname)
            continue
        items = [result] if isinstance(result, Finding) else list(result or ())
        for f in items:
            if isinstance(f, Finding):
                found.append(f if f.parser else f.replace(parser=pname))
    if quoted is not None and not any(f.category == "bad-output" for f in found):
        found.append(quoted)
    if not found and not described.has_diff(text_in):  # a diff is code under change, not a model's output
        try:
            g = outputs.parse_plain(text, name)
        except Exception:
            g = None
            failed.append("outputs")
        if g is not None:
            found.append(g)
    if not stream:
        found = _mentions_demoted(text_in, name, found)
    if not any(not f.benign for f in found):
        u = _unknown_errors(text, name, found)
        if u is not None:
            found.append(u if stream else _quoted_in_change_or_guide(text_in, u))
    # nothing recognised at all: the word-level prior may say a class; only benign lines: the reader may hear a report
    if fallback is not None and (not found or (fallback.reads_over_benign() and all(f.benign for f in found))):
        p = fallback.answer(text_in, name, plain=not found)
        if p is not None:
            found.append(p)
    found.sort(key=strength, reverse=True)
    if failed and found:
        found[0] = found[0].replace(facts={**found[0].facts, "parser_errors": failed})
    elif failed:
        found.append(unknown(name).replace(facts={"parser_errors": failed}))
    return found


def classify_text(text: str, name: str, stream: bool = False,
                  word_prior: prior.Fallback | bool | None = None) -> Finding:
    """The file's most severe finding, with every finding of the file in ``findings``.

    Kind "unknown" (benign, no hint, confidence 0) when nothing matched at all. ``stream``, ``word_prior``: see
    classify_all.
    """
    try:
        found = classify_all(text, name, stream, word_prior)
    except Exception:  # last line of defence: classification is called on arbitrary user files
        return unknown(name)
    if not found:
        return unknown(name)
    best = found[0]
    others = [f.kind for f in found[1:] if f.kind != best.kind]
    facts = {**best.facts, "also": others} if others else dict(best.facts)
    return best.replace(facts=facts, findings=tuple(found))


def read_text(path: str | os.PathLike[str]) -> str:
    """Decoded file contents, at most MAX_READ_BYTES (head + tail); undecodable bytes become U+FFFD."""
    p = Path(path)
    size = p.stat().st_size
    with p.open("rb") as fh:
        if size <= MAX_READ_BYTES:
            data = fh.read()
        else:
            head = fh.read(HEAD_BYTES)
            fh.seek(size - (MAX_READ_BYTES - HEAD_BYTES))
            tail = fh.read()
            data = head + b"\n" + tail
    return data.decode("utf-8", errors="replace")


def classify_file(path: str | os.PathLike[str], word_prior: prior.Fallback | bool | None = None) -> Finding:
    """Classify one file (a document: ``word_prior`` as in classify_all). Raises FileNotFoundError /
    IsADirectoryError / PermissionError for unreadable paths (the CLI turns those into a clean error); never raises
    on content."""
    text = read_text(path)
    return classify_text(text, str(path), word_prior=word_prior)
