"""The line-signature catalogue: YAML files validated by a schema, like the runbooks.

A signature says what one log line means: a regex (with literal ``needles`` that must occur in the line, so
a file is scanned cheaply), the finding it produces (kind, category, incident hint, severity, confidence),
the facts to extract (named groups, ``numbers`` converted), benign look-alikes (``benign_if``: a line that
also matches one of these is not this signature), context (``requires``/``unless``: another signature's
line within N lines) and what it explains (``explains``: a finding of another kind near it is a consequence,
not the cause). Every signature carries ``examples`` that must (and must not) match: the test of a new
format is part of its data.

Built-in files: ``catalog/signatures/*.yaml``. A user adds or overrides signatures (same ``id`` wins) with
more files: ``load(extra_dirs)``, ``llm-oncall evidence classify --signatures DIR`` and
``llm-oncall evidence signatures check DIR``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from llm_oncall.evidence.model import CATEGORIES, INCIDENT_IDS, SEVERITIES

BUILTIN_DIR = Path(__file__).parent / "catalog" / "signatures"

HINT_OF_CATEGORY: dict[str, str | None] = {
    "gpu-memory": "gpu-ecc",
    "gpu-hardware": "gpu-ecc",
    "nvlink": "engine-hang",
    "hang": "engine-hang",
    "cuda-graph": "cuda-graph-crash",
    "kv-pressure": "kv-capacity",
    "bad-output": "bad-model-rollout",
    "other-failure": None,
    "benign": None,
    "unknown": None,
}


class CatalogError(ValueError):
    """A signature file that does not load or validate; the message names the file and the signature."""


class Near(BaseModel):
    """Another signature's line near this one: ``where`` before/after/around, at most ``within`` lines away."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    any_of: list[str] = Field(min_length=1)
    within: int = Field(default=40, ge=0, le=5000)
    where: Literal["before", "after", "around"] = "around"
    unless_between: list[str] = Field(default_factory=list)
    """With ``where: before``: a line of these between the context line and this one cancels the context
    (a capture error after "Graph capturing finished" is no capture error)."""


