"""py-spy dump stacks (and faulthandler tracebacks): a worker stuck in a collective vs an idle worker."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from llm_oncall.evidence.model import Finding, compact, line_numbers, split_lines

_PROCESS = re.compile(r"^Process (?P<pid>\d{1,10}): (?P<cmd>.{0,200})")
# py-spy: 'Thread 1234 (idle): "MainThread"', 'Thread 0x7F3A2B (active+gil): "Thread-1"'
_THREAD = re.compile(
    r"^Thread (?P<tid>0x[0-9A-Fa-f]{1,20}|\d{1,20}) \((?P<state>[a-z+]{1,20})\)"
    r"(?:: \"(?P<tname>[^\"]{0,100})\")?"
)
# faulthandler / py-spy --native free form: 'Thread 0x00007f... (most recent call first):'
_FH_THREAD = re.compile(r"^(?:Current thread|Thread) (?P<tid>0x[0-9A-Fa-f]{1,20}) \(most recent call first\)")
# py-spy frame: '    all_reduce (torch/distributed/distributed_c10d.py:2050)', 'ncclAllReduce (libnccl.so)'
_FRAME = re.compile(r"^\s{2,}(?P<func>[A-Za-z_<][\w.<>:~-]{0,200}) \((?P<loc>[^()]{0,300})\)\s*$")
# The same frame pasted without its "Thread N (...)" header (an issue quoting the interesting stack, often in a
# markdown fence, top frame at column 0): the location must name a Python file and line, or a shared object.
_LOOSE_FRAME = re.compile(r"^\s{0,8}(?P<func>[A-Za-z_<][\w.<>:~-]{0,200}) "
                          r"\((?P<loc>[^()]{0,300}\.py:\d{1,7}|[^()]{0,300}\.so(?:\.[\d.]{1,20})?)\)\s*$")
_LOOSE_ANY = re.compile(r"^\s{0,8}[A-Za-z_<][\w.<>:~-]{0,200} \([^()\n]{0,300}\.py:\d{1,7}\)[ \t]*$", re.M)
_FH_FRAME = re.compile(r'^\s{2,}File "(?P<loc>[^"]{0,300})", line \d{1,7} in (?P<func>[\w<>.]{1,200})')

_COLLECTIVE_FUNCS = frozenset(
    {
        "all_reduce",
        "all_gather",
        "all_gather_into_tensor",
        "_all_gather_base",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "_reduce_scatter_base",
        "broadcast",
        "all_to_all",
        "all_to_all_single",
        "barrier",
        "send",
        "recv_object",
        "custom_all_reduce",
        "_all_reduce_out_place",
        "all_reduce_reg",
        "all_reduce_unreg",
        "tensor_model_parallel_all_reduce",
        "tensor_model_parallel_all_gather",
        "ncclAllReduce",
        "ncclAllGather",
        "ncclBroadcast",
        "ncclReduceScatter",
        "ncclGroupEnd",
        "ncclSend",
        "ncclRecv",
        # vLLM V1's engine core waiting for its workers' step (MultiprocExecutor.collective_rpc): the engine side
        # of a stuck worker, read like a rank sitting in a collective
        "get_response",
        "_wait_for_response",
    }
)
# Where an idle worker parks: the shm message queue, a selector, a condition variable.
_IDLE_FUNCS = frozenset(
    {
        "dequeue",
        "acquire_read",
        "wait",
        "wait_for",
        "select",
        "poll",
        "epoll_wait",
        "busy_loop",
        "worker_busy_loop",
        "recv",
        "recv_multipart",
        "get",
        "sleep",
        "accept",
        "_recv",
        "read",
        "readinto",
        "_run_once",
        "run_forever",
        "serve_forever",
        "_worker",
    }
)
# An idle V0 worker waits for the driver's next step inside a CPU (gloo) broadcast: a collective by name,
# idle by meaning.
# SGLang's TP workers > 0 wait for the next batch the same way (recv_requests → broadcast_pyobj → broadcast).
_WORKER_WAIT_WRAPPERS = frozenset({"broadcast_tensor_dict", "broadcast_object", "broadcast_object_list",
                                   "broadcast_pyobj", "recv_requests"})
_WORKER_LOOPS = frozenset({"start_worker_execution_loop", "worker_busy_loop", "execute_model_spmd_loop",
                           "event_loop_normal", "event_loop_overlap", "event_loop_pp", "run_scheduler_process"})
_TOP_FRAMES = 15
_FH_ANY = re.compile(r'^\s{2,}File "[^"]{0,300}", line \d{1,7} in \w', re.M)


@dataclass
class _Thread:
    process: str
    tid: str
    name: str
    state: str
    line: int
    frames: list[str] = field(default_factory=list)
    headerless: bool = False
    faulthandler: bool = False

    def collective_frame(self) -> str | None:
        for func in self.frames[:_TOP_FRAMES]:
            short = func.rsplit(".", 1)[-1]
            if short in _COLLECTIVE_FUNCS:
                return None if self.worker_wait() else short
        return None

    def worker_wait(self) -> bool:
        names = {f.rsplit(".", 1)[-1] for f in self.frames}
        return bool(_WORKER_WAIT_WRAPPERS & names and _WORKER_LOOPS & names)

    def idle(self) -> bool:
        if not self.frames:
            return self.state == "idle"
        return self.frames[0].rsplit(".", 1)[-1] in _IDLE_FUNCS or self.worker_wait()


def _threads(lines: tuple[str, ...]) -> tuple[list[_Thread], int]:
    threads: list[_Thread] = []
    process = ""
    dumps = 0
    current: _Thread | None = None
    for i, line in enumerate(lines):
        if line.startswith("Process "):
            m = _PROCESS.match(line)
            if m:
                process = m.group("pid")
                dumps += 1
                current = None
                continue
        if line.startswith(("Thread ", "Current thread ")):
            mt = _THREAD.match(line)
            if mt:
                current = _Thread(process, mt.group("tid"), mt.group("tname") or "", mt.group("state"), i)
                threads.append(current)
                continue
            mf = _FH_THREAD.match(line)
            if mf:
                current = _Thread(process, mf.group("tid"), "", "unknown", i)
                threads.append(current)
                continue
        if line.startswith("  ") and not (current is not None and current.headerless):
            fm = _FRAME.match(line) if current is not None else None
            fm = fm or _FH_FRAME.match(line)
            if fm and current is None:
                # A faulthandler dump pasted without its "Thread 0x... (most recent call first):" header.
                current = _Thread(process, "?", "", "unknown", i, faulthandler=True)
                threads.append(current)
            if fm and current is not None:
                current.frames.append(fm.group("func"))
                continue
        if current is None or current.headerless:
            # py-spy frames without a header: each contiguous run of frames is one stack; any other line
            # (prose, a markdown fence) ends it.
            lm = _LOOSE_FRAME.match(line)
            if lm:
                if current is None:
                    current = _Thread(process, "?", "", "unknown", i, headerless=True)
                    threads.append(current)
                current.frames.append(lm.group("func"))
            elif current is not None:
                current = None
    # A lone "name (file.py:12)" line is no stack.
    return [t for t in threads if not t.headerless or len(t.frames) >= 2], dumps


def parse(text: str, name: str) -> Finding | None:
    if "Thread " not in text and not _FH_ANY.search(text) and len(_LOOSE_ANY.findall(text)) < 2:
        return None
    lines = split_lines(text)
    threads, dumps = _threads(lines)
    threads = [t for t in threads if t.frames or t.state != "unknown"]
    if not threads:
        return None
    stuck = [(t, c) for t in threads for c in [t.collective_frame()] if c]
    facts_common: dict[str, object] = {"dumps": max(dumps, 1), "threads": len(threads)}
    if stuck:
        processes = sorted({t.process or "?" for t, _ in stuck})
        repeated = _repeated(stuck)
        confidence = 0.5
        if len(processes) > 1 or repeated:
            confidence = 0.75
        facts = {
            **facts_common,
            "stuck_threads": [
                compact({"process": t.process or None, "thread": t.name or t.tid, "in": c, "top": t.frames[0]})
                for t, c in stuck[:16]
            ],
            "collectives": sorted({c for _, c in stuck}),
            "processes_stuck": len(processes),
            "repeated_in_same_frame": repeated,
            "note": (
                "one dump can catch a busy worker inside a collective; a second dump seconds later "
                "showing the same frame confirms the hang"
            ),
        }
        return Finding(
            file=name,
            kind="pyspy_stuck_in_collective",
            benign=False,
            incident_hint="engine-hang",
            confidence=confidence,
            facts=facts,
            lines=line_numbers(t.line for t, _ in stuck),
            parser="pyspy",
            severity="error" if confidence >= 0.75 else "warning",
            category="hang",
        )
    if all(t.faulthandler for t in threads):
        # faulthandler's frames ('File "x.py", line 224 in _init_cache') without their header: Python printed them on
        # a fatal signal (a segfault, an abort) or a timeout; py-spy never writes this form, so a busy / idle reading
        # does not apply. Which one the header said is not in the excerpt: a failure of unknown cause.
        return Finding(
            file=name,
            kind="python_stack_dump",
            benign=False,
            incident_hint=None,
            confidence=0.3,
            facts={
                **facts_common,
                "top_frames": sorted({t.frames[0] for t in threads if t.frames})[:12],
                "reading": "Python's faulthandler printed the stack (it does on a fatal signal or a timeout); its "
                           "header, which says which, is not in the excerpt: a process failed",
                "next_step": "find the line above the stack ('Fatal Python error: …' or 'Timeout (0:05:00)!')",
            },
            lines=line_numbers(t.line for t in threads),
            parser="pyspy",
            severity="warning",
            category="other-failure",
        )
    idle = [t for t in threads if t.idle()]
    all_idle = len(idle) == len(threads)
    return Finding(
        file=name,
        kind="pyspy_idle" if all_idle else "pyspy_busy",
        benign=True,
        incident_hint=None,
        confidence=0.7 if all_idle else 0.4,
        facts={
            **facts_common,
            "idle_threads": len(idle),
            "top_frames": sorted({t.frames[0] for t in threads if t.frames})[:12],
        },
        parser="pyspy",
        severity="info",
        category="benign",
    )


def _repeated(stuck: list[tuple[_Thread, str]]) -> bool:
    """The same thread in the same collective in two separate dumps: the hang is no snapshot artefact."""
    seen: dict[tuple[str, str], int] = {}
    for t, c in stuck:
        key = (t.process + "/" + t.tid, c)
        seen[key] = seen.get(key, 0) + 1
    return any(n > 1 for n in seen.values())
