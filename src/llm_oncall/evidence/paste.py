"""The paste reader: one pre-pass that reads a document the way users paste it into an issue.

A pasted log sits inside prose: Markdown fences (```` ```text ````), blockquote markers (``> ``), a container
name in front of every line (``llama.cpp-gpu  | ``), grep's line numbers (``123:RuntimeError: ...``), terminal
colour codes, annotations (``<-- here``). The reader splits the document into prose, log/command blocks and
quoted model outputs and yields

- ``clean``: the document with that decoration removed, **one cleaned line per original line** (a fence line
  becomes an empty line), so every parser reads ``clean`` and its line numbers are the original paste's;
  ``line_of`` maps a cleaned line back (identity by construction, kept explicit for callers);
- ``blocks``: the segments, each ``prose``, ``log`` or ``fence`` with its original line range;
- ``quoted``: text in prose that quotes a model's output: a double-quoted span, the rest of a line after
  a colon cue (``looks like:``, ``output:``) or a chat speaker label (``AI:``), the paragraph under such a cue
  (or under a line ending in one without a colon: ``The output ... is``), a blockquote or a fenced
  block that is not a log or command output; ``named`` when the cue line calls it gibberish or garbage. The
  output analyzer measures these; log and command text is never one (timestamps, levels, table rows,
  producer markers such as NCCL or NVRM).

Wrapped lines are re-joined by the signature matcher (which knows the wrap width); the reader keeps the line
count so the map stays exact. Everything here is linear in the text and never raises on content.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from llm_oncall.evidence.model import MAX_LINE_CHARS, split_lines

_FENCE = re.compile(r"^\s{0,8}(?:`{3,}|~{3,})[\w+.-]{0,30}\s*$")
_QUOTE_MARK = re.compile(r"^\s{0,3}(?:>\s?){1,4}")
# also syslog's escaped form of ESC ("#033[31mERROR#033[0m": rsyslog writes control characters as #ooo)
_ANSI = re.compile(r"(?:\x1b|#033)\[[0-9;]{0,20}[A-Za-z]|^\[\d{1,3}(?:;\d{1,3}){0,4}m")
# docker compose: "service-1  | " (a name, padding, a bar); the same prefix on several lines
_COMPOSE = re.compile(r"^([A-Za-z0-9][\w.@-]{0,62})\s{1,24}\| ")
# grep -n: "123:RuntimeError: ..." (a line number glued to the line, a letter after the colon: a clock's
# "10:21:03" and a list's "1: item" are not one); counted like compose prefixes, read only when several lines carry one
_GREP_N = re.compile(r"^\d{1,7}:(?=[A-Za-z_\[(<])")
MIN_PREFIXED = 2
_ANNOTATION = re.compile(r"\s{1,8}(?:<-{1,3}|←|#\s{0,2}<-{1,3})\s{0,4}[^\n]{0,120}$")
# A command's aligned "key : value" row (nvidia-smi -q's "Remapping Failure Occurred        : No", kubectl describe's
# "Reason:       CrashLoopBackOff"): padding before or after the colon is a table's, not a sentence's.
ALIGNED_ROW = re.compile(r"^\s*[\w(][\w ().,/-]{0,60}?(?: {2,}:|: {2,}\S)")

# a log or command line: a timestamp, a level, a bracketed/parenthesised prefix, a table row, a key: value
# dump of a tool, a Python frame, a snake_case function name before a colon (an engine's own message)
_LOGLIKE = re.compile(
    r"^\s{0,8}(?:\[\s{0,8}[\w+]|\d{4}[-/]\d\d[-/]\d\d[ T]|\d{1,2}:\d\d(?::\d\d)?|[A-Z][a-z]{2} [ \d]\d |[IWEF]\d{4} |"
    r"\(\w{1,40} pid=\d{1,8}\)|\||\+[-=]|File \"|Traceback|\$ |# |\w{1,40}\[\d{1,10}\]:|"
    r"[\w.-]{1,60}:\d{1,10}:\d{1,10} |[a-z][a-z0-9]{0,30}_[a-z0-9_]{1,40} ?: )"
)
_LEVEL = re.compile(r"\b(?:INFO|DEBUG|DBG|WARNING|WARN|ERROR|CRITICAL|FATAL)\b")
_MARKERS = ("NVRM", "NVIDIA-SMI", "NCCL", "DCGM", "nvidia-smi", "dcgmi", "kubectl", "Exception", "Error:", "0x",
            "Traceback", "pid=", "GPU ", "CUDA")
# a cue that the text after it (on the line or in the next paragraph) is what the model produced
_CUE = re.compile(
    r"(?:\b(?:output|outputs|outputted|response|responses|answer|answers|reply|replies|answered|generates?|"
    r"generated|says|printed|prints|returns?|returned|like|pattern|example|gibberish|garbage|garbled|nonsense|"
    r"outpus|ouput|ouputs|outpout)\b[^:\n]{0,40}):\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
# the line that introduces the quote calls it garbage: the user's own reading of what the model produced
_NAMED_GARBAGE = re.compile(r"\b(?:gibberish|garbage|garbled|nonsense|nonsensical|junk|jibberish)\b|乱码",
                            re.IGNORECASE)
# an output introduced without a colon at the end of its line ("The output of the above code is")
# or by an example marker at the end of its line ("Garbage generation (for all prompts) such as")
_CUE_TRAILING = re.compile(
    r"\b(?:output|outputs|response|responses|answer|answers|result|results|reply)\b[^:\n]{0,40}"
    r"\b(?:is|was|are|were|looks like|look like)\s*$"
    r"|\b(?:output|outputs|response|responses|answer|answers|generation|generations|completion|completions)\b"
    r"[^:\n]{0,40}\b(?:such as|like|e\.g\.|for example)\s*[,.]?\s*$", re.IGNORECASE)
# a speaker label of a chat transcript: the rest of the line is what the model said
_SPEAKER = re.compile(r"^\s{0,4}(?:AI|Assistant|ASSISTANT|Bot|Model|LLM|Chatbot)\s{0,2}:\s*(?P<rest>.+)$")
_DQUOTED = re.compile(r"\"([^\"\n]{8,2000})\"|“([^”\n]{8,2000})”")
# an output written as escape sequences in prose ("the results were still '\\n\\n\\n\\n\\n'"): three or more
# whitespace escapes and nothing else between quotes or backticks; one escape is code ("'\\n'.join(...)")
_ESCAPED = re.compile(r"(['\"`])((?:\\[nrt]){3,})\1")
_ESCAPE_OF = {"\\n": "\n", "\\r": "\r", "\\t": "\t"}
# inline code around the text after a cue ("Output generated : `iguiguigui...`"): the output is inside
_INLINE_CODE = re.compile(r"^\s*`([^`]+)`?\s*$")
# an output introduced by where it sits ("as per example below.", "the example below ...:", "(see below)")
# a line that is nothing but the cue word ("outputs", "**Output**", "## Response"): the fence or paragraph under
# it is what the model produced
_CUE_ALONE = re.compile(
    r"^\s{0,3}(?:#{1,4}\s{0,2})?[*_]{0,2}\s{0,2}(?:the\s+)?(?:model\s+)?(?:output|outputs|response|responses|"
    r"result|results|answer|generated text|completion)\s{0,2}[*_]{0,2}\s{0,2}$", re.IGNORECASE)
_CUE_BELOW = re.compile(
    r"\b(?:example|examples|output|outputs|result|response|answer|text|sample)\b[^\n]{0,24}\bbelow\b"
    r"|\bbelow\W{0,3}$|\(see below\)\W{0,2}$", re.IGNORECASE)
# an interactive prompt (ollama / llama.cpp REPL: ">>> hello"): the lines after it are the model's answer,
# up to the next prompt; a Python prompt (code) is not one
_REPL = re.compile(r"^\s{0,3}>>>\s{1,4}(?P<prompt>\S[^\n]{0,400})$")
_PY_PROMPT = re.compile(r"[=()\[\]{}]|^(?:import|from|print|def|class|for|while|if|with|return|lambda)\b|^/")
# one character repeated as a word of its own in prose ("it answers @@@@@@@@@@@@", "bombs out with GGGGGGGGGG."):
# an output told inline. Rules, separators, carets, numbers and redaction marks (xxxx) are not one.
_RUN_TOKEN = re.compile(r"\S{10,}")
_NOT_RUN = frozenset("-=_*#.~^+|/\\<>`'\":;,()[]{}xX")
MIN_RUN = 10
# a "name: value" line of a tool's own output ("main: seed = 1680545329") ahead of the text it generated
_TOOL_LINE = re.compile(r"^\s{0,4}[\w.-]{1,40}:\s")
MIN_QUOTED = 8
MAX_QUOTED = 20_000


@dataclass(frozen=True)
class Block:
    kind: str  # "prose" | "log" | "fence"
    start: int  # 0-based, first line
    end: int  # 0-based, exclusive


@dataclass(frozen=True)
class Quoted:
    line: int  # 1-based line of the original paste where the quoted output starts
    text: str
    how: str  # "quotes" | "escapes" | "cue" | "blockquote" | "fence" | "speaker" | "repl" | "run"
    named: bool = False  # the cue line calls it gibberish / garbage / garbled


@dataclass(frozen=True)
class Paste:
    clean: str
    lines: tuple[str, ...]
    blocks: tuple[Block, ...] = ()
    quoted: tuple[Quoted, ...] = field(default_factory=tuple)

    def line_of(self, clean_line: int) -> int:
        """The original (1-based) line of a cleaned (1-based) line."""
        return clean_line


def is_loglike(line: str) -> bool:
    return bool(_LOGLIKE.match(line) or _LEVEL.search(line) or any(m in line for m in _MARKERS))


def _mostly_log(lines: list[str]) -> bool:
    body = [ln for ln in lines if ln.strip()]
    if not body:
        return True
    return sum(1 for ln in body if is_loglike(ln)) / len(body) >= 0.3


def _compose_prefixes(lines: Sequence[str]) -> set[str]:
    seen: dict[str, int] = {}
    for ln in lines:
        m = _COMPOSE.match(ln)
        if m:
            seen[m.group(0)] = seen.get(m.group(0), 0) + 1
    return {p for p, n in seen.items() if n >= MIN_PREFIXED}


def _grep_numbered(lines: Sequence[str]) -> bool:
    return sum(1 for ln in lines if _GREP_N.match(ln)) >= MIN_PREFIXED


def _clean_line(line: str, prefixes: set[str], grep_n: bool = False) -> str:
    line = line[:MAX_LINE_CHARS]
    if "\x1b" in line or "#033[" in line or line.startswith("["):
        line = _ANSI.sub("", line)
    q = _QUOTE_MARK.match(line)
    if q and q.end() > 0:
        line = line[q.end():]
    if prefixes:
        m = _COMPOSE.match(line)
        if m and m.group(0) in prefixes:
            line = line[m.end():]
    if grep_n:
        line = _GREP_N.sub("", line, count=1)
    if "<-" in line or "←" in line:
        line = _ANNOTATION.sub("", line)
    return line


@lru_cache(maxsize=64)
def read(text: str) -> Paste:
    """The document split and cleaned (cached: every parser of one classification reads the same paste)."""
    raw = split_lines(text)
    prefixes = _compose_prefixes(raw[:2000])
    grep_n = _grep_numbered(raw[:2000])
    clean: list[str] = []
    blocks: list[Block] = []
    quoted: list[Quoted] = []
    in_fence = False
    fence_start = 0
    for i, line in enumerate(raw):
        if _FENCE.match(line):
            if in_fence:
                blocks.append(Block("fence", fence_start, i + 1))
            else:
                fence_start = i
            in_fence = not in_fence
            clean.append("")
            continue
        clean.append(_clean_line(line, prefixes, grep_n))
    if in_fence:
        blocks.append(Block("fence", fence_start, len(raw)))
    fenced = _fenced_lines(blocks)
    _prose_blocks(clean, fenced, blocks)
    quoted = _quoted(raw, clean, blocks, fenced)
    blocks.sort(key=lambda b: b.start)
    return Paste("\n".join(clean), tuple(clean), tuple(blocks), tuple(quoted))


def _fenced_lines(blocks: list[Block]) -> set[int]:
    out: set[int] = set()
    for b in blocks:
        out.update(range(b.start, b.end))
    return out


def _prose_blocks(clean: list[str], fenced: set[int], blocks: list[Block]) -> None:
    start = None
    kind = ""
    for i, line in enumerate([*clean, ""]):
        if i in fenced or i == len(clean) or not line.strip():
            if start is not None:
                blocks.append(Block(kind, start, i))
                start = None
            continue
        k = "log" if is_loglike(line) else "prose"
        if start is None:
            start, kind = i, k
        elif k != kind:
            blocks.append(Block(kind, start, i))
            start, kind = i, k


def _add(out: list[Quoted], line: int, text: str, how: str, named: bool = False) -> None:
    lead = text[:len(text) - len(text.lstrip())]
    line += lead.count("\n")  # the quote's first line with text in it
    text = text.strip()
    if len("".join(text.split())) >= MIN_QUOTED and len(text) <= MAX_QUOTED:
        out.append(Quoted(line + 1, text, how, named))


def _quoted(raw: Sequence[str], clean: list[str], blocks: list[Block], fenced: set[int]) -> list[Quoted]:
    out: list[Quoted] = []
    fences = {b.start: b for b in blocks if b.kind == "fence"}
    cue_pending = False
    named = False
    i = 0
    n = len(clean)
    while i < n:
        line = clean[i]
        if i in fences:
            b = fences[i]
            # an unclosed fence runs to the end of the paste: its last line is text, not a fence
            body = clean[b.start + 1:b.end - 1 if _FENCE.match(raw[b.end - 1]) else b.end]
            if cue_pending and not _mostly_log(body):
                _add(out, b.start + 1, "\n".join(body), "fence", named)
            elif cue_pending:
                _log_tail(out, body, b.start + 1, named)
            cue_pending = False
            i = b.end
            continue
        if i in fenced:
            i += 1
            continue
        repl = _REPL.match(raw[i])
        if repl and not _PY_PROMPT.search(repl.group("prompt")):
            j = i + 1
            while (j < n and j not in fences and j not in fenced and not _REPL.match(raw[j])
                   and not clean[j].lstrip().startswith("#")):
                j += 1
            body = clean[i + 1:j]
            if body and not _mostly_log(body):
                _add(out, i + 1, "\n".join(body), "repl")
            i = max(j, i + 1)
            cue_pending = False
            continue
        if _QUOTE_MARK.match(raw[i]) and not _FENCE.match(raw[i]):
            j = i
            while j < n and j not in fenced and _QUOTE_MARK.match(raw[j]):
                j += 1
            body = clean[i:j]
            if not _mostly_log(body):
                _add(out, i, "\n".join(body), "blockquote")
            i = j
            cue_pending = False
            continue
        if not line.strip():
            i += 1
            continue
        if is_loglike(line):
            cue_pending = False
            i += 1
            continue
        spans = []
        for m in _DQUOTED.finditer(line):
            _add(out, i, m.group(1) or m.group(2) or "", "quotes")
            spans.append(m.span())
        for m in _ESCAPED.finditer(line):
            # not through _add: the decoded output is whitespace, which is the point
            decoded = "".join(_ESCAPE_OF[m.group(2)[k:k + 2]] for k in range(0, len(m.group(2)), 2))
            out.append(Quoted(i + 1, decoded, "escapes"))
            spans.append(m.span())
        for m in _RUN_TOKEN.finditer(line):
            run = _run(m.group(0))
            if run and not any(a <= m.start() < b for a, b in spans):  # a quoted run is a quote already
                _add(out, i, run, "run")
        speaker = _SPEAKER.match(line)
        if speaker:
            _add(out, i, speaker.group("rest"), "speaker")
            i += 1
            continue
        cue = (_CUE.search(line) or _CUE_TRAILING.search(line) or _CUE_BELOW.search(line)
               or _CUE_ALONE.search(line))
        if cue:
            rest = cue.groupdict().get("rest") or ""
            named = bool(_NAMED_GARBAGE.search(line))
            if rest.strip():
                code = _INLINE_CODE.match(rest)
                _add(out, i, code.group(1) if code else rest, "cue")
                cue_pending = False
            else:
                # the paragraph under the cue (or the fence right after it)
                j = i + 1
                while j < n and not clean[j].strip() and j not in fences:
                    j += 1
                if j < n and j in fences:
                    cue_pending = True
                    i = j
                    continue
                k = j
                while (k < n and clean[k].strip() and k not in fenced and not clean[k].lstrip().startswith("#")
                       and not _REPL.match(raw[k])):
                    k += 1
                body = clean[j:k]
                if body and not _mostly_log(body):
                    _add(out, j, "\n".join(body), "cue", named)
                i = max(k, i + 1)
                cue_pending = False
                continue
        i += 1
    return out


def _run(token: str) -> str | None:
    """The token when it is one character repeated (surrounding quotes, brackets and a trailing full stop or
    "'s" taken off), else None."""
    t = token.strip("\"'`“”‘’()[]")
    if len(t) > 1 and t[-1] in ".,;:" and t[-1] != t[0]:
        t = t[:-1]
    for tail in ("'s", "’s"):
        if t.endswith(tail):
            t = t[: -len(tail)]
    if len(t) < MIN_RUN or t[0] in _NOT_RUN or t[0].isdigit() or t[0].isspace():
        return None
    return t if t == t[0] * len(t) else None


def _log_tail(out: list[Quoted], body: list[str], first: int, named: bool) -> None:
    """A cued fence that is mostly a tool's log: the text after its last log line is what the tool generated
    (llama.cpp's examples print their log, then the prompt and the generated text)."""
    last = max((k for k, ln in enumerate(body) if ln.strip() and is_loglike(ln)), default=-1)
    if last < 0:
        return
    k = last + 1
    while k < len(body) and (not body[k].strip() or _TOOL_LINE.match(body[k])):
        k += 1
    tail = body[k:]
    if tail and not _mostly_log(tail):
        _add(out, first + k, "\n".join(tail), "fence", named)

