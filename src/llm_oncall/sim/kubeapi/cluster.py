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
import math
import re
import threading
from collections.abc import Callable
from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi import fleetops, render
from llm_oncall.sim.kubeapi.model import BY_KIND, ApiStatus, ResourceType, conflict, invalid, label_errors, not_found
from llm_oncall.sim.kubeapi.patch import PatchError, json_patch, merge_patch, strategic_merge
from llm_oncall.sim.pods import READY, TERMINATED, Pod

Key = tuple[str, str, str]
"""(resource key, namespace or "", name)."""
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
DERIVED = frozenset({"namespaces", "nodes", "pods", "deployments.apps", "replicasets.apps",
                     "leaderworkersets.leaderworkerset.x-k8s.io", "httproutes.gateway.networking.k8s.io"})
"""Kinds wholly derived from the fleet (ConfigMaps, Leases and Events are derived only for the fleet's own)."""


def _rt(kind: str) -> ResourceType:
    return BY_KIND[kind]


class KubeCluster:
    def __init__(self, fleet: Fleet, lock: threading.RLock | None = None) -> None:
        self.fleet = fleet
        self.lock = lock or threading.RLock()
        self.book = render.Bookkeeping()
        self.rv = 100_000
        self.store: dict[Key, dict[str, Any]] = {}
        self.derived_keys: set[Key] = set()
        self.overlay: dict[Key, dict[str, dict[str, str]]] = {}
        """Labels/annotations clients put on fleet-derived objects (kept across re-derivation)."""
        self.written: dict[Key, dict[str, Any]] = {}
        """ConfigMap data written through the API (the fleet's ConfigMaps keep what was written)."""
        self.api_events: list[dict[str, Any]] = []
        self.writes = 0
        """Write requests that changed something (not dry-run): tests check a plan made none."""
        self._sync_sig: tuple[float, int] | None = None
        self._cm_version = fleet.configmap_version

    # ---- derivation ----------------------------------------------------------------------------------
    def _derive(self) -> dict[Key, dict[str, Any]]:
        fleet = self.fleet
        ns = fleet.cfg.namespace
        out: dict[Key, dict[str, Any]] = {}

        def put(obj: dict[str, Any]) -> None:
            rt = _rt(obj["kind"])
            m = obj["metadata"]
            out[(rt.key, m.get("namespace", "") if rt.namespaced else "", m["name"])] = obj

        for o in render.namespaces(fleet):
            put(o)
        for node in fleet.nodes():
            put(render.node(fleet, node, self.book))
            put(render.node_lease(fleet, node))
        for made in [k for k in self.book.created if k[0] == "cordon" and k[1] not in fleet.cordoned]:
            del self.book.created[made]
        rs_uid = {}
        if render.lws_mode(fleet):
            put(render.leaderworkerset(fleet))
        else:
            for o in render.deployment_objects(fleet, self.book):
                put(o)
                if o["kind"] == "ReplicaSet":
                    rs_uid[o["metadata"]["name"]] = o["metadata"]["uid"]
        for p in render.live_pods(fleet):
            put(render.pod(fleet, p, self.book, rs_uid.get(f"{fleet.cfg.deployment}-{p.revision.name}", "")))
        put(self._configmap(render.router_configmap(fleet), render.ROUTER_CONFIGMAP))
        put(self._configmap(render.gateway_configmap(fleet), render.GATEWAY_CONFIGMAP))
        put(render.httproute(fleet))
        for e in render.events(fleet, self.api_events):
            put(e)
        del ns
        return out

    def _configmap(self, derived: dict[str, Any], name: str) -> dict[str, Any]:
        key: Key = ("configmaps", self.fleet.cfg.namespace, name)
        written = self.written.get(key)
        if name == render.ROUTER_CONFIGMAP and self.fleet.configmap_version != self._cm_version:
            self._cm_version = self.fleet.configmap_version  # changed inside the fleet: what it holds now
            if written is not None and written.get("by") != self._cm_version:
                self.written.pop(key, None)
                written = None
        if written is not None:
            derived["data"] = dict(written["data"])
        return derived

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
                meta.setdefault("uid", render.uid_of(*key))
                meta.setdefault("creationTimestamp",
                                render.ts(self.fleet, self.book.created_at(("obj", *key), self.fleet.now)))
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
        match = parse_selector(label_selector)
        fields = parse_selector(field_selector)
        with self.lock:
            self.sync()
            items = []
            for (k, ons, _), obj in sorted(self.store.items()):
                if k != rt.key or (ns and rt.namespaced and ons != ns):
                    continue
                if not match(obj["metadata"].get("labels") or {}):
                    continue
                if not fields(_fields(obj)):
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
                name = f"{meta['generateName']}{render.uid_of(self.rv, meta['generateName'])[:5]}"
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
            obj["metadata"] = {**meta, "name": name, "uid": render.uid_of("created", *key, self.rv),
                               "creationTimestamp": render.ts(self.fleet, self.fleet.now),
                               "resourceVersion": str(self.rv + 1)}
            obj["metadata"].pop("generateName", None) if meta.get("name") else None
            if rt.namespaced:
                obj["metadata"]["namespace"] = ns
            if rt.crd or rt.kind in ("Deployment", "PodDisruptionBudget"):
                obj["metadata"]["generation"] = 1
            self._validate_owned(rt, obj)
            if dry_run:
                return obj
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
            new = self._patched(rt, cur, content_type, body, name)
            rv = (new.get("metadata") or {}).get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise conflict(rt, name, "the object has been modified; please apply your changes to the latest "
                               "version and try again")
            return self._write(rt, ns, name, cur, new, dry_run)

    def _patched(self, rt: ResourceType, cur: dict[str, Any], content_type: str, body: Any,
                 name: str) -> dict[str, Any]:
        ct = content_type.split(";", 1)[0].strip()
        try:
            if ct == JSON_PATCH:
                out = json_patch(cur, body)
            elif ct == MERGE_PATCH:
                out = merge_patch(cur, body)
            elif ct == STRATEGIC_PATCH:
                if rt.crd:
                    raise ApiStatus(415, "the body of the request was in an unknown format - accepted media types "
                                    "include: application/json-patch+json, application/merge-patch+json, "
                                    "application/apply-patch+yaml", reason="UnsupportedMediaType")
                out = strategic_merge(cur, body)
            elif ct == APPLY_PATCH:
                if not isinstance(body, dict):
                    raise ApiStatus(400, "apply patches must be objects")
                out = strategic_merge(cur, body) if not rt.crd else merge_patch(cur, body)
            else:
                raise ApiStatus(415, f"the body of the request was in an unknown format - accepted media types "
                                f"include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}"
                                + ("" if rt.crd else f", {STRATEGIC_PATCH}"), reason="UnsupportedMediaType")
        except PatchError as exc:
            raise ApiStatus(422 if ct == JSON_PATCH else 400, str(exc)) from None
        if not isinstance(out, dict):
            raise ApiStatus(400, "the patched object is not a JSON object")
        return out

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
            effects = self._fleet_effects(rt, key, cur, new)
        else:
            self._validate_owned(rt, new)
        if new == cur:
            return copy.deepcopy(cur)  # a no-op write changes nothing, not even the resourceVersion
        if dry_run:
            return new
        for fx in effects:
            fx()
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

    # ---- the fleet's controllers ------------------------------------------------------------------------
    def _fleet_effects(self, rt: ResourceType, key: Key, cur: dict[str, Any],
                       new: dict[str, Any]) -> list[Callable[[], None]]:
        fleet = self.fleet
        t = fleet.now
        name = key[2]
        kind = rt.kind
        fx: list[Callable[[], None]] = []
        spec_old, spec_new = cur.get("spec") or {}, new.get("spec") or {}

        def unsupported(fields: tuple[str, ...]) -> None:
            a = {k: v for k, v in spec_old.items() if k not in fields}
            b = {k: v for k, v in spec_new.items() if k not in fields}
            changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            if changed:
                raise invalid(rt, name, [f"spec.{c}: Forbidden: the simulator does not model changes to this field "
                                         f"(it models {', '.join('spec.' + f for f in fields) or 'none'})"
                                         for c in changed])

        if kind == "Node":
            unsupported(("unschedulable", "taints"))
            on = bool(spec_new.get("unschedulable"))
            taints = [t_ for t_ in spec_new.get("taints") or [] if t_.get("key") != render.UNSCHEDULABLE_TAINT]
            errors = []
            seen = set()
            for i, tn in enumerate(taints):
                if not isinstance(tn, dict) or not tn.get("key") or tn.get("effect") not in (
                        "NoSchedule", "PreferNoSchedule", "NoExecute"):
                    errors.append(f"spec.taints[{i}]: Invalid value: {tn!r}: key and effect (NoSchedule, "
                                  "PreferNoSchedule, NoExecute) are required")
                elif (tn["key"], tn["effect"]) in seen:
                    errors.append(f"spec.taints[{i}]: Duplicate value: taints must be unique by key and effect")
                else:
                    seen.add((tn["key"], tn["effect"]))
            if errors:
                raise invalid(rt, name, errors)
            clean = [{k: str(v) for k, v in tn.items() if k in ("key", "value", "effect", "timeAdded")}
                     for tn in taints]
            for tn in clean:
                if tn["effect"] == "NoExecute":
                    tn.setdefault("timeAdded", render.ts(fleet, t))
            if on != (name in fleet.cordoned):
                fx.append(lambda: fleetops.set_cordon(fleet, name, on))
            if clean != [dict(x) for x in fleet.taints.get(name, [])]:
                fx.append(lambda: fleetops.set_taints(fleet, name, clean, t))
            return fx
        if kind == "Pod":
            if spec_new != spec_old:
                raise invalid(rt, name, ["spec: Forbidden: pod updates may not change fields other than "
                                         "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                                         "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to "
                                         "existing tolerations), `spec.terminationGracePeriodSeconds`"])
            before = (cur["metadata"].get("labels") or {}).get(render.CONTEXT_RANGE)
            after = (new["metadata"].get("labels") or {}).get(render.CONTEXT_RANGE)
            if before != after:
                if after is not None and not re.fullmatch(r"\d+-\d+", after):
                    raise invalid(rt, name, [f"metadata.labels[{render.CONTEXT_RANGE}]: the scorer reads "
                                             f"\"min-max\" (got {after!r})"])
                pod = self._pod(name)
                fx.append(lambda: fleetops.set_context_range(fleet, pod, after))
            return fx
        if kind in ("Deployment", "LeaderWorkerSet"):
            if kind == "Deployment" and name != fleet.cfg.deployment:
                unsupported(())
                return fx
            tpl_field = "template" if kind == "Deployment" else "leaderWorkerTemplate"
            unsupported(("replicas", tpl_field))
            want = spec_new.get("replicas")
            if not isinstance(want, int) or isinstance(want, bool) or want < 0:
                raise invalid(rt, name, [f"spec.replicas: Invalid value: {want!r}: must be greater than or equal "
                                         "to 0"])
            if want != spec_old.get("replicas"):
                pods = want * (fleet.cfg.group_size if kind == "LeaderWorkerSet" else 1)
                fx.append(lambda: fleet.scale_to(pods))
            tpl_new = spec_new.get(tpl_field)
            if tpl_new != spec_old.get(tpl_field):
                if kind == "LeaderWorkerSet":
                    lwt_old = dict(spec_old.get(tpl_field) or {})
                    lwt_new = dict(tpl_new or {})
                    if {k: v for k, v in lwt_old.items() if k != "workerTemplate"} != {
                            k: v for k, v in lwt_new.items() if k != "workerTemplate"}:
                        raise invalid(rt, name, ["spec.leaderWorkerTemplate: Forbidden: the simulator models only "
                                                 "workerTemplate changes"])
                    tpl_new = lwt_new.get("workerTemplate")
                parsed = render.parse_template(tpl_new)
                if isinstance(parsed, str):
                    raise invalid(rt, name, [parsed])
                fx.append(lambda: fleetops.set_template(fleet, parsed, t, self.book))
            return fx
        if kind == "ConfigMap":
            data = new.get("data") or {}
            if data != (cur.get("data") or {}):
                if name == render.ROUTER_CONFIGMAP:
                    text = str(data.get(render.ROUTER_KEY, ""))

                    def router() -> None:
                        fleetops.set_router_config(fleet, text, t)
                        self.written[key] = {"data": dict(data), "by": fleet.configmap_version}
                        self._cm_version = fleet.configmap_version
                    fx.append(router)
                else:
                    def gateway() -> None:
                        fleetops.set_gateway_config(fleet, data)
                        self.written[key] = {"data": dict(data)}
                    fx.append(gateway)
            return fx
        if kind == "HTTPRoute":
            old_rules, new_rules = spec_old.get("rules") or [], spec_new.get("rules") or []

            def strip(rules: list[Any]) -> list[Any]:
                out = copy.deepcopy(rules)
                for r in out:
                    for b in r.get("backendRefs") or []:
                        b.pop("weight", None)
                return out
            if strip(old_rules) != strip(new_rules) or {k: v for k, v in spec_old.items() if k != "rules"} != {
                    k: v for k, v in spec_new.items() if k != "rules"}:
                raise invalid(rt, name, ["spec: Forbidden: the simulator models only backendRefs[].weight"])
            refs = (new_rules[0].get("backendRefs") if new_rules else None) or []
            weights = {b.get("name"): b.get("weight", 1) for b in refs}
            for n, w in weights.items():
                if not isinstance(w, int) or isinstance(w, bool) or not 0 <= w <= 1_000_000:
                    raise invalid(rt, name, [f"spec.rules[0].backendRefs[{n}].weight: Invalid value: {w!r}: "
                                             "must be between 0 and 1000000"])
            canary = weights.get(f"{fleet.cfg.deployment}-canary")
            if canary is not None:
                stable = int(weights.get(fleet.cfg.deployment, 0))
                fx.append(lambda: fleetops.set_canary_weights(fleet, stable, int(canary)))
            return fx
        unsupported(())
        return fx

    def _pod(self, name: str) -> Pod:
        p = self.fleet.by_name.get(name)
        if p is None or p.state == TERMINATED:
            raise not_found(_rt("Pod"), name)
        return p

    def _after_owned_change(self, rt: ResourceType) -> None:
        if rt.kind == "BackendTrafficPolicy":
            fleetops.apply_rate_limits(self.fleet, [o for (k, _, _), o in self.store.items() if k == rt.key])

    def _validate_meta(self, rt: ResourceType, name: str, meta: dict[str, Any]) -> None:
        errors = label_errors(meta.get("labels"))
        if errors:
            raise invalid(rt, name, errors)

    def _validate_owned(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if rt.kind == "PodDisruptionBudget":
            spec = obj.get("spec") or {}
            if ("minAvailable" in spec) == ("maxUnavailable" in spec):
                raise invalid(rt, name, ["spec: Invalid value: minAvailable and maxUnavailable cannot be both set "
                                         "(exactly one is required here)"])
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
                out["metadata"]["deletionTimestamp"] = render.ts(self.fleet, self.fleet.now)
                out["metadata"]["deletionGracePeriodSeconds"] = 30 if grace is None else int(grace)
                if dry_run:
                    return out
                pod = self._pod(name)
                created = fleetops.delete_pod(self.fleet, pod, self.fleet.now, graceful=grace != 0)
                if render.lws_mode(self.fleet):
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
        self.api_events.append(render.api_event(self.fleet, name, kind, reason, message,
                                                10**9 + len(self.api_events)))
        del self.api_events[:-200]

    def evict(self, ns: str, name: str, body: Any, dry_run: bool) -> dict[str, Any]:
        rt = _rt("Pod")
        with self.lock:
            cur = self.get(rt, ns, name)
            opts = (body or {}).get("deleteOptions") or {} if isinstance(body, dict) else {}
            dry_run = dry_run or "All" in (opts.get("dryRun") or [])
            labels = cur["metadata"].get("labels") or {}
            pdbs = [o for (k, ons, _), o in self.store.items() if k == "poddisruptionbudgets.policy" and ons == ns
                    and _selects((o.get("spec") or {}).get("selector") or {}, labels)]
            if len(pdbs) > 1:
                raise ApiStatus(500, "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                                "does not support.")
            pod = self._pod(name)
            if pdbs and pod.state == READY:
                pdb = pdbs[0]
                spec = pdb.get("spec") or {}
                sel = spec.get("selector") or {}
                members = [o for (k, ons, _), o in self.store.items() if k == "pods" and ons == ns
                           and _selects(sel, o["metadata"].get("labels") or {})]
                healthy = sum(1 for o in members if any(c["type"] == "Ready" and c["status"] == "True"
                                                        for c in o["status"]["conditions"]))
                expected = len(members)
                if "minAvailable" in spec:
                    desired = _count(spec["minAvailable"], expected, up=True)
                else:
                    desired = expected - _count(spec["maxUnavailable"], expected, up=True)
                if healthy - 1 < desired:
                    raise ApiStatus(429, "Cannot evict pod as it would violate the pod's disruption budget.",
                                    reason="TooManyRequests", details={"causes": [{
                                        "reason": "DisruptionBudget",
                                        "message": f"The disruption budget {pdb['metadata']['name']} needs "
                                                   f"{desired} healthy pods and has {healthy} currently"}]})
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
            new = self._patched(_rt("Deployment"), scale, content_type, body, name) if content_type else body
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


def _count(v: Any, total: int, up: bool) -> int:
    if isinstance(v, str) and v.endswith("%"):
        x = total * float(v[:-1]) / 100
        return math.ceil(x) if up else math.floor(x)
    return int(v)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if (op == "In" and labels.get(k) not in vals) or (op == "NotIn" and labels.get(k) in vals) or (
                op == "Exists" and k not in labels) or (op == "DoesNotExist" and k in labels):
            return False
    return True


def _fields(obj: dict[str, Any]) -> dict[str, str]:
    m = obj["metadata"]
    out = {"metadata.name": m["name"], "metadata.namespace": m.get("namespace", "")}
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod" or "nodeName" in spec:
        out["spec.nodeName"] = str(spec.get("nodeName", ""))
        out["status.phase"] = str((obj.get("status") or {}).get("phase", ""))
    if "unschedulable" in spec or obj.get("kind") == "Node":
        out["spec.unschedulable"] = "true" if spec.get("unschedulable") else "false"
    return out


_REQ = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")
_SET = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EXISTS = re.compile(r"^\s*(!?)([A-Za-z0-9_./-]+)\s*$")


def parse_selector(text: str) -> Callable[[dict[str, str]], bool]:
    """Label (and field) selector syntax: `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`."""
    reqs: list[tuple[str, str, frozenset[str]]] = []
    for part in _split(text or ""):
        m = _REQ.match(part)
        if m:
            k, op, v = m.groups()
            reqs.append(("notin" if op == "!=" else "in", k, frozenset({v})))
            continue
        m = _SET.match(part)
        if m:
            reqs.append((m.group(2), m.group(1), frozenset(x.strip() for x in m.group(3).split(","))))
            continue
        m = _EXISTS.match(part)
        if m:
            reqs.append(("!" if m.group(1) else "exists", m.group(2), frozenset()))
            continue
        raise ApiStatus(400, f"unable to parse requirement: {part!r}")

    def match(labels: dict[str, str]) -> bool:
        for op, k, vals in reqs:
            v = labels.get(k)
            if (op == "in" and v not in vals) or (op == "notin" and v in vals) or (op == "exists" and v is None) or (
                    op == "!" and v is not None):
                return False
        return True
    return match


def _split(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p for p in out if p.strip()]


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()
