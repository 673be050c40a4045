"""Loading runbooks: the built-in set, then user directories that add or override by id.

The registry is the single plug-in point: diagnosis asks it for the runbooks in triage order.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from llm_oncall.runbooks.schema import Runbook

MAX_FILE_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return f"{where}: {self.message}"


class RunbookError(Exception):
    def __init__(self, problems: Sequence[Problem]) -> None:
        super().__init__("\n".join(str(p) for p in problems))
        self.problems = list(problems)


def _line_of(node: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
    """Walk a composed YAML tree along a pydantic error location to a 1-based line."""
    line = node.start_mark.line + 1 if node is not None else None
    for key in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if k.value == key:
                    nxt = v
                    line = k.start_mark.line + 1
                    break
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
            line = node.start_mark.line + 1
        else:
            break
    return line


def parse_text(text: str, name: str) -> tuple[Runbook | None, list[Problem]]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data: Any = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        return None, [Problem(name, mark.line + 1 if mark else None, f"YAML: {exc}")]
    if not isinstance(data, dict):
        return None, [Problem(name, 1, "a runbook file must be a YAML mapping")]
    try:
        return Runbook.model_validate(data), []
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = [p for p in err["loc"] if isinstance(p, (str, int))]
            where = ".".join(str(p) for p in loc) or "(file)"
            problems.append(Problem(name, _line_of(node, loc), f"{where}: {err['msg']}"))
        return None, problems


def load_file(path: Path) -> tuple[Runbook | None, list[Problem]]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None, [Problem(str(path), None, "file too large for a runbook")]
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(str(path), None, f"cannot read: {exc}")]
    return parse_text(text, str(path))


def _yaml_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def builtin() -> list[Runbook]:
    return list(_builtin())


@functools.cache
def _builtin() -> tuple[Runbook, ...]:
    # Parsed once per process: runbooks are frozen models, and a drill suite builds an autopilot per scenario
    # (parsing the YAML each time was a tenth of the suite's CPU).
    root = resources.files("llm_oncall.runbooks") / "builtin"
    books: list[Runbook] = []
    problems: list[Problem] = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name):
        if not entry.name.endswith(".yaml"):
            continue
        rb, probs = parse_text(entry.read_text(encoding="utf-8"), f"builtin/{entry.name}")
        problems += probs
        if rb is not None:
            books.append(rb)
    if problems:
        raise RunbookError(problems)
    return tuple(books)


class Registry:
    """Runbooks by id; later registrations override earlier ones."""

    def __init__(self, runbooks: Iterable[Runbook] = ()) -> None:
        self._books: dict[str, Runbook] = {}
        for rb in runbooks:
            self.register(rb)

    def register(self, rb: Runbook) -> None:
        self._books[rb.id] = rb

    def get(self, incident: str) -> Runbook | None:
        return self._books.get(incident)

    def ids(self) -> list[str]:
        return [rb.id for rb in self.in_triage_order()]

    def in_triage_order(self) -> list[Runbook]:
        return sorted(self._books.values(), key=lambda rb: (rb.priority, rb.id))

    def __len__(self) -> int:
        return len(self._books)


def load_registry(extra_dirs: Sequence[Path] = ()) -> Registry:
    reg = Registry(builtin())
    problems: list[Problem] = []
    for d in extra_dirs:
        if not d.is_dir():
            problems.append(Problem(str(d), None, "not a directory"))
            continue
        for f in _yaml_files(d):
            rb, probs = load_file(f)
            problems += probs
            if rb is not None:
                reg.register(rb)
    if problems:
        raise RunbookError(problems)
    return reg


def lint(paths: Sequence[Path], known_features: set[str] | None = None) -> list[Problem]:
    """Schema errors with file and line; unknown feature names when the feature set is given."""
    problems: list[Problem] = []
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += _yaml_files(p)
        elif p.exists():
            files.append(p)
        else:
            problems.append(Problem(str(p), None, "no such file or directory"))
    for f in files:
        rb, probs = load_file(f)
        problems += probs
        if rb is not None and known_features is not None:
            unknown = sorted(rb.names() - known_features)
            if unknown:
                problems.append(Problem(str(f), None, f"unknown feature(s): {', '.join(unknown)}"))
    return problems
