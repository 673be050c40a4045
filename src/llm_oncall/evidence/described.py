"""Prose that names an error without reporting one: a fix, a feature or an explanation.

A pull request that fixes a CUDA-graph capture error names ``cudaErrorStreamCaptureInvalidated``; a design note
quotes the driver manual ("when an uncorrectable ECC error is detected, the driver performs error recovery").
The signatures match the error's name in any sentence; this module tells the classifier which of those
sentences describe a change or a behaviour rather than an event on someone's machine:

- a **change document**: its prose carries the marks of a pull request, a commit or a feature request (a
  ``## Changes`` / ``### Proposed Solution`` heading, "This PR", "Fixes #123", a conventional
  commit subject ``fix(xid): ...``, "This is a fix ...", "We add ...", a review that validated the patch:
  "Without the patch ...", "+1 to merge") and none of a bug report ("### Describe
  the bug", "I get ...", "we are seeing ...", "Steps to reproduce");
- a **described behaviour**: a sentence that states what happens *when* an error occurs ("when an X error is
  detected, ..." / "if a fault is raised ..."), a rule rather than an event.

A finding of the signature catalogue whose every line is such a prose sentence (not a log line, not inside a
fence) is a mention, not a report; the classifier demotes it (``classify.classify_all``). Log lines in the same
document keep their findings: a fix PR that pastes the crash it fixes still shows the crash.
"""

from __future__ import annotations

import re
from functools import lru_cache

from llm_oncall.evidence import paste

# the marks of a change: PR / commit / feature-request templates and the sentences that open them
_CHANGE = re.compile(
    r"^\s{0,3}#{1,4}\s{0,3}(?:Changes|Motivation|Modifications|What this PR does|Description of changes|"
    r"Test plan|Testing Done|Proposed (?:Solution|Fix|Change)s?|Feature Summary|Feature request|Implementation)\b"
    r"|\b[Tt]his (?:PR|pull request|patch|commit|MR|changeset)\b"
    r"|^\s{0,3}(?:[-*]\s{1,3})?(?:Fixes|Closes|Resolves|Fix|Fixed|Close|Resolve)\s{1,3}(?:#\d{1,7}|https?://\S{1,200}/(?:issues|pull)/\d{1,7})"
    r"|^\s{0,3}(?:fix|feat|chore|docs|refactor|perf|test)(?:\([^)\n]{1,40}\))?!?:\s"
    r"|^\s{0,3}Signed-off-by:"
    r"|^\s{0,3}#{1,4}\s{0,3}Summary by CodeRabbit\b"
    r"|^\s{0,3}[-*]\s{1,3}\*\*(?:Bug Fixes|New Features|Refactor|Chores|Tests|Performance Improvements)\*\*\s*$"
    r"|\b[Tt]his is an? (?:permanent |proper |quick |temporary |small |simple )?(?:fix|workaround|feature|refactor)\b"
    r"|\b(?:[Vv]alidated|[Tt]ested|[Vv]erified|[Cc]onfirmed) (?:this|the) (?:fix|patch|change|PR)\b"
    r"|\b[Ww]ith(?:out)? (?:this|the) (?:patch|fix|change|PR)\b|\+1 to merge\b|^\s{0,3}LGTM\b"
    r"|^\s{0,3}(?:We|This PR|This change) (?:add|adds|introduce|introduces|implement|implements|remove|removes|"
    r"replace|replaces)\b",
    re.MULTILINE,
)
# the marks of a bug report: a template's report headings, a first person who ran into something
_REPORT = re.compile(
    r"^\s{0,3}#{1,4}\s{0,3}(?:🐛\s{0,2})?(?:Describe the bug|Bug Report|Your current environment|Error traceback|"
    r"Steps to reproduce|To Reproduce|Reproduction|Relevant log output)\b"
    r"|\b(?:I|We|we)(?:'m| am| are| have| had)?\s{1,2}(?:get|got|getting|encounter|encountered|encountering|hit|"
    r"hitting|see|saw|seeing|observe|observed|observing|ran into|run into|running into|noticed|experience|"
    r"experienced|experiencing)\b",
    re.MULTILINE,
)
# a rule rather than an event: "when an uncorrectable ECC error is detected, ...", "if a fault is raised"
_CONDITIONAL = re.compile(
    r"(?i)\b(?:when|whenever|if|once|in case)\s{1,3}(?:an?|the|any|such an?)\s{1,3}[^.\n]{0,60}?"
    r"\b(?:error|errors|fault|faults|failure|failures|exception|Xid)\s{1,3}(?:is|are|gets?|was)\s{1,3}"
    r"(?:detected|encountered|raised|reported|hit|seen|observed|found|thrown|logged)\b"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{1,30}")
MIN_PROSE_WORDS = 5


def _is_prose(line: str) -> bool:
    """A sentence of prose: words, no log or command prefix, no log level."""
    if paste._LOGLIKE.match(line) or paste._LEVEL.search(line):
        return False
    return len(_WORD.findall(line)) >= MIN_PROSE_WORDS


def _unfenced(text: str) -> list[tuple[int, str]]:
    """(0-based number, line) of the pasted document's lines outside any fence."""
    p = paste.read(text)
    fenced = {i for b in p.blocks if b.kind == "fence" for i in range(b.start, b.end)}
    return [(i, line) for i, line in enumerate(p.lines) if i not in fenced]


@lru_cache(maxsize=64)
def prose_rows(text: str) -> frozenset[int]:
    """1-based numbers of the lines that are prose sentences outside any fence."""
    return frozenset(i + 1 for i, line in _unfenced(text) if _is_prose(line))


@lru_cache(maxsize=64)
def is_change_document(text: str) -> bool:
    """The document describes a change (a PR, a commit, a feature request), not a failure someone hit."""
    prose = "\n".join(line for _, line in _unfenced(text))
    return bool(_CHANGE.search(prose)) and not _REPORT.search(prose)


def describes_behaviour(line: str) -> bool:
    """The sentence states what happens when an error occurs (a rule), not that it occurred."""
    return bool(_CONDITIONAL.search(line))


def mentioned_only(text: str, lines: tuple[int, ...]) -> bool:
    """Every one of ``lines`` (1-based) is a prose sentence that names the error without reporting it: in a
    change document, or a sentence that describes a behaviour."""
    if not lines:
        return False
    rows = prose_rows(text)
    if not all(n in rows for n in lines):
        return False
    if is_change_document(text):
        return True
    clean = paste.read(text).lines
    return all(0 < n <= len(clean) and describes_behaviour(clean[n - 1]) for n in lines)
