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
from llm_oncall.evidence.model import CJK_RUN

# the marks of a change: PR / commit / feature-request templates and the sentences that open them
_CHANGE = re.compile(
    r"^\s{0,3}#{1,4}\s{0,3}(?:Changes|Motivation|Modifications|What this PR does|Description of changes|"
    r"Test plan|Testing Done|Proposed (?:Solution|Fix|Change)s?|Feature Summary|Feature request|Implementation|"
    r"What(?:'s| has)? changed(?: and why)?|Summary of changes|Changes made)\b"
    r"|^\s{0,3}#{1,4}\s{0,3}(?:Fix|The fix|Solution)\s*$"
    r"|^\s{0,3}(?:#{1,4}\s{0,3})?(?:\*\*)?(?:List of changes|Changes in this (?:PR|version|release)|Summary of changes)"
    r"(?:\*\*)?\s{0,2}:?(?:\*\*)?\s*$"
    r"|\b[Tt]his (?:PR|pull request|patch|commit|MR|changeset)\b"
    r"|^\s{0,3}(?:[-*]\s{1,3})?(?:Fixes|Closes|Resolves|Fix|Fixed|Close|Resolve)\s{1,3}(?:#\d{1,7}|https?://\S{1,200}/(?:issues|pull)/\d{1,7})"
    r"|^\s{0,3}(?:fix|feat|chore|docs|refactor|perf|test)(?:\([^)\n]{1,40}\))?!?:\s"
    r"|^\s{0,3}(?:Signed-off-by|Co-authored-by):"
    r"|^\s{0,3}This commit is contained in:?\s*$"
    r"|^\s{0,3}#{1,4}\s{0,3}Summary by CodeRabbit\b"
    r"|^\s{0,3}[-*]\s{1,3}\*\*(?:Bug Fixes|New Features|Refactor|Chores|Tests|Performance Improvements)\*\*\s*$"
    r"|\b[Tt]his is an? (?:permanent |proper |quick |temporary |small |simple )?(?:fix|workaround|feature|refactor)\b"
    r"|\b(?:[Vv]alidated|[Tt]ested|[Vv]erified|[Cc]onfirmed) (?:this|the) (?:fix|patch|change|PR)\b"
    r"|\b[Ww]ith(?:out)? (?:this|the) (?:patch|fix|change|PR)\b|\+1 to merge\b|^\s{0,3}LGTM\b"
    r"|^\s{0,3}(?:[Ll]ooks|[Ll]ooking) (?:correct|good|right|fine) to me\b"
    r"|\b(?:[Bb]oth|[Tt]hese|[Tt]he|[Aa]ll) changes? (?:is|are) backwards?[- ]compatible\b"
    r"|^\s{0,3}(?:We|This PR|This change) (?:add|adds|introduce|introduces|implement|implements|remove|removes|"
    r"replace|replaces)\b",
    re.MULTILINE,
)
# marks no bug report carries: a PR or feature template's headings ("## Purpose", "## Test Result", "### 🚀 The
# feature, motivation and pitch", "## Acceptance criteria"), a feature ticket's "**Acceptance:**" line, a bot
# reviewer's comment header ("**coderabbitai[bot]**:"), a diff under review (a ```diff fence, three backticks or
# more), a feature template's questions (GitHub's "**Is your feature request related to a problem? ...**",
# "**Describe the solution you'd like**"; AWS's roadmap "**Tell us about your request**"). A first person in a PR's
# test section ("We see ...") does not make it a report; a bug template's heading does.
_STRONG_CHANGE = re.compile(
    r"^\s{0,3}#{1,4}\s{0,3}(?:Purpose|Test|Tests|Test Result|Test Results|Test Plan|Acceptance criteria|"
    r"What to build|(?:🚀\s{0,2})?The feature, motivation and pitch)\s*$"
    r"|^\s{0,3}\*\*(?:Acceptance(?: criteria)?|Where):?\*\*:?\s"
    r"|^\s{0,3}\*\*[\w.-]{1,40}\[bot\]\*\*:?\s*$"
    r"|^\s{0,3}\*\*(?:Is your feature request related to a problem\?[^*\n]{0,40}|Describe the solution you'd like|"
    r"Tell us about your request)\*\*\s*$"
    r"|^\s{0,3}(?:`{3,}|~{3,})\s{0,2}diff\s*$",
    re.MULTILINE,
)
# the marks of a bug report: a template's report headings, a first person who ran into something
_REPORT_HEADING = re.compile(
    r"^\s{0,3}#{1,4}\s{0,3}(?:🐛\s{0,2})?(?:Describe the bug|Bug Report|Your current environment|Error traceback|"
    r"Steps to reproduce|To Reproduce|Reproduction|Relevant log output)\b",
    re.MULTILINE,
)
_REPORT = re.compile(
    _REPORT_HEADING.pattern
    + r"|\b(?:I|We|we)(?:'m| am| are| have| had)?\s{1,2}(?:get|got|getting|encounter|encountered|encountering|hit|"
    r"hitting|see|saw|seeing|observe|observed|observing|ran into|run into|running into|noticed|experience|"
    r"experienced|experiencing)\b",
    re.MULTILINE,
)
# fences that hold source code, configuration or a diff, not a log: their info string names a language
_CODE_FENCE = re.compile(
    r"^\s{0,3}(?:```|~~~)\s{0,2}(?:diff|patch|python|py|yaml|yml|go|golang|c|cpp|c\+\+|cuda|cu|rust|rs|java|js|"
    r"javascript|ts|typescript|json|toml|ini|cfg|proto|sql|ruby|rb)\s*$"
)
_FENCE = re.compile(r"^\s{0,3}(?:```|~~~)")
# a how-to or an answer: it tells the reader what an error means and what to do, it does not report one
_GUIDE = re.compile(
    r"(?i)\b(?:if|when) you (?:get|see|hit|run into|encounter)\b[^.\n]{0,40}?\b(?:error|this|following|message)\b"
    r"|\bit means (?:that )?(?:the|your|you)\b|\bwhat you (?:want|need|have) to do is\b"
    # an imperative answer that pairs an error with its remedy: "For `Error 802: ...`, install `nvidia-fabricmanager`."
    r"|^\s{0,3}(?:For|To (?:fix|solve|resolve|avoid))\s[^\n]{0,20}?\b(?:[Ee]rror|[Ee]xception|Xid|code)\b"
    r"[^\n]{0,100}?,\s{0,2}(?:install|run|set|use|upgrade|update|restart|reboot|enable|disable|start|unset|export|add|"
    r"remove|downgrade)\b",
    re.MULTILINE,
)
# a reference page (documentation, a troubleshooting guide, an error catalogue): its section headings ("Symptom",
# "Cause", "Resolution", "How to diagnose it", "What to do"), the captions of its example lines ("Typical
# kernel-log signature", "XID Log Examples") and its definitions ("This XID indicates ..."). Two different marks
# make a page that quotes errors to explain them; a bug report's single "### Workaround" heading does not.
_REFERENCE_HEADING = re.compile(
    r"(?i)^\s{0,3}(?:#{1,4}\s{0,3})?(?:\d{1,2}[.)]\s{0,2})?"
    r"(?:Symptoms?|Causes?|Possible causes|Root cause|Resolution|"
    r"Diagnos(?:e|is|tic order)|How to (?:diagnose|fix|resolve|troubleshoot)(?: it)?|What it means|What to do|"
    r"Signal or noise\??|Prevention|Remediation|Recommended actions?|"
    # a glossary or explainer entry's sections: "What it is", "Why it matters", "How to monitor", "Common causes"
    r"What (?:it|they|this) (?:is|are)|Why (?:it|this|they) matters?|"
    r"How to (?:monitor|detect|prevent|check|identify|avoid)(?: (?:it|them))?|Common causes|"
    r"Related (?:terms|errors|metrics))\s{0,2}[:#]?[^\n]{0,40}$"
)
# an FAQ entry's sections, alone on their line (a report's "Error message: RuntimeError ..." is no heading): the error
# quoted, then its solution (round 3zn)
_FAQ_SECTION = re.compile(r"(?i)^\s{0,3}(?:#{1,4}\s{0,3})?(?:Solutions?|Error messages?)\s{0,2}:?\s*$")
# a page titled FAQ is a reference page by its title: the maintainers' answers, quoting the errors they explain (two
# marks; round 3zn)
_FAQ_TITLE = re.compile(r"(?i)^\s{0,3}(?:#{1,4}\s{0,3})?(?:FAQs?|Frequently asked questions)\s{0,2}:?\s*$")
# a runbook's sections ("Runbook: GPU fault, drain, reset", "Trigger", "Pre-checks", "Escalation", "Rollback"): these
# words also open a report's sentences ("Rollback to 0.6.3 fixed it"), so they make a heading only after a Markdown
# `#`, or alone on their line, or before a colon
_RUNBOOK_WORDS = r"(?:Runbook|Triggers?|Pre-?checks|Escalation|Rollback|Verification)"
_RUNBOOK_HEADING = re.compile(
    r"(?i)^\s{0,3}(?:#{1,4}\s{0,3}(?:\d{1,2}[.)]\s{0,2})?" + _RUNBOOK_WORDS + r"\b[^\n]{0,40}"
    r"|(?:\d{1,2}[.)]\s{0,2})?" + _RUNBOOK_WORDS + r"\s{0,2}(?::[^\n]{0,40})?)$"
)
# a Chinese guide's headings (a short line): cause, solution, troubleshooting, diagnosis, common errors, a guide,
# how to ("原因", "解决方法", "排查", "诊断方法", "常见错误", "指南", "如何检测…"); and its enumerated
# sections ("一、…", "二、…", "2.1 典型…"): two of them make one mark
_ZH_GUIDE_HEADING = re.compile(
    r"^\s{0,3}(?:#{1,4}\s{0,3})?[^\n]{0,30}?(?:原因|解决(?:方法|方案|办法|思路)|排查|诊断|常见(?:错误|问题|故障|类型)|指南|"
    r"如何|预防|处理(?:建议|方法)|注意事项|故障检测)[^\n。！]{0,30}$")
