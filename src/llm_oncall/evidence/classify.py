"""Runs every registered parser over a file and keeps the strongest finding.

The registry is the plugin point: ``register("mine", fn)`` adds a parser taking ``(text, name)`` and
returning a Finding or None. Classification never raises: a parser that fails is skipped and named in
the finding's facts.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from llm_oncall.evidence import crashloop, dcgm_health, nccl, nvidia_smi, pyspy, vllm_log, vllm_startup, xid
from llm_oncall.evidence.model import Finding, strength, unknown

Parser = Callable[[str, str], "Finding | None"]

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


for _name, _fn in (
    ("nccl", nccl.parse),
    ("pyspy", pyspy.parse),
    ("nvidia_smi", nvidia_smi.parse),
    ("xid", xid.parse),
    ("dcgm_health", dcgm_health.parse),
    ("vllm_log", vllm_log.parse),
    ("vllm_startup", vllm_startup.parse),
    ("crashloop", crashloop.parse),
):
    register(_name, _fn)


def classify_all(text: str, name: str) -> list[Finding]:
    """Every parser's finding for ``text``, strongest first."""
    found: list[Finding] = []
    failed: list[str] = []
    for pname, fn in list(_REGISTRY.items()):
        try:
            f = fn(text, name)
        except Exception:  # a parser bug must not hide what the other parsers found
            failed.append(pname)
            continue
        if isinstance(f, Finding):
            found.append(f if f.parser else _with_parser(f, pname))
    found.sort(key=strength, reverse=True)
    if failed and found:
        found[0] = _with_facts(found[0], {"parser_errors": failed})
    elif failed:
        found.append(_with_facts(unknown(name), {"parser_errors": failed}))
    return found


def classify_text(text: str, name: str) -> Finding:
    """The strongest finding for ``text``.

    Kind "unknown" (benign, no hint, confidence 0) when nothing matched.
    """
    try:
        found = classify_all(text, name)
    except Exception:  # last line of defence: classification is called on arbitrary user files
        return unknown(name)
    if not found:
        return unknown(name)
    best = found[0]
    others = [f"{f.kind}" for f in found[1:] if f.kind != best.kind]
    return _with_facts(best, {"also": others}) if others else best


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


def classify_file(path: str | os.PathLike[str]) -> Finding:
    """Classify one file. Raises FileNotFoundError/IsADirectoryError/PermissionError for unreadable paths
    (the CLI turns those into a clean error); never raises on content."""
    text = read_text(path)
    return classify_text(text, str(path))


def _with_parser(f: Finding, parser: str) -> Finding:
    return Finding(f.file, f.kind, f.benign, f.incident_hint, f.confidence, dict(f.facts), f.lines, parser)


def _with_facts(f: Finding, extra: dict[str, object]) -> Finding:
    return Finding(f.file, f.kind, f.benign, f.incident_hint, f.confidence, {**f.facts, **extra}, f.lines, f.parser)
