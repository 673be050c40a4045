"""OpenAPI documents kubectl reads (`/openapi/v3`): which verbs each kind's paths take and their query
parameters (kubectl checks that PATCH accepts `dryRun` before `--dry-run=server`)."""

from __future__ import annotations

from typing import Any


def document(parts: list[str], query: dict[str, str]) -> dict[str, Any] | None:
    return None
