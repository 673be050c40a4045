"""A real vLLM `/metrics` page that advances like a live server: the sample values are rewritten in place on the
real text, so every name, label, bucket edge and line stays exactly the real server's.

`LivePage(text)` reads the page once (its `# TYPE` lines say which samples are counters, histograms or summaries)
and `advance(f)` adds one interval of traffic: every counter, histogram bucket, `_count` and `_sum` grows by its
value on the captured page times `f` (integer samples by whole units, so cumulative buckets stay monotone and
`_count` equals the `+Inf` bucket); gauges and `_created` stay as captured unless `set` overrides them.  A fleet
of pods is one `LivePage` per pod, each with its own traffic factor.  Values are written the way the Python
client (which vLLM uses) writes them.

The captured page (package data, `llm_oncall/data/pages/vllm-0.32.0-cpu-loaded.prom`) is
tests/real_engine/data/vllm-cpu-loaded.prom: a real vLLM 0.32 CPU server under load (docs/real-engine.md,
"Overload with a small KV pool"), written by the real-engine tier.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from importlib import resources
from typing import cast

from prometheus_client.utils import floatToGoString

LOADED_PAGE = "vllm-0.32.0-cpu-loaded.prom"
_SAMPLE = re.compile(r"^(?P<key>(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?) (?P<value>\S+)$")
_TYPE = re.compile(r"^# TYPE (\S+) (\S+)")
_go_float = cast(Callable[[float], str], floatToGoString)
"""How the Python client writes a sample value."""


def bundled(name: str = LOADED_PAGE) -> str:
    return (resources.files("llm_oncall") / "data" / "pages" / name).read_text(encoding="utf-8")


def _grows(name: str, types: dict[str, str]) -> bool:
    """Counters and the parts of histograms and summaries grow; gauges (and `_created` stamps) do not."""
    if name.endswith("_created"):
        return False
    if types.get(name) == "counter" or (name.endswith("_total") and types.get(name[:-6]) == "counter"):
        return True
    for suffix in ("_bucket", "_count", "_sum"):
        if name.endswith(suffix) and types.get(name[: -len(suffix)]) in ("histogram", "summary"):
            return True
    return False


class LivePage:
    def __init__(self, text: str) -> None:
        types: dict[str, str] = {}
        self._parts: list[str] = []
        self._slot: dict[str, int] = {}
        """Sample key (name and label text, as on the page) → index of its value in `_parts`."""
        self.values: list[float] = []
        self._base: list[float] = []
        self._integral: list[bool] = []
        self._grow: list[int] = []
        """Indexes into `values` of the samples that grow."""
        self._slots: list[int] = []
        for line in text.splitlines():
            m = _SAMPLE.match(line) if not line.startswith("#") else None
            if m is None:
                t = _TYPE.match(line)
                if t:
                    types[t.group(1)] = t.group(2)
                self._parts.append(line + "\n")
                continue
            value = float(m.group("value"))
            i = len(self.values)
            self._slot[m.group("key")] = i
            self.values.append(value)
            self._base.append(value)
            self._integral.append(value == int(value) if math.isfinite(value) else False)
            if _grows(m.group("name"), types):
                self._grow.append(i)
            self._parts.append(m.group("key") + " ")
            self._slots.append(len(self._parts))
            self._parts.append(m.group("value") + "\n")

    def keys(self) -> list[str]:
        return list(self._slot)

    def set(self, key: str, value: float) -> None:
        """A sample's value (`name{labels}` exactly as on the page)."""
        i = self._slot[key]
        self.values[i] = value
        self._parts[self._slots[i]] = _go_float(value) + "\n"

    def hold(self, name: str) -> None:
        """The samples of metric `name` stop growing (e.g. no more preemptions)."""
        drop = {i for key, i in self._slot.items() if key == name or key.startswith(name + "{")}
        self._grow = [i for i in self._grow if i not in drop]

    def advance(self, f: float) -> None:
        """One interval of traffic: each growing sample adds `f` times its value on the captured page."""
        values, base, integral, parts, slots = self.values, self._base, self._integral, self._parts, self._slots
        for i in self._grow:
            inc = base[i] * f
            if integral[i]:
                inc = math.floor(inc)
            if inc:
                values[i] += inc
                parts[slots[i]] = _go_float(values[i]) + "\n"

    def render(self) -> str:
        return "".join(self._parts)
