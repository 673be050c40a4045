"""A tolerant reader for ``nvidia-smi -q -x``: per-GPU leaf values keyed by their tag path.

Deliberately not an XML parser: the input is an untrusted file a user attached to a ticket, it may be
truncated (a tail-biased read) or carry a DOCTYPE, and all that is needed is ``<tag>value</tag>`` leaves.
One linear scan over tags, no entity expansion, never raises.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(
    r"<(?P<close>/?)(?P<tag>[A-Za-z_][\w.-]{0,80})(?P<attrs>[^<>]{0,300}?)(?P<selfclose>/?)>|(?P<text>[^<]{1,4096})"
)
_GPU_ID = re.compile(r'\bid="(?P<id>[^"]{1,40})"')


def is_nvsmi_xml(text: str) -> bool:
    return "<nvidia_smi_log" in text[:200_000]


def gpus(text: str) -> dict[str, dict[str, tuple[str, int]]]:
    """{bus id: {"ecc_errors/volatile/dram_uncorrectable": ("0", line index), ...}} for every <gpu>."""
    out: dict[str, dict[str, tuple[str, int]]] = {}
    stack: list[str] = []
    gpu_id: str | None = None
    gpu_depth = 0
    pending_text = ""
    line = 0
    last_pos = 0
    for m in _TOKEN.finditer(text):
        line += text.count("\n", last_pos, m.start())
        last_pos = m.start()
        if m.group("text") is not None:
            pending_text = m.group("text").strip()
            continue
        tag = m.group("tag")
        if m.group("close"):
            if stack and stack[-1] == tag:
                if gpu_id is not None and len(stack) > gpu_depth and pending_text:
                    path = "/".join(stack[gpu_depth:])
                    out[gpu_id][path] = (pending_text, line)
                stack.pop()
            elif tag in stack:
                # Unbalanced input: unwind to the matching open tag instead of failing.
                while stack and stack[-1] != tag:
                    stack.pop()
                if stack:
                    stack.pop()
            if gpu_id is not None and len(stack) < gpu_depth:
                gpu_id = None
            pending_text = ""
            continue
        if m.group("selfclose"):
            pending_text = ""
            continue
        stack.append(tag)
        pending_text = ""
        if tag == "gpu" and gpu_id is None:
            idm = _GPU_ID.search(m.group("attrs") or "")
            gpu_id = idm.group("id") if idm else f"gpu{len(out)}"
            gpu_depth = len(stack)
            out.setdefault(gpu_id, {})
        if len(stack) > 64:
            # Pathological nesting is not nvidia-smi output; stop tracking depth rather than grow forever.
            stack = stack[:64]
    return out
