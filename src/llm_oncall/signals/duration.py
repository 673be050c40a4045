"""One duration syntax for every command, config key and flag: `500ms`, `30s`, `2m`, `1h`, `1.5d`, or a plain
number of seconds."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|m|h|d)?\s*$")
_SCALE = {None: 1.0, "ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: str) -> float:
    """Seconds; ValueError (with the accepted forms) on anything else."""
    m = _DURATION.match(value.lower()) if isinstance(value, str) else None
    if m is None:
        raise ValueError(f"invalid duration {value!r}: use e.g. 500ms, 30s, 2m, 1h or a number of seconds")
    return float(m.group(1)) * _SCALE[m.group(2)]
