"""Secrets in the service config: a value given inline, or as `{file: PATH}` / `{env: NAME}` (a mounted Kubernetes
Secret or an environment variable), read once when the config is loaded. Errors name the file or variable, never
the value."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def resolve(value: Any, what: str) -> str:
    """The secret's text: a string as given, `{file: PATH}` the file's content (one trailing newline dropped, as a
    Secret mounted from `kubectl create secret --from-file` often has), `{env: NAME}` the variable's value."""
    pre = f"{what}: " if what else ""
    if isinstance(value, str):
        return value
    if not isinstance(value, dict) or len(value) != 1 or next(iter(value)) not in ("file", "env"):
        raise ValueError(f"{pre}expected a string, {{file: PATH}} or {{env: NAME}}")
    (key, ref), = value.items()
    if not isinstance(ref, str) or not ref:
        raise ValueError(f"{pre}{key} must be a non-empty string")
    if key == "env":
        if not _ENV_NAME.fullmatch(ref):
            raise ValueError(f"{pre}{ref!r} is not an environment variable name")
        text = os.environ.get(ref)
        if text is None:
            raise ValueError(f"{pre}environment variable {ref} is not set")
    else:
        try:
            text = Path(ref).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{pre}cannot read {ref} ({exc.strerror or exc})") from None
        text = text.removesuffix("\n").removesuffix("\r")
    if not text.strip():
        raise ValueError(f"{pre}the {'file' if key == 'file' else 'variable'} {ref} is empty")
    return text
