"""The service's YAML config (DESIGN §3), validated with pydantic; errors name the key and what is expected."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from llm_oncall.probe.server import parse_duration

Role = Literal["webhook", "api", "approve"]
ROLES: tuple[str, ...] = ("webhook", "api", "approve", "override")


class ConfigError(ValueError):
    """The config file is unreadable or invalid; the message says where and why."""


def _duration(v: Any, what: str) -> float:
    if isinstance(v, bool):
        raise ValueError(f"{what}: expected a duration like 15s, 2m or a number of seconds")
    if isinstance(v, int | float):
        seconds = float(v)
    elif isinstance(v, str):
        seconds = parse_duration(v)
    else:
        raise ValueError(f"{what}: expected a duration like 15s, 2m or a number of seconds")
    if seconds <= 0:
        raise ValueError(f"{what}: must be > 0")
    return seconds


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SimSourceConfig(_Strict):
    pods: int | None = Field(None, ge=1, le=64, description="default: the fault scenario's fleet (the drill's), else 4")
    fault: str | None = None
    at: float | None = Field(None, ge=0, description="fault onset, simulated seconds")
    seed: int = 0
    step: float = Field(15.0, gt=0, description="simulated seconds per loop round (the scrape interval it sees)")
    rate_per_pod: float | None = Field(None, gt=0)

    @field_validator("fault")
    @classmethod
    def _fault(cls, v: str | None) -> str | None:
        from llm_oncall.incident_ids import FAULTS

        if v is not None and v not in FAULTS:
            raise ValueError(f"unknown fault {v!r}; one of {', '.join(FAULTS)}")
        return v


class SourceConfig(_Strict):
    sim: SimSourceConfig | None = None
    prometheus: str | None = None
    selector: str = ""
    targets: list[str] | None = None
    file_sd: Path | None = None

    @model_validator(mode="after")
    def _one(self) -> SourceConfig:
        given = [k for k in ("sim", "prometheus", "targets", "file_sd") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of sim, prometheus, targets or file_sd"
                             + (f" (got {', '.join(given)})" if given else ""))
        if self.selector and self.prometheus is None:
            raise ValueError("selector goes with prometheus")
        if self.prometheus is not None and not self.prometheus.startswith(("http://", "https://")):
            raise ValueError("prometheus: expected an http:// or https:// URL")
        if self.targets is not None and not self.targets:
            raise ValueError("targets: give at least one URL")
        return self

    @property
    def kind(self) -> str:
        return next(k for k in ("sim", "prometheus", "targets", "file_sd") if getattr(self, k) is not None)


class AuthConfig(_Strict):
    webhook: list[str] = Field(default_factory=list)
    api: list[str] = Field(default_factory=list)
    approve: list[str] = Field(default_factory=list)
    override: list[str] = Field(default_factory=list)
    """Approvers who may approve a guard-blocked action, with a reason (audited); they also hold `approve`."""

    @field_validator("webhook", "api", "approve", "override")
    @classmethod
    def _tokens(cls, v: list[str]) -> list[str]:
        for t in v:
            if not isinstance(t, str) or len(t) < 16 or not re.fullmatch(r"[A-Za-z0-9._~+/=-]+", t):
                raise ValueError("tokens are ≥ 16 characters of [A-Za-z0-9._~+/=-] (bearer token syntax)")
        return v

    def roles(self, token: str) -> set[str]:
        return {r for r in ROLES if token in getattr(self, r)}


class NotifyConfig(_Strict):
    kind: Literal["webhook", "slack"]
    url: str
    retries: int = Field(5, ge=0, le=20)
    timeout: float = Field(5.0, gt=0, le=60)

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("expected an http:// or https:// URL")
        return v


class LeaderElectionConfig(_Strict):
    """Several replicas, one Lease (service/leader.py): only its holder acts."""

    enabled: bool = False
    lease_name: str = "llm-oncall"
    namespace: str | None = Field(default=None, description="default: the service's namespace (kubeconfig or pod)")
    duration_s: int = Field(default=15, ge=1, le=3600, description="leaseDurationSeconds: a follower takes over after "
                            "observing no renew for this long")
    renew_s: float | None = Field(default=None, gt=0, description="renew (and retry) period; default duration_s / 3")
    identity: str | None = Field(default=None, max_length=128, description="default: $POD_NAME or the hostname, plus a "
                                 "per-process suffix")

    @field_validator("lease_name", "namespace")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 63 or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", v)):
            raise ValueError("expected a DNS-1123 label (lower-case letters, digits and '-', ≤ 63)")
        return v

    @model_validator(mode="after")
    def _periods(self) -> LeaderElectionConfig:
        if self.renew_s is None:
            self.renew_s = self.duration_s / 3
        if not self.renew_s < self.duration_s / 2:
            raise ValueError(f"renew_s ({self.renew_s:g}) must be < duration_s / 2 ({self.duration_s / 2:g}): the "
                             "leader stops acting after duration_s - renew_s without a renew")
        return self

    @property
    def renew(self) -> float:
        assert self.renew_s is not None
        return self.renew_s


class ServiceConfig(_Strict):
    listen: str = "127.0.0.1:8080"
    db: Path = Path("incidents.db")
    source: SourceConfig
    interval: float = 15.0
    mode: Literal["propose", "approve", "auto"] = "propose"
    policy: Path | None = None
    kubeconfig: Path | None = None
    namespace: str | None = None
    auth: AuthConfig = Field(default_factory=AuthConfig)
    notify: list[NotifyConfig] = Field(default_factory=list)
    max_body_bytes: int = Field(1 << 20, ge=1024, le=64 << 20)
    resolve_after: int = Field(3, ge=1, description="rounds with no page before an incident is resolved")
    kube_timeout: float = 5.0
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    in_cluster: bool = Field(False, description="talk to the cluster as the pod's service account (no kubeconfig)")
    leader_election: LeaderElectionConfig = Field(default_factory=lambda: LeaderElectionConfig())

    @field_validator("interval", "kube_timeout", mode="before")
    @classmethod
    def _dur(cls, v: Any) -> float:
        return _duration(v, "duration")

    @field_validator("listen")
    @classmethod
    def _listen(cls, v: str) -> str:
        host, sep, port = v.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise ValueError("expected HOST:PORT, e.g. 127.0.0.1:8080")
        return v

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host.strip("[]"), int(port)


def load(path: Path) -> ServiceConfig:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of keys (listen, db, source, interval, mode, …)")
    try:
        cfg = ServiceConfig.model_validate(data)
    except ValidationError as exc:
        lines = [f"{path}: invalid config:"]
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"]) or "(top level)"
            lines.append(f"  {where}: {err['msg'].removeprefix('Value error, ')}")
        raise ConfigError("\n".join(lines)) from None
    base = path.parent
    # relative paths in the file are relative to the file
    for key in ("db", "policy", "kubeconfig"):
        p = getattr(cfg, key)
        if p is not None and not p.is_absolute():
            setattr(cfg, key, base / p)
    if cfg.source.file_sd is not None and not cfg.source.file_sd.is_absolute():
        cfg.source.file_sd = base / cfg.source.file_sd
    if cfg.leader_election.enabled and cfg.kubeconfig is None and not cfg.in_cluster \
            and cfg.source.sim is None:
        raise ConfigError(f"{path}: leader_election needs the cluster's API: set kubeconfig or in_cluster: true")
    if cfg.in_cluster and cfg.kubeconfig is not None:
        raise ConfigError(f"{path}: give kubeconfig or in_cluster, not both")
    if cfg.mode != "propose" and not (cfg.auth.approve or cfg.mode == "auto"):
        raise ConfigError(f"{path}: mode approve needs auth.approve tokens (nobody could approve)")
    return cfg
