"""vLLM start-up failures: configuration and argument errors that stop a server before it serves.

A server that never comes up leaves only its log: a pydantic ``ValidationError`` for a config class (e.g.
``max_model_len`` above what the model allows), an engine core that "failed to start" with the root cause above
``RuntimeError: Engine core initialization failed`` (e.g. a KV pool too small for one max-length request), or an
argparse ``error:`` line (an unknown flag). The finding names the error so a crash loop can be explained; it
points at no incident (a bad config is not a CUDA-graph crash), and it is never benign.
"""

from __future__ import annotations

import re

from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines

# "(EngineCore pid=17889) ERROR 11-30 05:51:58 [core.py:1510] " — the process tag and the log header.
_PREFIX = re.compile(
    r"^(?:\((?:[A-Za-z_:]{1,40}) pid=\d{1,10}\)\s{1,4})?"
    r"(?:(?:ERROR|CRITICAL|WARNING|INFO|DEBUG)\s{1,4}\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?\s{1,4}\[[^\]]{1,80}\]\s?)?"
)
_VALIDATION = re.compile(r"ValidationError: (?P<n>\d{1,4}) validation errors? for (?P<cls>[A-Za-z_][A-Za-z0-9_]{0,80})")
_VALUE_ERROR = re.compile(r"^\s{0,8}(?:Value|Assertion) error, (?P<msg>.{1,2000})")
_ARGPARSE = re.compile(r"^(?P<prog>[A-Za-z0-9_.\-]{1,80}): error: (?P<msg>.{1,2000})$")
_USAGE = re.compile(r"^usage: [A-Za-z0-9_.\-]{1,80} ")
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][A-Za-z0-9_]{0,60}\.){0,6}(?P<type>[A-Za-z_][A-Za-z0-9_]{0,60}(?:Error|Exception)): "
    r"(?P<msg>.{1,2000})$"
)
# vLLM ≥0.29 also says it of an API-server process: "Frontend process failed during engine core initialization. See
# root cause above. Failed frontend proc(s): [...]" (v1/engine/utils.py); V0's API server said "Engine process failed
# to start. See stack trace for the root cause." (entrypoints/openai/api_server.py; round 3zg)
_WRAPPERS = ("Engine core initialization failed", "EngineCore failed to start",
             "Frontend process failed during engine core initialization", "Engine process failed to start")
_ENGINE_INIT_FAILED = re.compile("|".join(re.escape(w) for w in _WRAPPERS))
_VLLM_MARKERS = ("vllm", "vLLM", "EngineCore", "APIServer pid=")
MAX_MESSAGE = 400


def _strip(line: str) -> str:
    return _PREFIX.sub("", line, count=1).rstrip()


def _message(msg: str) -> str:
    msg = msg.strip()
    # pydantic appends "[type=value_error, input_value=..., input_type=...]": noise for a report.
    cut = msg.find(" [type=")
    if cut > 0:
        msg = msg[:cut]
    return msg if len(msg) <= MAX_MESSAGE else msg[: MAX_MESSAGE - 1] + "…"


def parse(text: str, name: str) -> Finding | None:
    if not any(m in text for m in _VLLM_MARKERS):
        return None
    if not any(k in text for k in ("ValidationError", ": error: ", *_WRAPPERS)):
        return None
    lines = split_lines(text)
    # (line, phase, exception type, message, config class); the last start-up attempt wins.
    errors: list[tuple[int, str, str, str, str | None]] = []
    engine_failed: list[int] = []
    pending_validation: tuple[int, str] | None = None
    usage_seen = False
    for i, raw in enumerate(lines):
        line = _strip(raw)
        if _USAGE.match(line):
            usage_seen = True
            continue
        if m := _VALIDATION.search(line):
            pending_validation = (i, m.group("cls"))
            continue
        if pending_validation is not None and (m := _VALUE_ERROR.match(line)):
            errors.append((i, "config", "ValidationError", _message(m.group("msg")), pending_validation[1]))
            pending_validation = None
            continue
        if usage_seen and (m := _ARGPARSE.match(line)):
            errors.append((i, "arguments", "ArgumentError", _message(m.group("msg")), None))
            continue
        if _ENGINE_INIT_FAILED.search(line):
            engine_failed.append(i)
            continue
        if engine_failed and (m := _EXCEPTION.match(line)):
            msg = m.group("msg")
            if not any(w in msg for w in _WRAPPERS):
                errors.append((i, "engine_init", m.group("type"), _message(msg), None))
    if not errors:
        if not engine_failed:
            return None
        return Finding(name, "vllm_startup_error", False, None, 0.6,
                       {"error": "engine core initialization failed (root cause not in this log)",
                        "phase": "engine_init", "attempts": _attempts(lines)},
                       line_numbers(engine_failed[-3:]), "vllm_startup", severity="error")
    last = errors[-1]
    distinct = sorted({e[3] for e in errors})
    facts = compact({
        "error": last[3],
        "exception": last[2],
        "phase": last[1],
        "config": last[4],
        "attempts": _attempts(lines),
        "other_errors": [e for e in distinct if e != last[3]][:3],
        "reading": "vLLM exited during start-up on a configuration error; the server never served "
                   "(not a CUDA-graph or GPU fault)",
    })
    return Finding(name, "vllm_startup_error", False, None, 0.8, facts,
                   line_numbers([e[0] for e in errors[-5:]] + engine_failed[-2:]), "vllm_startup", severity="error")


def _attempts(lines: tuple[str, ...]) -> int | None:
    """Start-up attempts in the log (vLLM's banner or version line once per start), if it says."""
    n = sum(1 for line in lines if "vLLM API server version" in line or ("version " in line and "▄▄ ▄█" in line))
    return n or None