_ZH_SECTION = re.compile(
    r"^\s{0,3}(?:#{1,4}\s{0,3})?(?:[一二三四五六七八九十]{1,3}[、.．]|\d{1,2}(?:\.\d{1,2}){1,2}\s{0,3}(?=[\u4e00-\u9fff]))"
    r"[^\n。]{1,40}$")
# a Chinese first person who ran into something: a report, never a guide
_REPORT_ZH = re.compile(r"我(?:们)?[^。\n]{0,12}?(?:遇到|出现|碰到|发现|报错|部署|运行|使用|启动|测试)")
# a rendered documentation page's heading keeps its permalink sign ("Optimization and Tuning#", "Preemption¶"): two
# such headings make one mark
_PERMALINK_HEADING = re.compile(r"^\s{0,3}[A-Z][\w ,:/()'-]{2,50}?[#¶]\s*$")
_REFERENCE_PHRASE = re.compile(
    r"(?i)\b(?:typical (?:kernel[- ]log |log |dmesg )?signature|(?:XID|error|log) (?:log )?examples"
    r"|this (?:XID|error|error code|event) (?:indicates|means|is raised when)"
    r"|(?:logs?|messages?|events?|lines?) (?:are|is) in the following format"
    r"|(?:event|health|kernel) log looks like this"
    r"|see (?:the )?[\w -]{1,40}? for (?:more|general|further|additional|detailed) (?:info|information|details)"
    r"|(?:is|are) supported on the following"
    r"|consider the following (?:actions|steps|options|settings|remedies))\b"
)
# a numbered section heading of a manual ("1. Implementation", "3.1. XIDs"): three of them make one mark
_NUMBERED_SECTION = re.compile(
    r"^\s{0,3}\d{1,2}(?:\.\d{1,2}){0,2}\.?\s{1,3}[A-Z][A-Za-z-]{2,30}(?:\s[A-Za-z-]{1,20}){0,2}\s*$")
