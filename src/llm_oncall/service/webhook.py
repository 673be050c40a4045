"""The Alertmanager webhook v4 body, validated before anything is stored (label names and values included)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_FINGERPRINT = re.compile(r"^[0-9a-f]{1,32}$")
MAX_VALUE = 1024
MAX_ALERTS = 1000


def _labels(v: dict[str, str], what: str, multiline: bool = False) -> dict[str, str]:
    if len(v) > 128:
        raise ValueError(f"{what}: more than 128 entries")
    for k, val in v.items():
        if not _LABEL_NAME.match(k):
            raise ValueError(f"{what}: invalid label name {k[:80]!r}")
        limit = 16 * MAX_VALUE if multiline else MAX_VALUE
        if len(val) > limit:
            raise ValueError(f"{what}: value of {k} longer than {limit} characters")
        if not multiline and _CONTROL.search(val):
            raise ValueError(f"{what}: value of {k} has control characters")
    return v


def _time(v: str) -> str:
    try:
        datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"not an RFC 3339 time: {v[:40]!r}") from None
    return v


class Alert(BaseModel):
    model_config = ConfigDict(extra="allow")
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str] = Field(default_factory=dict)
    startsAt: str  # Alertmanager's spelling (camelCase)
    endsAt: str = ""
    generatorURL: str = ""
    fingerprint: str

    @field_validator("labels")
    @classmethod
    def _l(cls, v: dict[str, str]) -> dict[str, str]:
        return _labels(v, "labels")

    @field_validator("annotations")
    @classmethod
    def _a(cls, v: dict[str, str]) -> dict[str, str]:
        return _labels(v, "annotations", multiline=True)

    @field_validator("startsAt")
    @classmethod
    def _s(cls, v: str) -> str:
        return _time(v)

    @field_validator("endsAt")
    @classmethod
    def _e(cls, v: str) -> str:
        return _time(v) if v else v

    @field_validator("fingerprint")
    @classmethod
    def _f(cls, v: str) -> str:
        if not _FINGERPRINT.match(v):
            raise ValueError("fingerprint: expected 1–32 lowercase hex digits")
        return v


class Webhook(BaseModel):
    model_config = ConfigDict(extra="allow")
    version: Literal["4"]
    groupKey: str = Field(min_length=1, max_length=4096)
    status: Literal["firing", "resolved"]
    receiver: str = Field("", max_length=256)
    alerts: list[Alert] = Field(min_length=1, max_length=MAX_ALERTS)
    groupLabels: dict[str, str] = Field(default_factory=dict)
    commonLabels: dict[str, str] = Field(default_factory=dict)
    commonAnnotations: dict[str, str] = Field(default_factory=dict)
    externalURL: str = ""
    truncatedAlerts: int = Field(0, ge=0)

    @field_validator("groupLabels", "commonLabels")
    @classmethod
    def _gl(cls, v: dict[str, str]) -> dict[str, str]:
        return _labels(v, "groupLabels/commonLabels")

    @field_validator("groupKey")
    @classmethod
    def _gk(cls, v: str) -> str:
        if "\x00" in v:
            raise ValueError("groupKey has a NUL character")
        return v

    def alert_dicts(self) -> list[dict[str, Any]]:
        return [a.model_dump() for a in self.alerts]
