"""The simulated kube-apiserver's storage and verbs over the fleet.

Objects the fleet implies (nodes, pods, the Deployment or LeaderWorkerSet and its ReplicaSets, the router and
gateway ConfigMaps, the HTTPRoute, node Leases, Events) are re-derived from the fleet before every request and
get a new resourceVersion when they change; objects clients create (PodDisruptionBudgets, BackendTrafficPolicies,
InferenceObjectives, Leases, Events, other ConfigMaps) are stored as written. A write to a fleet object acts on
the fleet through its controllers (`fleetops`), then the object is re-derived: what the API returns is what the
fleet now does. `dryRun=All` runs the same admission and validation and changes nothing.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable
from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi import (
    autoscaling,
    disruption,
    events,
    fleetops,
    identity,
    jobs,
    leases,
    nodes,
    routing,
    selectors,
    templates,
    workloads,
)
from llm_oncall.sim.kubeapi.controllers import Controllers
from llm_oncall.sim.kubeapi.model import (
    BY_KIND,
    ApiStatus,
    Key,
    ResourceType,
    conflict,
    invalid,
    label_errors,
    not_found,
)
from llm_oncall.sim.kubeapi.patch import apply_patch
from llm_oncall.sim.pods import READY

DERIVED = frozenset({"namespaces", "nodes", "pods", "deployments.apps", "replicasets.apps",
                     "leaderworkersets.leaderworkerset.x-k8s.io", "httproutes.gateway.networking.k8s.io"})
"""Kinds wholly derived from the fleet (ConfigMaps, Leases and Events are derived only for the fleet's own)."""


def _rt(kind: str) -> ResourceType:
    return BY_KIND[kind]


class KubeCluster:
    def __init__(self, fleet: Fleet, lock: threading.RLock | None = None) -> None:
        self.fleet = fleet
        self.lock = lock or threading.RLock()
        self.book = identity.Bookkeeping()
        self.rv = 100_000
        self.store: dict[Key, dict[str, Any]] = {}
        self.derived_keys: set[Key] = set()
        self.overlay: dict[Key, dict[str, dict[str, str]]] = {}
        """Labels/annotations clients put on fleet-derived objects (kept across re-derivation)."""
        self.api_events: list[dict[str, Any]] = []
        self.writes = 0
        """Write requests that changed something (not dry-run): tests check a plan made none."""
        self._sync_sig: tuple[float, int] | None = None
        self.controllers = Controllers(fleet, self.book)
        self.keda = autoscaling.Keda(fleet)
        if fleet.cfg.hpa.enabled and fleet.cfg.hpa.keda:  # as a KEDA user applied it
            so = autoscaling.scaled_object(fleet)
            key: Key = (autoscaling.SO_KEY, fleet.cfg.namespace, so["metadata"]["name"])
            so["metadata"].update(uid=identity.uid_of(*key), creationTimestamp=identity.ts(fleet, 0.0),
                                  resourceVersion=self._next_rv())
            self.store[key] = so

    # ---- derivation ----------------------------------------------------------------------------------
    def _derive(self) -> dict[Key, dict[str, Any]]:
        fleet = self.fleet
        ns = fleet.cfg.namespace
        out: dict[Key, dict[str, Any]] = {}

        def put(obj: dict[str, Any]) -> None:
            rt = _rt(obj["kind"])
            m = obj["metadata"]
            out[(rt.key, m.get("namespace", "") if rt.namespaced else "", m["name"])] = obj

        for o in nodes.namespaces(fleet):
            put(o)
        for node in fleet.nodes():
            put(nodes.node(fleet, node, self.book))
            put(nodes.node_lease(fleet, node))
        for made in [k for k in self.book.created if k[0] == "cordon" and k[1] not in fleet.cordoned]:
            del self.book.created[made]
        rs_uid = {}
        if templates.lws_mode(fleet):
            put(workloads.leaderworkerset(fleet))
        else:
            for o in workloads.deployment_objects(fleet, self.book):
                put(o)
                if o["kind"] == "ReplicaSet":
                    rs_uid[o["metadata"]["name"]] = o["metadata"]["uid"]
        for p in templates.live_pods(fleet):
            put(workloads.pod(fleet, p, self.book, rs_uid.get(f"{fleet.cfg.deployment}-{p.revision.name}", "")))
        put(self.controllers.configmap(routing.router_configmap(fleet), routing.ROUTER_CONFIGMAP))
        put(self.controllers.configmap(routing.gateway_configmap(fleet), routing.GATEWAY_CONFIGMAP))
        put(routing.httproute(fleet))
        hpa = autoscaling.hpa(fleet, self.keda.reconcile(self.store))
        if hpa is not None:
            put(hpa)
        for e in events.events(fleet, self.api_events):
            put(e)
        del ns
        return out

    def sync(self, force: bool = False) -> None:
        sig = (self.fleet.now, self.writes)
        if sig == self._sync_sig and not force:
            return
        self._sync_sig = sig
        derived = self._derive()
        for key, obj in derived.items():
            ov = self.overlay.get(key)
            if ov:
                for part in ("labels", "annotations"):
                    if ov.get(part):
                        obj["metadata"][part] = {**ov[part], **obj["metadata"].get(part, {})}
            old = self.store.get(key)
            meta = obj["metadata"]
            if old is None:
                meta.setdefault("uid", identity.uid_of(*key))
                meta.setdefault("creationTimestamp",
                                identity.ts(self.fleet, self.book.created_at(("obj", *key), self.fleet.now)))
                meta["resourceVersion"] = self._next_rv()
                self.store[key] = obj
                continue
            meta.setdefault("uid", old["metadata"]["uid"])
            meta.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"])
            meta["resourceVersion"] = old["metadata"]["resourceVersion"]
            if obj != old:
                meta["resourceVersion"] = self._next_rv()
                self.store[key] = obj
        for key in self.derived_keys - set(derived):
            self.store.pop(key, None)
        self.derived_keys = set(derived)

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    # ---- reads ---------------------------------------------------------------------------------------
    def get(self, rt: ResourceType, ns: str, name: str) -> dict[str, Any]:
        with self.lock:
            self.sync()
            obj = self.store.get((rt.key, ns if rt.namespaced else "", name))
            if obj is None:
                raise not_found(rt, name)
            return copy.deepcopy(obj)

    def list_objects(self, rt: ResourceType, ns: str | None, label_selector: str = "",
             field_selector: str = "") -> dict[str, Any]:
        match = selectors.parse_selector(label_selector)
        fields = selectors.parse_selector(field_selector)
        with self.lock:
            self.sync()
            items = []
            for (k, ons, _), obj in sorted(self.store.items()):
                if k != rt.key or (ns and rt.namespaced and ons != ns):
                    continue
                if not match(obj["metadata"].get("labels") or {}):
                    continue
                if not fields(selectors.object_fields(obj)):
                    continue
                item = copy.deepcopy(obj)
                if not rt.crd:
                    item.pop("apiVersion", None)
                    item.pop("kind", None)
                items.append(item)
            return {"apiVersion": rt.api_version, "kind": f"{rt.kind}List",
                    "metadata": {"resourceVersion": str(self.rv)}, "items": items}

    # ---- writes --------------------------------------------------------------------------------------
    def create(self, rt: ResourceType, ns: str, body: Any, dry_run: bool) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiStatus(400, "the body of the request was not a JSON object")
        with self.lock:
            self.sync()
            meta = body.get("metadata") or {}
            name = meta.get("name")
            if not name and meta.get("generateName"):
                name = f"{meta['generateName']}{identity.uid_of(self.rv, meta['generateName'])[:5]}"
            if not isinstance(name, str) or not name:
                raise invalid(rt, "", ["metadata.name: Required value: name or generateName is required"])
            self._validate_meta(rt, name, meta)
            key: Key = (rt.key, ns if rt.namespaced else "", name)
            if key in self.store:
                what = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
                raise ApiStatus(409, f'{what} "{name}" already exists', reason="AlreadyExists",
                                details={"name": name, "group": rt.group, "kind": rt.plural})
            if rt.key in DERIVED:
                raise ApiStatus(405, f"the simulator's {rt.plural} are made by the fleet's controllers; create "
                                f"is not supported", reason="MethodNotAllowed")
            obj = copy.deepcopy(body)
            obj["apiVersion"], obj["kind"] = rt.api_version, rt.kind
            obj["metadata"] = {**meta, "name": name, "uid": identity.uid_of("created", *key, self.rv),
                               "creationTimestamp": identity.ts(self.fleet, self.fleet.now),
                               "resourceVersion": str(self.rv + 1)}
            obj["metadata"].pop("generateName", None) if meta.get("name") else None
            if rt.namespaced:
                obj["metadata"]["namespace"] = ns
            if rt.crd or rt.kind in ("Deployment", "PodDisruptionBudget", "HorizontalPodAutoscaler"):
                obj["metadata"]["generation"] = 1
            self._validate_owned(rt, obj)
            if dry_run:
                return obj
            if rt.kind == "Job":
                jobs.run(self.fleet, obj)  # before it is stored: the Job's status is its run's outcome
            obj["metadata"]["resourceVersion"] = self._next_rv()
            self.store[key] = obj
            self.writes += 1
            self._after_owned_change(rt)
            return copy.deepcopy(obj)

    def replace(self, rt: ResourceType, ns: str, name: str, body: Any, dry_run: bool) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiStatus(400, "the body of the request was not a JSON object")
        with self.lock:
            cur = self.get(rt, ns, name)
            if rt.kind == "Lease":
                leases.require_resource_version(rt, name, body)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise conflict(rt, name, "the object has been modified; please apply your changes to the latest "
                               "version and try again")
            new = copy.deepcopy(body)
            new.setdefault("metadata", {})["resourceVersion"] = cur["metadata"]["resourceVersion"]
            return self._write(rt, ns, name, cur, new, dry_run)

    def patch(self, rt: ResourceType, ns: str, name: str, content_type: str, body: Any,
              dry_run: bool) -> dict[str, Any]:
        with self.lock:
            cur = self.get(rt, ns, name)
            new = apply_patch(rt, cur, content_type, body)
            rv = (new.get("metadata") or {}).get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise conflict(rt, name, "the object has been modified; please apply your changes to the latest "
                               "version and try again")
            return self._write(rt, ns, name, cur, new, dry_run)

    def _write(self, rt: ResourceType, ns: str, name: str, cur: dict[str, Any], new: dict[str, Any],
               dry_run: bool) -> dict[str, Any]:
        meta = new.get("metadata") or {}
        if meta.get("name", name) != name or (rt.namespaced and meta.get("namespace", ns) != ns):
            raise ApiStatus(400, "the name/namespace of the object does not match the request")
        if meta.get("uid") and meta["uid"] != cur["metadata"]["uid"]:
            raise ApiStatus(409, f'Precondition failed: UID in precondition: {meta["uid"]}, UID in object meta: '
                            f'{cur["metadata"]["uid"]}', reason="Conflict")
        self._validate_meta(rt, name, meta)
        new["apiVersion"], new["kind"] = rt.api_version, rt.kind
        new["metadata"] = {**meta, "name": name, "uid": cur["metadata"]["uid"],
                           "creationTimestamp": cur["metadata"]["creationTimestamp"],
                           "resourceVersion": cur["metadata"]["resourceVersion"]}
        if rt.namespaced:
            new["metadata"]["namespace"] = ns
        if "status" in cur:
            new["status"] = cur["status"]  # the main resource ignores status (the /status subresource writes it)
        key: Key = (rt.key, ns if rt.namespaced else "", name)
        derived = key in self.derived_keys
        effects: list[Callable[[], None]] = []
        if derived:
            effects = self.controllers.effects(rt, key, cur, new)
        else:
            self._validate_owned(rt, new)
        if new == cur:
            return copy.deepcopy(cur)  # a no-op write changes nothing, not even the resourceVersion
        if dry_run:
            return new
        for fx in effects:
            fx()
        if rt.kind == "HorizontalPodAutoscaler" and derived and self.fleet.cfg.hpa.keda:
            self.keda.watch(self.store)
        self.writes += 1
        if derived:
            self._keep_meta(key, cur, new)
            self.sync(force=True)
            return copy.deepcopy(self.store.get(key, new))
        if new.get("spec") != cur.get("spec") and "generation" in cur["metadata"]:
            new["metadata"]["generation"] = int(cur["metadata"]["generation"]) + 1
        new["metadata"]["resourceVersion"] = self._next_rv()
        self.store[key] = new
        self._after_owned_change(rt)
        return copy.deepcopy(new)

    def _keep_meta(self, key: Key, cur: dict[str, Any], new: dict[str, Any]) -> None:
        ov = self.overlay.setdefault(key, {})
        for part in ("labels", "annotations"):
            before = cur["metadata"].get(part) or {}
            after = new["metadata"].get(part) or {}
            mine = dict(ov.get(part) or {})
            for k, v in after.items():
                if before.get(k) != v:
                    mine[k] = v
            for k in before:
                if k not in after:
                    mine.pop(k, None)
            ov[part] = mine

    def _after_owned_change(self, rt: ResourceType) -> None:
        if rt.kind == "ScaledObject":
            self.keda.reconcile(self.store, force=True)
            self.sync(force=True)
        if rt.kind == "BackendTrafficPolicy":
            fleetops.apply_rate_limits(self.fleet, [o for (k, _, _), o in self.store.items() if k == rt.key])

    def _validate_meta(self, rt: ResourceType, name: str, meta: dict[str, Any]) -> None:
        errors = label_errors(meta.get("labels"))
        if errors:
            raise invalid(rt, name, errors)

    def _validate_owned(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if rt.kind == "Lease":
            leases.validate(rt, obj)
        if rt.kind == "PodDisruptionBudget":
            spec = obj.get("spec") or {}
            if ("minAvailable" in spec) == ("maxUnavailable" in spec):
                raise invalid(rt, name, ["spec: Invalid value: minAvailable and maxUnavailable cannot be both set "
                                         "(exactly one is required here)"])
        if rt.kind == "HorizontalPodAutoscaler":
            errors = autoscaling.validate_hpa(name, obj.get("spec") or {})
            if errors:
                raise invalid(rt, name, errors)
        if rt.kind == "ScaledObject":
            autoscaling.validate_scaled_object(name, obj)
        if rt.kind == "BackendTrafficPolicy":
            rl = (obj.get("spec") or {}).get("rateLimit") or {}
            for scope in ("local", "global"):
                for i, rule in enumerate((rl.get(scope) or {}).get("rules") or []):
                    limit = rule.get("limit") or {}
                    if not isinstance(limit.get("requests"), int) or limit.get("unit") not in fleetops.UNIT_S:
                        raise invalid(rt, name, [f"spec.rateLimit.{scope}.rules[{i}].limit: requests (integer) "
                                                 "and unit (Second, Minute, Hour, Day) are required"])

    # ---- delete, evict, scale ---------------------------------------------------------------------------
    def delete(self, rt: ResourceType, ns: str, name: str, options: dict[str, Any], dry_run: bool) -> dict[str, Any]:
        with self.lock:
            cur = self.get(rt, ns, name)
            pre = options.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != cur["metadata"]["uid"]:
                raise conflict(rt, name, f'Precondition failed: UID in precondition: {pre["uid"]}, UID in object '
                               f'meta: {cur["metadata"]["uid"]}')
            if pre.get("resourceVersion") and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]:
                raise conflict(rt, name, "the object has been modified; please apply your changes to the latest "
                               "version and try again")
            key: Key = (rt.key, ns if rt.namespaced else "", name)
            if rt.kind == "Pod":
                grace = options.get("gracePeriodSeconds")
                out = copy.deepcopy(cur)
                out["metadata"]["deletionTimestamp"] = identity.ts(self.fleet, self.fleet.now)
                out["metadata"]["deletionGracePeriodSeconds"] = 30 if grace is None else int(grace)
                if dry_run:
                    return out
                pod = self.controllers.pod(name)
                created = fleetops.delete_pod(self.fleet, pod, self.fleet.now, graceful=grace != 0)
                if templates.lws_mode(self.fleet):
                    self._record(name, "Pod", "RecreateGroup", f"Recreating group: deleted {name} "
                                 f"({options.get('propagationPolicy') or 'Background'}); new pods {created}")
                self.writes += 1
                self.sync(force=True)
                return out
            if key in self.derived_keys:
                raise ApiStatus(405, f"the simulator does not delete {rt.plural} (its fleet owns them)",
                                reason="MethodNotAllowed")
            if dry_run:
                return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                        "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": cur["metadata"]["uid"]}}
            del self.store[key]
            self.writes += 1
            self._after_owned_change(rt)
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": cur["metadata"]["uid"]}}

    def _record(self, name: str, kind: str, reason: str, message: str) -> None:
        self.api_events.append(events.api_event(self.fleet, name, kind, reason, message,
                                                10**9 + len(self.api_events)))
        del self.api_events[:-200]

    def evict(self, ns: str, name: str, body: Any, dry_run: bool) -> dict[str, Any]:
        rt = _rt("Pod")
        with self.lock:
            cur = self.get(rt, ns, name)
            opts = (body or {}).get("deleteOptions") or {} if isinstance(body, dict) else {}
            dry_run = dry_run or "All" in (opts.get("dryRun") or [])
            pdb = disruption.budget_for(self.store, ns, cur["metadata"].get("labels") or {})
            pod = self.controllers.pod(name)
            if pdb is not None and pod.state == READY:
                disruption.check(self.store, ns, pdb)
            if not dry_run:
                fleetops.delete_pod(self.fleet, pod, self.fleet.now)
                self._record(name, "Pod", "Evicted", f"Evicted pod {name} (policy/v1 Eviction)")
                self.writes += 1
                self.sync(force=True)
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def get_scale(self, rt: ResourceType, ns: str, name: str) -> dict[str, Any]:
        obj = self.get(rt, ns, name)
        return _scale(obj)

    def write_scale(self, rt: ResourceType, ns: str, name: str, content_type: str | None, body: Any,
                    dry_run: bool) -> dict[str, Any]:
        with self.lock:
            cur = self.get(rt, ns, name)
            scale = _scale(cur)
            new = apply_patch(_rt("Deployment"), scale, content_type, body) if content_type else body
            if not isinstance(new, dict):
                raise ApiStatus(400, "the body of the request was not a JSON object")
            rv = (new.get("metadata") or {}).get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise conflict(rt, name, "the object has been modified; please apply your changes to the latest "
                               "version and try again")
            replicas = (new.get("spec") or {}).get("replicas")
            target = copy.deepcopy(cur)
            target["spec"]["replicas"] = replicas
            out = self._write(rt, ns, name, cur, target, dry_run)
            result = _scale(out)
            if dry_run:
                result["spec"]["replicas"] = replicas
            return result


def _scale(obj: dict[str, Any]) -> dict[str, Any]:
    m = obj["metadata"]
    status = obj.get("status") or {}
    if obj["kind"] == "LeaderWorkerSet":
        selector = status.get("hpaPodSelector", "")
    else:
        selector = ",".join(f"{k}={v}" for k, v in sorted(obj["spec"]["selector"]["matchLabels"].items()))
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
                         "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"]},
            "spec": {"replicas": obj["spec"]["replicas"]},
            "status": {"replicas": int(status.get("replicas", 0)), "selector": selector}}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
