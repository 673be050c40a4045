"""The service's YAML config (docs/service.md), validated with pydantic; errors name the key and what is expected."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from llm_oncall.actions.model import UnsafeName, parse_selector
from llm_oncall.service import secrets
from llm_oncall.signals.duration import parse_duration

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

    @field_validator("webhook", "api", "approve", "override", mode="before")
    @classmethod
    def _resolve(cls, v: Any) -> Any:
        """Each token inline or `{file: PATH}` / `{env: NAME}` (a mounted Secret); the role itself may be one
        `{file: PATH}` / `{env: NAME}` holding several tokens, one a line."""
        if isinstance(v, dict):
            return [t.strip() for t in secrets.resolve(v, "").splitlines() if t.strip()]
        if isinstance(v, list):
            return [secrets.resolve(t, f"token {i + 1}") if isinstance(t, dict) else t for i, t in enumerate(v)]
        return v

    @field_validator("webhook", "api", "approve", "override")
    @classmethod
    def _tokens(cls, v: list[str]) -> list[str]:
        for t in v:
            if not isinstance(t, str) or len(t) < 16 or not re.fullmatch(r"[A-Za-z0-9._~+/=-]+", t):
                raise ValueError("tokens are ≥ 16 characters of [A-Za-z0-9._~+/=-] (bearer token syntax)")
        return v

    def roles(self, token: str) -> set[str]:
        return {r for r in ROLES if token in getattr(self, r)}


NOTIFY_KINDS: tuple[str, ...] = ("webhook", "slack", "teams", "mattermost", "pagerduty")
NOTIFY_EVENTS: tuple[str, ...] = ("opened", "diagnosis", "plan", "action", "effect", "status")
PAGERDUTY_EVENTS_URL = "https://events.pagerduty.com/v2/enqueue"


def _http_url(v: str, path_ok: bool = True) -> str:
    """An absolute http(s) URL with a host: no spaces or control characters, a valid port."""
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in v):
        raise ValueError("the URL contains spaces or control characters")
    parts = urlsplit(v)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("expected an http:// or https:// URL with a host")
    try:
        parts.port  # noqa: B018 — raises on a port out of range or not a number
    except ValueError:
        raise ValueError("invalid port") from None
    if not path_ok and (parts.query or parts.fragment):
        raise ValueError("expected a base URL without ?query or #fragment")
    return v


class NotifyConfig(_Strict):
    """One notification target (service/notify.py, service/notifiers/): a chat webhook or PagerDuty."""

    kind: Literal["webhook", "slack", "teams", "mattermost", "pagerduty"]
    url: str | None = Field(None, description="the incoming-webhook URL (a secret: inline, {file: PATH} or "
                            "{env: NAME}); pagerduty: the Events API v2 endpoint, default " + PAGERDUTY_EVENTS_URL)
    routing_key: SecretStr | None = Field(None, description="pagerduty: the integration key (32 characters), inline "
                                          "or {file: PATH} / {env: NAME}")
    console_url: str | None = Field(None, description="the console's public base URL: messages link to "
                                    "{console_url}/incidents/{id}; default: the service's own URL")
    events: list[Literal["opened", "diagnosis", "plan", "action", "effect", "status"]] | None = Field(
        None, description="only these events (default: all; pagerduty: opened, diagnosis, plan, status)")
    severities: dict[Literal["page", "warn", "none"], Literal["critical", "error", "warning", "info"]] | None = \
        Field(None, description="pagerduty: the diagnosis severity → PagerDuty severity (default page→critical, "
              "warn→warning, none→info)")
    retries: int = Field(5, ge=0, le=20)
    timeout: float = Field(5.0, description="seconds per HTTP attempt (a duration: 5s, 500ms)")
    queue_size: int = Field(1000, ge=1, le=100_000, description="messages waiting for this target before new ones "
                            "are dropped (counted, logged)")

    @field_validator("url", mode="before")
    @classmethod
    def _url_secret(cls, v: Any) -> Any:
        return None if v is None else secrets.resolve(v, "")  # the error's location names the key

    @field_validator("routing_key", mode="before")
    @classmethod
    def _key_secret(cls, v: Any) -> Any:
        return None if v is None else secrets.resolve(v, "")

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return None if v is None else _http_url(v)

    @field_validator("console_url")
    @classmethod
    def _console(cls, v: str | None) -> str | None:
        return None if v is None else _http_url(v, path_ok=False).rstrip("/")

    @field_validator("timeout", mode="before")
    @classmethod
    def _timeout(cls, v: Any) -> float:
        seconds = _duration(v, "timeout")
        if seconds > 60:
            raise ValueError("at most 60s")
        return seconds

    @model_validator(mode="after")
    def _per_kind(self) -> NotifyConfig:
        if self.kind == "pagerduty":
            if self.routing_key is None:
                raise ValueError("kind pagerduty needs routing_key (the Events API v2 integration key)")
            key = self.routing_key.get_secret_value()
            if not re.fullmatch(r"[A-Za-z0-9]{32}", key):
                raise ValueError("routing_key: expected the 32-character integration key (letters and digits)")
            if self.url is None:
                self.url = PAGERDUTY_EVENTS_URL
        else:
            if self.url is None:
                raise ValueError(f"kind {self.kind} needs url (its incoming-webhook URL)")
            for key_name in ("routing_key", "severities"):
                if getattr(self, key_name) is not None:
                    raise ValueError(f"{key_name} goes with kind pagerduty, not {self.kind}")
        if self.events is not None and not self.events:
            raise ValueError("events: give at least one event, or leave it out for all")
        return self

    @property
    def endpoint(self) -> str:
        assert self.url is not None  # set for every kind by _per_kind
        return self.url

    @property
    def label(self) -> str:
        """Where it goes without its secret: kind, scheme, host and port (webhook URLs carry their token in the
        path)."""
        parts = urlsplit(self.endpoint)
        return f"{self.kind} {parts.scheme}://{parts.netloc.rpartition('@')[2]}"


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


class SloConfig(_Strict):
    """The user-facing objectives the diagnosis judges symptoms against (beside each signal's own baseline); the
    same keys as `rules export --slo-*`."""

    ttft_p99: float | None = None
    itl_p99: float | None = None
    error_share: float | None = Field(None, gt=0, lt=1)

    @field_validator("ttft_p99", "itl_p99", mode="before")
    @classmethod
    def _dur(cls, v: Any) -> float | None:
        return None if v is None else _duration(v, "slo")


class ConsoleConfig(_Strict):
    """The web console's session: a token login gives a signed, HttpOnly, SameSite=Strict cookie."""

    session_secret: str | None = Field(
        default=None, min_length=32, description="signs session cookies (≥ 32 characters; inline, {file: PATH} or "
        "{env: NAME}); default: random per process, so a restart logs everyone out")
    session_ttl: float = Field(default=12 * 3600.0, gt=0,
                               description="a session lasts this long (seconds or a duration)")
    secure_cookie: Literal["auto", "always", "never"] = Field(
        default="auto", description="auto: Secure when the request came over https (or X-Forwarded-Proto: https)")

    @field_validator("session_secret", mode="before")
    @classmethod
    def _secret(cls, v: Any) -> Any:
        return None if v is None else secrets.resolve(v, "")

    @field_validator("session_ttl", mode="before")
    @classmethod
    def _ttl(cls, v: Any) -> float:
        return _duration(v, "duration")


class StormConfig(_Strict):
    """Event-storm suppression (incidents/storm.py): per node+GPU dedup, one incident per node per cooldown."""

    enabled: bool = True
    dedup_s: float = Field(default=300.0, gt=0)
    node_cooldown_s: float = Field(default=1800.0, ge=0)
    flush_s: float = Field(default=10.0, gt=0)

    @field_validator("dedup_s", "node_cooldown_s", "flush_s", mode="before")
    @classmethod
    def _dur(cls, v: Any) -> float:
        return _duration(v, "duration")


class ServiceConfig(_Strict):
    listen: str = "127.0.0.1:8080"
    db: Path = Path("incidents.db")
    source: SourceConfig
    interval: float = 15.0
    mode: Literal["propose", "approve", "auto"] = "propose"
    policy: Path | None = None
    kubeconfig: Path | None = None
    """A path, `{file: PATH}` (a mounted Secret) or `{env: NAME}` (the kubeconfig's YAML in a variable)."""
    namespace: str | None = None
    label_selector: str | None = Field(default=None, description="the fleet's label selector (key=value,…) in its "
                                       "namespace: only matching workloads and pods are acted on")
    auth: AuthConfig = Field(default_factory=AuthConfig)
    notify: list[NotifyConfig] = Field(default_factory=list)
    max_body_bytes: int = Field(1 << 20, ge=1024, le=64 << 20)
    resolve_after: int = Field(3, ge=1, description="rounds with no page before an incident is resolved")
    kube_timeout: float = 5.0
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    in_cluster: bool = Field(False, description="talk to the cluster as the pod's service account (no kubeconfig)")
    leader_election: LeaderElectionConfig = Field(default_factory=lambda: LeaderElectionConfig())
    slo: SloConfig = Field(default_factory=lambda: SloConfig(error_share=None))
    read_timeout: float = Field(10.0, ge=0.5, le=60, description="a request (headers and body) must arrive within "
                                "this; a slower client is cut off (seconds or a duration)")
    console: ConsoleConfig = Field(default_factory=lambda: ConsoleConfig())
    storm: StormConfig = Field(default_factory=lambda: StormConfig())
    twin: bool = Field(False, description="try each new plan on a twin of the fleet first (respond/twin.py): the "
                       "prediction goes on each planned action; seconds of CPU per plan, so off by default")

    @field_validator("interval", "kube_timeout", "read_timeout", mode="before")
    @classmethod
    def _dur(cls, v: Any) -> float:
        return _duration(v, "duration")

    @field_validator("kubeconfig", mode="before")
    @classmethod
    def _kubeconfig(cls, v: Any) -> Any:
        if isinstance(v, dict) and set(v) == {"file"}:
            return v["file"] if isinstance(v["file"], str) and v["file"] else secrets.resolve(v, "")
        if isinstance(v, dict):
            return _kubeconfig_file(secrets.resolve(v, ""))
        return v

    @field_validator("label_selector")
    @classmethod
    def _selector(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                parse_selector(v)
            except UnsafeName as exc:
                raise ValueError(str(exc)) from None
        return v

    @property
    def selector(self) -> dict[str, str]:
        return parse_selector(self.label_selector) if self.label_selector else {}

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
    if cfg.kubeconfig is not None:
        problem = _kubeconfig_problem(cfg.kubeconfig)
        if problem:
            raise ConfigError(f"{path}: kubeconfig: {problem}")
    if cfg.mode != "propose" and not (cfg.auth.approve or cfg.mode == "auto"):
        raise ConfigError(f"{path}: mode approve needs auth.approve tokens (nobody could approve)")
    return cfg


def _kubeconfig_file(text: str) -> Path:
    """A kubeconfig given as text (`{env: NAME}`): written to a file only this user can read, for lightkube."""
    d = Path(tempfile.mkdtemp(prefix="llm-oncall-kubeconfig-"))
    f = d / "kubeconfig"
    fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return f


def _kubeconfig_problem(path: Path) -> str | None:
    """Why this is not a kubeconfig lightkube can use (None: it looks like one). Never quotes its content."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return f"cannot read {path} ({exc.strerror or exc})"
    except yaml.YAMLError:
        return f"{path} is not YAML"
    if not isinstance(doc, dict) or not doc.get("clusters") or not doc.get("contexts"):
        return f"{path} has no clusters/contexts (not a kubeconfig)"
    return None