_REFERENCE_CHEAP = ("signature", "examples", "indicates", "means", "raised when", "following format", "looks like this",
                    "for more", "for general", "for further", "for additional", "for detailed", "on the following",
                    "consider the following")


def _reference_marks(prose: str) -> int:
    """Distinct reference-page marks in the prose (at most 2 are counted): headings on short lines, captions and
    definitions on lines that hold one of their words."""
    marks: set[str] = set()
    numbered = 0
    permalinks = 0
    zh_sections = 0
    for line in prose.split("\n"):
        if len(line) <= 48 and CJK_RUN.search(line):
            if _ZH_SECTION.match(line):
                zh_sections += 1
                if zh_sections >= 2:
                    marks.add("zh sections")
            if _ZH_GUIDE_HEADING.match(line):
                marks.add("zh guide heading")
        elif len(line) <= 60:
            m = _REFERENCE_HEADING.match(line) or _RUNBOOK_HEADING.match(line) or _FAQ_SECTION.match(line)
            if _FAQ_TITLE.match(line):
                marks.update(("faq", "faq title"))
            elif m:
                marks.add(line.strip().lower()[:20])
            elif line.rstrip()[-1:] in ("#", "¶") and _PERMALINK_HEADING.match(line):
                permalinks += 1
                if permalinks >= 2:
                    marks.add("permalink headings")
            elif len(line) <= 40 and line[:4].lstrip()[:1].isdigit() and _NUMBERED_SECTION.match(line):
                numbered += 1
                if numbered >= 3:
                    marks.add("numbered sections")
        low = line.lower()
        if any(w in low for w in _REFERENCE_CHEAP):
            m = _REFERENCE_PHRASE.search(line)
            if m:
                marks.add(m.group(0).lower()[:20])
        if len(marks) >= 2:
            break
    return len(marks)


