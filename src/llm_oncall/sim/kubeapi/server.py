"""The simulated kube-apiserver over HTTP (plain http on 127.0.0.1): discovery, the resource verbs, /scale,
/eviction, and a fault layer that makes the next N matching requests fail as a real server can (409, 429, 403,
500, timeouts), before or after the change lands.

Faults are set through `/_sim/faults` (not a Kubernetes path): POST a JSON rule, DELETE to clear, GET to list.
Every API request answered is also kept in an audit log shaped like the kube-apiserver's (audit.k8s.io/v1 Event at
level Metadata: verb, objectRef, responseStatus, userAgent), read at `/_sim/audit` or `KubeApiServer.audit`.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from llm_oncall.sim.kubeapi import openapi, tables
from llm_oncall.sim.kubeapi.cluster import KubeCluster, dumps
from llm_oncall.sim.kubeapi.model import BY_PATH, REASONS, RESOURCES, ApiStatus, ResourceType

HOST = "127.0.0.1"
MAX_BODY = 4 << 20
VERSION = {"major": "1", "minor": "33", "gitVersion": "v1.33.1", "gitCommit": "llm-oncall-sim",
           "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.24.2",
           "compiler": "gc", "platform": "linux/amd64"}


@dataclass
class FaultRule:
    """The next `count` requests whose method and path match answer `code` (0 = no answer for `delay_s`, a
    timeout). `when="after"` lets the change land first (the client sees a failure of a write that happened)."""

    method: str = "*"
    path: str = ""
    code: int = 500
    count: int = 1
    delay_s: float = 0.0
    when: str = "before"
    message: str = ""

    def matches(self, method: str, path: str) -> bool:
        return self.count > 0 and self.method in ("*", method) and re.search(self.path, path) is not None


class FaultLayer:
    def __init__(self) -> None:
        self.rules: list[FaultRule] = []
        self.lock = threading.Lock()
        self.log: list[tuple[str, str, int]] = []
        """(method, path, code) of every API request answered, in order."""

    def add(self, rule: FaultRule) -> None:
        with self.lock:
            self.rules.append(rule)

    def clear(self) -> None:
        with self.lock:
            self.rules.clear()

    def take(self, method: str, path: str) -> FaultRule | None:
        with self.lock:
            for r in self.rules:
                if r.matches(method, path):
                    r.count -= 1
                    return r
        return None


def _forbidden(method: str, rt: ResourceType | None, ns: str, name: str, sub: str) -> str:
    verb = {"GET": "get" if name else "list", "POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete"}.get(method, method.lower())
    what = rt.plural if rt else "resource"
    if sub:
        what += f"/{sub}"
    group = rt.group if rt else ""
    subject = 'User "system:serviceaccount:llm:llm-oncall"'
    where = f' in the namespace "{ns}"' if ns else " at the cluster scope"
    target = f'{what} "{name}" is forbidden: ' if name else f"{what} is forbidden: "
    return f'{target}{subject} cannot {verb} resource "{what}" in API group "{group}"{where}'


class KubeApiServer:
    def __init__(self, cluster: KubeCluster, host: str = HOST, port: int = 0) -> None:
        self.cluster = cluster
        self.faults = FaultLayer()
        self.audit: list[dict[str, Any]] = []
        """audit.k8s.io/v1-like events of every API request answered (verb, objectRef, code, userAgent)."""
        self.audit_lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> KubeApiServer:
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                       name="sim-kube-api", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def write_kubeconfig(self, path: Path, namespace: str | None = None) -> Path:
        ns = namespace or self.cluster.fleet.cfg.namespace
        text = (
            "apiVersion: v1\nkind: Config\npreferences: {}\n"
            f"clusters:\n- name: llm-oncall-sim\n  cluster:\n    server: {self.url}\n"
            "users:\n- name: llm-oncall\n  user: {}\n"
            f"contexts:\n- name: llm-oncall-sim\n  context:\n    cluster: llm-oncall-sim\n    user: llm-oncall\n"
            f"    namespace: {ns}\n"
            "current-context: llm-oncall-sim\n")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)  # whoever waits for the file never reads half of it
        return path

    # ---- dispatch ------------------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> tuple[int, dict[str, str],
                                                                                                bytes]:
        split = urlsplit(raw_path)
        path = split.path
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        if path.startswith("/_sim/faults"):
            return self._faults(method, body)
        if path == "/_sim/audit":
            with self.audit_lock:
                return 200, {"Content-Type": "application/json"}, dumps(
                    {"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": list(self.audit)})
        fault = self.faults.take(method, path)
        if fault is not None and fault.when == "before":
            self._audit(method, path, query, headers, fault.code)
            return self._fault_answer(fault, method, path)
        try:
            code, obj = self._route(method, path, query, headers, body)
        except ApiStatus as exc:
            code, obj = exc.code, exc.to_json()
        self._audit(method, path, query, headers, code if fault is None else fault.code)
        if fault is not None:
            return self._fault_answer(fault, method, path)
        self.faults.log.append((method, path, code))
        content_type = "application/json"
        version = tables.wants_table(headers.get("accept", "")) if method == "GET" and code == 200 else None
        if version is not None and isinstance(obj, dict):
            rt, _, _, sub = self._parse_resource(path)
            if rt is not None and not sub:
                fleet = self.cluster.fleet
                obj = tables.table(rt.kind, rt.api_version, obj, fleet.cfg.epoch + fleet.now, version,
                                   query.get("includeObject", "Metadata"))
                content_type = f"application/json;as=Table;v={version};g=meta.k8s.io"
        data = obj if isinstance(obj, bytes) else dumps(obj)
        return code, {"Content-Type": content_type}, data

    def _audit(self, method: str, path: str, query: dict[str, str], headers: dict[str, str], code: int) -> None:
        rt, ns, name, sub = self._parse_resource(path)
        if rt is None:
            verb = method.lower()
            ref: dict[str, str] | None = None
        else:
            verb = {"GET": "get" if name else ("watch" if query.get("watch") in ("1", "true") else "list"),
                    "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method,
                                                                                                 method.lower())
            ref = {"resource": rt.plural, "apiGroup": rt.group, "apiVersion": rt.version,
                   **({"namespace": ns} if ns and rt.namespaced else {}), **({"name": name} if name else {}),
                   **({"subresource": sub} if sub else {})}
        event: dict[str, Any] = {"level": "Metadata", "stage": "ResponseComplete", "verb": verb,
                                 "requestURI": path + (f"?{urlencode(query)}" if query else ""),
                                 "userAgent": headers.get("user-agent", ""), "responseStatus": {"code": code},
                                 "dryRun": query.get("dryRun") == "All"}
        if ref is not None:
            event["objectRef"] = ref
        with self.audit_lock:
            self.audit.append(event)
            del self.audit[:-100_000]

    def _fault_answer(self, fault: FaultRule, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        if fault.delay_s:
            time.sleep(fault.delay_s)
        if fault.code == 0:
            return 0, {}, b""
        rt, ns, name, sub = self._parse_resource(path)
        message = fault.message or (_forbidden(method, rt, ns, name, sub) if fault.code == 403 else
                                    "Too many requests, please try again later." if fault.code == 429 else
                                    "the object has been modified; please apply your changes to the latest version "
                                    "and try again" if fault.code == 409 else
                                    "Internal error occurred: etcdserver: request timed out")
        err = ApiStatus(fault.code, message, details={"name": name, "kind": rt.plural if rt else ""} if name else None)
        self.faults.log.append((method, path, fault.code))
        extra = {"Retry-After": "1"} if fault.code == 429 and not fault.message.startswith("Cannot evict") else {}
        return fault.code, {"Content-Type": "application/json", **extra}, dumps(err.to_json())

    def _faults(self, method: str, body: bytes) -> tuple[int, dict[str, str], bytes]:
        if method == "POST":
            try:
                rule = FaultRule(**json.loads(body or b"{}"))
            except (TypeError, ValueError) as exc:
                return 400, {"Content-Type": "text/plain"}, str(exc).encode()
            self.faults.add(rule)
        elif method == "DELETE":
            self.faults.clear()
        return 200, {"Content-Type": "application/json"}, dumps([asdict(r) for r in self.faults.rules])

    @staticmethod
    def _parse_resource(path: str) -> tuple[ResourceType | None, str, str, str]:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None, "", "", ""
        ns = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            ns, rest = rest[1], rest[2:]
        if not rest:
            return None, ns, "", ""
        rt = BY_PATH.get((group, version, rest[0]))
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return rt, ns, name, sub

    def _route(self, method: str, path: str, query: dict[str, str], headers: dict[str, str],
               body: bytes) -> tuple[int, Any]:
        parts = [unquote(p) for p in path.strip("/").split("/") if p]
        if path in ("/version", "/version/"):
            return 200, VERSION
        if path in ("/healthz", "/livez", "/readyz"):
            return 200, b"ok"
        if parts[:1] == ["openapi"]:
            doc = openapi.document(parts[1:], query)
            if doc is None:
                raise ApiStatus(404, "the server could not find the requested resource")
            return 200, doc
        if parts == ["api"]:
            return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}]}
        if parts == ["apis"]:
            return 200, _group_list()
        if parts[:1] == ["apis"] and len(parts) == 2:
            group = next((g for g in _group_list()["groups"] if g["name"] == parts[1]), None)
            if group is None:
                raise ApiStatus(404, "the server could not find the requested resource")
            return 200, {"kind": "APIGroup", "apiVersion": "v1", **group}
        if (parts[:1] == ["api"] and len(parts) == 2) or (parts[:1] == ["apis"] and len(parts) == 3):
            gv = parts[1] if parts[0] == "api" else f"{parts[1]}/{parts[2]}"
            lst = _resource_list(gv)
            if lst is None:
                raise ApiStatus(404, "the server could not find the requested resource")
            return 200, lst
        rt, ns, name, sub = self._parse_resource(path)
        if rt is None:
            raise ApiStatus(404, "the server could not find the requested resource")
        if rt.kind == "Namespace" and ns == "" and len(parts) > (3 if parts[0] == "api" else 4):
            raise ApiStatus(404, "the server could not find the requested resource")
        return self._verb(rt, method, ns, name, sub, query, headers, body)

    def _verb(self, rt: ResourceType, method: str, ns: str, name: str, sub: str, query: dict[str, str],
              headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        c = self.cluster
        dry = query.get("dryRun") == "All"
        if "dryRun" in query and not dry:
            raise ApiStatus(400, f"Invalid dryRun value: {query['dryRun']!r}: the only valid value is \"All\"")
        if not rt.namespaced:
            ns = ""
        elif not ns and method != "GET":
            raise ApiStatus(404, "the server could not find the requested resource")
        payload = _json_body(body) if body else None
        ct = headers.get("content-type", "application/json")
        if sub:
            if sub == "scale" and "scale" in rt.subresources:
                if method == "GET":
                    return 200, c.get_scale(rt, ns, name)
                if method == "PUT":
                    return 200, c.write_scale(rt, ns, name, None, payload, dry)
                if method == "PATCH":
                    return 200, c.write_scale(rt, ns, name, ct, payload, dry)
            if sub == "eviction" and rt.kind == "Pod" and method == "POST":
                return 201, c.evict(ns, name, payload, dry)
            if sub == "status" and method == "GET":
                return 200, c.get(rt, ns, name)
            raise ApiStatus(405, f"the server does not allow this method on the requested resource ({sub})",
                            reason="MethodNotAllowed")
        if method == "GET":
            if name:
                return 200, c.get(rt, ns, name)
            if query.get("watch") in ("1", "true"):
                raise ApiStatus(405, "the simulator does not serve watches", reason="MethodNotAllowed")
            return 200, c.list_objects(rt, ns or None, query.get("labelSelector", ""), query.get("fieldSelector", ""))
        if method == "POST" and not name:
            return 201, c.create(rt, ns, payload, dry)
        if method == "PUT" and name:
            return 200, c.replace(rt, ns, name, payload, dry)
        if method == "PATCH" and name:
            return 200, c.patch(rt, ns, name, ct, payload, dry)
        if method == "DELETE" and name:
            opts = dict(payload) if isinstance(payload, dict) else {}
            for k in ("propagationPolicy", "gracePeriodSeconds"):
                if k in query:
                    opts[k] = int(query[k]) if k == "gracePeriodSeconds" else query[k]
            dry = dry or "All" in (opts.get("dryRun") or [])
            return 200, c.delete(rt, ns, name, opts, dry)
        raise ApiStatus(405, "the server does not allow this method on the requested resource",
                        reason="MethodNotAllowed")


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError):
        try:
            import yaml  # apply patches may be YAML

            return yaml.safe_load(body)
        except Exception:
            raise ApiStatus(400, "the body of the request could not be decoded") from None


def _groups() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group:
            out.setdefault(r.group, [])
            if r.version not in out[r.group]:
                out[r.group].append(r.version)
    return out


def _group_list() -> dict[str, Any]:
    groups = []
    for g, versions in _groups().items():
        vs = [{"groupVersion": f"{g}/{v}", "version": v} for v in versions]
        groups.append({"name": g, "versions": vs, "preferredVersion": vs[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _resource_list(gv: str) -> dict[str, Any] | None:
    group, _, version = gv.rpartition("/")
    rts = [r for r in RESOURCES if r.group == group and r.version == version]
    if not rts:
        return None
    resources: list[dict[str, Any]] = []
    for r in rts:
        resources.append({"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
                          "verbs": list(r.verbs), **({"shortNames": list(r.short_names)} if r.short_names else {})})
        for sub in r.subresources:
            entry: dict[str, Any] = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced,
                                     "kind": r.kind, "verbs": ["get", "patch", "update"]}
            if sub == "scale":
                entry.update(group="autoscaling", version="v1", kind="Scale")
            if sub == "eviction":
                entry.update(group="policy", version="v1", kind="Eviction", verbs=["create"])
            resources.append(entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


def _handler(server: KubeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def _serve(self, method: str) -> None:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY:
                self._send(413, {"Content-Type": "text/plain"}, b"request body too large\n")
                return
            body = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            try:
                code, hdrs, data = server.handle(method, self.path, headers, body)
            except Exception as exc:  # a bug in one request must not take the server down
                err = ApiStatus(500, f"{type(exc).__name__}: {exc}")
                code, hdrs, data = 500, {"Content-Type": "application/json"}, dumps(err.to_json())
            if code == 0:  # a timeout: the client never gets an answer on this connection
                self.close_connection = True
                return
            self._send(code, hdrs, data)

        def _send(self, code: int, headers: dict[str, str], data: bytes) -> None:
            self.send_response(code, REASONS.get(code))
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-cache, private")
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def do_PUT(self) -> None:
            self._serve("PUT")

        def do_PATCH(self) -> None:
            self._serve("PATCH")

        def do_DELETE(self) -> None:
            self._serve("DELETE")

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