class Explains(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kinds: list[str] = Field(min_length=1)
    within: int = Field(default=40, ge=0, le=5000)


class Examples(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    match: list[str] = Field(min_length=1)
    no_match: list[str] = Field(default_factory=list)


class Signature(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,80}$")
    role: Literal["finding", "context"] = "finding"
    kind: str = Field(default="", pattern=r"^[a-z0-9_]{0,80}$")
    category: Literal[CATEGORIES] = "other-failure"  # type: ignore[valid-type]
    incident_hint: str | None = None
    severity: Literal[SEVERITIES] = "error"  # type: ignore[valid-type]
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    repeat_bonus: float = Field(default=0.0, ge=0.0, le=0.5)
    """Added to the confidence per extra matching line (a warning every 60 s for ten minutes is surer)."""
    max_confidence: float = Field(default=0.95, ge=0.0, le=1.0)
    min_count: int = Field(default=1, ge=1, le=1000)
    needles: list[str] = Field(min_length=1)
    pattern: str = Field(min_length=1)
    ignore_case: bool = False
    benign_if: list[str] = Field(default_factory=list)
    requires: list[Near] = Field(default_factory=list)
    """Every one must hold: another signature's line near this one (context)."""
    unless: list[Near] = Field(default_factory=list)
    """Any one cancels the match (a look-alike told apart by its neighbours)."""
    explains: Explains | None = None
    xid_group: str | None = None
    """Named group holding an Xid code: the Xid catalogue decides kind, category, hint and severity."""
    xid_code: int | None = None
    """A fixed Xid code for prose that names no number (\"GPU has fallen off the bus\")."""
    numbers: list[str] = Field(default_factory=list)
    facts: dict[str, Any] = Field(default_factory=dict)
    reading: str = ""
    fix: str = ""
    source: str = Field(min_length=1)
    examples: Examples

    @field_validator("incident_hint")
    @classmethod
    def _known_hint(cls, v: str | None) -> str | None:
        if v is not None and v not in INCIDENT_IDS:
            raise ValueError(f"unknown incident id {v!r}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Signature:
        try:
            rx = re.compile(self.pattern, re.IGNORECASE if self.ignore_case else 0)
        except re.error as exc:
            raise ValueError(f"pattern does not compile: {exc}") from exc
        for p in self.benign_if:
            try:
                re.compile(p, re.IGNORECASE if self.ignore_case else 0)
            except re.error as exc:
                raise ValueError(f"benign_if {p!r} does not compile: {exc}") from exc
        groups = set(rx.groupindex)
        for g in [*self.numbers, *([self.xid_group] if self.xid_group else [])]:
            if g not in groups:
                raise ValueError(f"group {g!r} is not a named group of the pattern")
        if self.role == "finding":
            if not self.kind and self.xid_group is None and self.xid_code is None:
                raise ValueError("a finding signature needs a kind (or an Xid)")
            expected = HINT_OF_CATEGORY[self.category]
            if self.incident_hint != expected and self.xid_group is None and self.xid_code is None:
                raise ValueError(f"category {self.category} goes with incident_hint {expected!r}, "
                                 f"not {self.incident_hint!r}")
            if self.benign and self.severity != "info":
                raise ValueError("a benign signature has severity info")
        return self


    @property
    def benign(self) -> bool:
        return bool(self.category == "benign")


class SignatureFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    signatures: list[Signature] = Field(default_factory=list)


@dataclass(frozen=True)
class Compiled:
    """A signature ready to run: compiled regexes, lower-cased needles when matching ignores case."""

    sig: Signature
    rx: re.Pattern[str]
    needles: tuple[str, ...]
    benign_if: tuple[re.Pattern[str], ...]

    @property
    def id(self) -> str:
        return self.sig.id

    def has_needle(self, line: str, lower: str | None = None) -> bool:
        probe = (line.lower() if lower is None else lower) if self.sig.ignore_case else line
        return any(n in probe for n in self.needles)

    def match(self, line: str, lower: str | None = None) -> re.Match[str] | None:
        """The match on ``line`` (``lower``: the line lower-cased, when the caller has it)."""
        if not self.has_needle(line, lower):
            return None
        m = self.rx.search(line)
        if m is None or any(b.search(line) for b in self.benign_if):
            return None
        return m


def compile_signature(sig: Signature) -> Compiled:
    flags = re.IGNORECASE if sig.ignore_case else 0
    needles = tuple(n.lower() for n in sig.needles) if sig.ignore_case else tuple(sig.needles)
    return Compiled(sig, re.compile(sig.pattern, flags), needles, tuple(re.compile(p, flags) for p in sig.benign_if))


def read_file(path: Path) -> list[Signature]:
    try:
        with path.open(encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
        return list(SignatureFile.model_validate(doc or {}).signatures)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise CatalogError(f"{path}: cannot read: {exc}") from exc
    except ValidationError as exc:
        raise CatalogError(f"{path}: {_describe(exc, doc)}") from exc


def _describe(exc: ValidationError, doc: object) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = list(err.get("loc", ()))
        where = ".".join(str(x) for x in loc)
        if len(loc) >= 2 and loc[0] == "signatures" and isinstance(loc[1], int) and isinstance(doc, dict):
            sigs = doc.get("signatures")
            if isinstance(sigs, list) and loc[1] < len(sigs) and isinstance(sigs[loc[1]], dict):
                rest = ".".join(str(x) for x in loc[2:])
                where = f"signature {sigs[loc[1]].get('id', loc[1])!r}" + (f" {rest}" if rest else "")
        parts.append(f"{where}: {str(err.get('msg')).removeprefix('Value error, ')}")
    return "; ".join(parts)


def files_in(directory: Path) -> list[Path]:
    if directory.is_file():
        return [directory]
    return sorted(p for p in directory.glob("*.yaml") if p.is_file()) + sorted(
        p for p in directory.glob("*.yml") if p.is_file())


def load(extra_dirs: Iterable[Path] = ()) -> tuple[Compiled, ...]:
    """Built-in signatures, then each extra directory's; a later signature with the same id replaces the
    earlier one. Raises CatalogError naming the file on any invalid signature or unknown reference."""
    by_id: dict[str, tuple[Signature, Path]] = {}
    for directory in (BUILTIN_DIR, *extra_dirs):
        for path in files_in(Path(directory)):
            for sig in read_file(path):
                by_id[sig.id] = (sig, path)
    _check_references(by_id)
    return tuple(compile_signature(s) for s, _ in by_id.values())


@cache
def builtin() -> tuple[Compiled, ...]:
    return load()


def _check_references(by_id: dict[str, tuple[Signature, Path]]) -> None:
    for s, path in by_id.values():
        for near in (*s.requires, *s.unless):
            missing = [r for r in [*near.any_of, *near.unless_between] if r not in by_id]
            if missing:
                raise CatalogError(f"{path}: signature {s.id!r} refers to unknown signature(s) {missing}")


def check(sigs: Sequence[Compiled]) -> list[str]:
    """Problems with the signatures' own examples (empty when every example behaves): the test a new
    signature brings with it. A ``match`` example must contain a needle and match; a ``no_match`` must not."""
    problems: list[str] = []
    for c in sigs:
        for ex in c.sig.examples.match:
            probe = ex.lower() if c.sig.ignore_case else ex
            if not any(n in probe for n in c.needles):
                problems.append(f"{c.id}: no needle in match example {ex[:80]!r}")
            elif c.match(ex) is None:
                problems.append(f"{c.id}: match example does not match: {ex[:80]!r}")
        for ex in c.sig.examples.no_match:
            if c.match(ex) is not None:
                problems.append(f"{c.id}: no_match example matches: {ex[:80]!r}")
    return problems