# the thread's problem is solved: the quoted (blockquoted) error is history, the rest says it works now
_RESOLVED = re.compile(
    r"(?i)\bturns out (?:that'?s|it was|the)\b|\bthat(?:'s| is| was) (?:what|why) my (?:issue|problem)\b"
    r"|\b(?:problem|issue) (?:is |was |has been )?(?:solved|resolved|fixed|gone)\b"
    r"|\bworks? (?:fine |again |correctly |perfectly )?now\b|\bVoil[aà]\b"
)
# a rule rather than an event: "when an uncorrectable ECC error is detected, ...", "if a fault is raised"; also a
# definition: 'The error message "X" occurs when ...', "this error indicates that ..."
_CONDITIONAL = re.compile(
    r"(?i)\b(?:when|whenever|if|once|in case)\s{1,3}(?:an?|the|any|such an?)\s{1,3}[^.\n]{0,60}?"
    r"\b(?:error|errors|fault|faults|failure|failures|exception|Xid)\s{1,3}(?:is|are|gets?|was)\s{1,3}"
    r"(?:detected|encountered|raised|reported|hit|seen|observed|found|thrown|logged)\b"
    r"|\b(?:error|error message|error code|message|status)\b[^.\n]{0,120}?\b(?:occurs|happens|is raised|is returned|"
    r"is thrown|is reported)\s{1,3}(?:when|whenever|if)\b"
    r"|\b(?:this|the|that) (?:error|status|code) (?:indicates|means) that\b"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{1,30}")
MIN_PROSE_WORDS = 5


def _is_prose(line: str) -> bool:
    """A sentence of prose: words, no log or command prefix, no log level."""
    if paste._LOGLIKE.match(line) or paste._LEVEL.search(line):
        return False
    return len(_WORD.findall(line)) >= MIN_PROSE_WORDS


@lru_cache(maxsize=16)
def _unfenced(text: str) -> tuple[tuple[int, str], ...]:
    """(0-based number, line) of the pasted document's lines outside any fence (read once per document)."""
    p = paste.read(text)
    fenced = {i for b in p.blocks if b.kind == "fence" for i in range(b.start, b.end)}
    return tuple((i, line) for i, line in enumerate(p.lines) if i not in fenced)


@lru_cache(maxsize=64)
def prose_rows(text: str) -> frozenset[int]:
    """1-based numbers of the lines that are prose sentences outside any fence."""
    return frozenset(i + 1 for i, line in _unfenced(text) if _is_prose(line))


@lru_cache(maxsize=64)
def is_change_document(text: str) -> bool:
    """The document describes a change (a PR, a commit, a feature request, a review), not a failure someone hit:
    a template's or a reviewer's mark no report carries, or a change's mark and no sign of a report."""
    prose = "\n".join(line for _, line in _unfenced(text))
    if _REPORT_HEADING.search(prose):
        return False
    if _STRONG_CHANGE.search(prose) or _STRONG_CHANGE.search(text):
        return True
    return bool(_CHANGE.search(prose)) and not _REPORT.search(prose)


@lru_cache(maxsize=64)
def code_rows(text: str) -> frozenset[int]:
    """1-based numbers of the lines inside fences that hold code, configuration or a diff (```diff, ```python,
    ```yaml ...), fence lines included."""
    rows: set[int] = set()
    inside = False
    code = False
    for i, line in enumerate(text.split("\n")):
        if _FENCE.match(line):
            if inside:
                if code:
                    rows.add(i + 1)
                inside = code = False
            else:
                inside, code = True, bool(_CODE_FENCE.match(line))
                if code:
                    rows.add(i + 1)
            continue
        if inside and code:
            rows.add(i + 1)
    return frozenset(rows)


# A change document laid out as problem then fix: the fence under its problem heading quotes the failure the change
# fixes (a CI log, the error it removes), not a new event.
_PROBLEM_HEADING = re.compile(
    r"^\s{0,3}#{1,4}\s{0,3}(?:Problem|The problem|Problem statement|Issue|Bug|Root cause|Motivation|Background|"
    r"Before|Symptoms?|Error|Why)\s*:?\s*$", re.IGNORECASE)
_FIX_HEADING = re.compile(
    r"^\s{0,3}#{1,4}\s{0,3}(?:Fix|The fix|Solution|Proposed (?:fix|solution|change)s?|Changes|Modifications|"
    r"What changed|What this PR does|Implementation|Approach)\s*:?\s*$", re.IGNORECASE | re.MULTILINE)
_ANY_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
# a unified diff's hunk header outside any fence (a forge's commit page): "@@ -3,6 +3,25 @@"
_HUNK = re.compile(r"^\s{0,3}@@ -\d{1,7}(?:,(?P<old>\d{1,6}))? \+\d{1,7}(?:,(?P<new>\d{1,6}))? @@")


@lru_cache(maxsize=64)
def problem_rows(text: str) -> frozenset[int]:
    """1-based numbers of the lines inside fences under a problem heading (``## Problem``, ``## Root cause``) of a
    document that also has a fix heading (``## Fix``, ``## Solution``, ``## Changes``)."""
    if "#" not in text or not _FIX_HEADING.search(text):
        return frozenset()
    rows: set[int] = set()
    in_problem = inside = False
    for i, line in enumerate(text.split("\n")):
        if _FENCE.match(line):
            inside = not inside
            if in_problem:
                rows.add(i + 1)
            continue
        if inside:
            if in_problem:
                rows.add(i + 1)
            continue
        if _ANY_HEADING.match(line):
            in_problem = bool(_PROBLEM_HEADING.match(line))
    return frozenset(rows)


@lru_cache(maxsize=64)
def hunk_rows(text: str) -> frozenset[int]:
    """1-based numbers of the lines of a diff's hunks written out without a fence (a forge's commit page): after an
    ``@@ -a,b +c,d @@`` header, at most b + d lines, up to the next header."""
    if "@@ -" not in text:
        return frozenset()
    rows: set[int] = set()
    left = 0
    for i, line in enumerate(text.split("\n")):
        m = _HUNK.match(line) if line.lstrip().startswith("@@") else None
        if m:
            left = int(m.group("old") or 1) + int(m.group("new") or 1)
            rows.add(i + 1)
            continue
        if left > 0:
            rows.add(i + 1)
            left -= 1
    return frozenset(rows)


@lru_cache(maxsize=64)
def has_diff(text: str) -> bool:
    """The document holds a diff (a ```diff fence, of three backticks or more) or a code review's ```suggestion block:
    code under change, never a model's output."""
    return bool(re.search(r"^\s{0,3}(?:`{3,}|~{3,})\s{0,2}(?:diff|patch|suggestion)\s*$", text, re.MULTILINE))


@lru_cache(maxsize=64)
def is_guide(text: str) -> bool:
    """A how-to or an answer: it tells what an error means and what to do ("if you get the following error ...
    it means that ...", "For `Error 802: ...`, install `nvidia-fabricmanager`"), in prose with no first person who
    hit it."""
    prose = "\n".join(line for _, line in _unfenced(text))
    if _reference_marks(prose) >= 2 and not _REPORT.search(prose) and not _REPORT_ZH.search(prose):
        return True
    low = prose.lower()
    if " you " not in low and "it means" not in low and "for " not in low and "to " not in low:  # a cheap test
        return False
    return bool(_GUIDE.search(prose)) and not _REPORT.search(prose)


@lru_cache(maxsize=16)
def _blockquoted(text: str) -> frozenset[int]:
    return frozenset(i + 1 for i, line in enumerate(text.split("\n")) if line.lstrip().startswith(">"))


@lru_cache(maxsize=64)
def is_resolved(text: str) -> bool:
    """The unquoted prose says the thread's problem is solved ("Turns out that's what my issue was", "works
    now")."""
    quoted = _blockquoted(text)
    prose = "\n".join(line for i, line in _unfenced(text) if (i + 1) not in quoted)
    return bool(_RESOLVED.search(prose))


def describes_behaviour(line: str) -> bool:
    """The sentence states what happens when an error occurs (a rule), not that it occurred."""
    return bool(_CONDITIONAL.search(line))


def mentioned_only(text: str, lines: tuple[int, ...]) -> bool:
    """Every one of ``lines`` (1-based) names the error without reporting it: a prose sentence in a change
    document or one that describes a behaviour; in a change document also a line of a code, configuration or
    diff fence (a regex, a message string, a list of error names); any line of a how-to; a blockquoted (earlier)
    message in a thread whose problem is solved."""
    if not lines:
        return False
    if is_guide(text):
        return True
    quoted = _blockquoted(text)
    if all(n in quoted for n in lines) and is_resolved(text):
        return True
    rows = prose_rows(text)
    change = is_change_document(text)
    if change and all(n in rows or n in code_rows(text) or n in problem_rows(text) or n in hunk_rows(text)
                      for n in lines):
        return True
    if not all(n in rows for n in lines):
        return False
    if change:
        return True
    clean = paste.read(text).lines
    return all(0 < n <= len(clean) and describes_behaviour(clean[n - 1]) for n in lines)
