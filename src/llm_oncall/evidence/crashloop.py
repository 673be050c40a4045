"""Container exit reasons from ``kubectl describe pod`` / ``kubectl get pods`` / pod events."""

from __future__ import annotations

import re
from collections import Counter

from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines

_REASON = re.compile(r"^\s{0,20}Reason:\s{1,40}(?P<reason>[A-Za-z]{1,40})\s*$")
_EXIT = re.compile(r"^\s{0,20}Exit Code:\s{1,40}(?P<code>\d{1,3})\s*$")
_RESTARTS = re.compile(r"^\s{0,20}Restart Count:\s{1,40}(?P<n>\d{1,9})\s*$")
_READY = re.compile(r"^\s{0,20}Ready:\s{1,40}(?P<ready>True|False)\s*$")
# kubectl get pods: NAME READY STATUS RESTARTS AGE (kubectl get all prints the name as pod/NAME)
_GET_ROW = re.compile(
    r"^(?:pod/)?(?P<pod>[a-z0-9][a-z0-9.-]{0,252})\s{1,40}(?P<ready>\d{1,3}/\d{1,3})\s{1,40}(?P<status>[A-Za-z:]{1,40})"
    r"\s{1,40}(?P<restarts>\d{1,9})(?: \((?P<ago>(?:\d{1,5}[dhms]){1,3}) ago\))?"
)
# The other half of the cuda-graph-crash signature: capture lines or frames in the same file (the container
# log pasted under the pod status). Without them a crash loop is only a crash loop (a probe kill, a bad flag).
_CAPTURE = re.compile(r"capturing (?:cuda)? ?graph|cuda ?graph capture|cudagraph|cuda_graph_runner|capture_model|"
                      r"capture cuda graph|graph capture|torch/cuda/graphs\.py|capture_end|capture_begin", re.I)
# A restart this recent on a Running pod is still news: kubectl prints "3 (6m29s ago)".
RECENT_RESTART_S = 3600
_UNIT_S = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def _seconds(ago: str) -> int:
    return sum(int(n) * _UNIT_S[u] for n, u in re.findall(r"(\d+)([dhms])", ago))
_BACKOFF = re.compile(r"Back-off restarting failed container")
_LIVENESS = re.compile(r"Liveness probe failed")
_BAD_STATUS = frozenset({"CrashLoopBackOff", "OOMKilled", "Error", "ContainerCannotRun", "StartError"})
_SIGNALS = {
    137: "SIGKILL (OOM killer or a probe/eviction kill)",
    139: "SIGSEGV (segfault)",
    134: "SIGABRT",
    143: "SIGTERM",
}


def _status(status: str) -> str:
    """kubectl prints an init container's state with an ``Init:`` prefix (``Init:CrashLoopBackOff``, ``Init:Error``,
    ``Init:OOMKilled``): the pod's init container is failing, so the pod never starts; read it as the state itself.
    ``Init:0/1`` (init containers still running) keeps its prefix and is no failure."""
    return status.removeprefix("Init:")


def parse(text: str, name: str) -> Finding | None:
    if not any(k in text for k in ("CrashLoopBackOff", "OOMKilled", "Exit Code", "Back-off restarting", "RESTARTS")):
        return None
    reasons: Counter[str] = Counter()
    exit_codes: Counter[int] = Counter()
    restarts = 0
    not_ready = False
    pods: dict[str, str] = {}
    restarted: dict[str, int] = {}
    backoff = 0
    liveness = 0
    ev: list[int] = []
    for i, line in enumerate(split_lines(text)):
        if m := _REASON.match(line):
            r = m.group("reason")
            if r in _BAD_STATUS or r == "Completed":
                reasons[r] += 1
                ev.append(i)
        elif m := _EXIT.match(line):
            code = int(m.group("code"))
            if code:
                exit_codes[code] += 1
                ev.append(i)
        elif m := _RESTARTS.match(line):
            restarts = max(restarts, int(m.group("n")))
        elif m := _READY.match(line):
            not_ready |= m.group("ready") == "False"
        elif (m := _GET_ROW.match(line)) and _status(m.group("status")) in _BAD_STATUS:
            pods[m.group("pod")] = m.group("status")
            reasons[_status(m.group("status"))] += 1
            restarts = max(restarts, int(m.group("restarts")))
            not_ready |= m.group("ready").startswith("0/")
            ev.append(i)
        elif m and m.group("status") == "Running" and int(m.group("restarts")) and m.group("ago") \
                and _seconds(m.group("ago")) <= RECENT_RESTART_S:
            restarted[m.group("pod")] = int(m.group("restarts"))
            restarts = max(restarts, int(m.group("restarts")))
            ev.append(i)
        elif _BACKOFF.search(line):
            backoff += 1
            ev.append(i)
        elif _LIVENESS.search(line):
            liveness += 1
            ev.append(i)
    if not (set(reasons) - {"Completed"}) and not exit_codes and not backoff and not restarted:
        return None
    oom = "OOMKilled" in reasons
    crashloop = "CrashLoopBackOff" in reasons or backoff > 0
    facts = compact(
        {
            "reasons": dict(reasons),
            "exit_codes": {str(c): n for c, n in exit_codes.items()},
            "signals": [_SIGNALS[c] for c in exit_codes if c in _SIGNALS],
            "restart_count": restarts or None,
            "never_ready": not_ready or None,
            "pods": pods,
            "restarted_recently": restarted,
            "backoff_events": backoff or None,
            "liveness_failures": liveness or None,
        }
    )
    hint: str | None = None
    confidence = 0.6
    if oom:
        kind = "oom_killed"
        facts["reading"] = (
            "container memory limit hit (host RAM, not GPU memory); a first restart can seed a retry storm"
        )
        confidence = 0.7
    elif liveness and 137 in exit_codes:
        kind = "liveness_killed"
        hint, confidence = "engine-hang", 0.35
        facts["reading"] = "killed by the liveness probe: the engine stopped answering or stopped making progress"
    elif crashloop:
        kind = "crashloop"
        confidence = 0.4
        if not_ready and restarts >= 3 and 137 not in exit_codes and _CAPTURE.search(text):
            # Crash-looping without ever becoming Ready is half the cuda-graph-crash signature; the other
            # half is capture evidence in the same file, and even then stay tentative. Without it (aibrix#1054:
            # a startup probe killing a slow-loading server) the loop names no cause.
            hint, confidence = "cuda-graph-crash", 0.3
        facts["next_step"] = "kubectl logs --previous for the first error before exit"
    elif reasons or exit_codes:
        kind = "container_exit"
        confidence = 0.4
    else:
        kind = "container_restarts"
        confidence = 0.3
        facts["reading"] = ("a Running pod restarted recently: its previous container failed; it may have "
                            "recovered, the previous log says why")
        facts["next_step"] = "kubectl logs --previous for the first error before exit"
    # A crash loop is the symptom, the container log holds the cause: it ranks below any finding of the cause.
    return Finding(name, kind, False, hint, confidence, facts, line_numbers(ev), "crashloop", severity="warning",
                   category="cuda-graph" if hint == "cuda-graph-crash" else "hang" if hint else "other-failure")
