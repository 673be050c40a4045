"""The cluster's controllers over the fleet: a write to an object the fleet implies (Node, Pod, Deployment or
LeaderWorkerSet, the router and gateway ConfigMaps, the HTTPRoute) is validated against what the simulator models
and becomes effects on the fleet (`fleetops`): cordon and taints, the context-length label, scale and a new
template, the router's dynamic config, the gateway's cap, canary weights. ConfigMap data written through the API
is kept here: the fleet's ConfigMaps hold what was written."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from typing import Any

from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi import autoscaling, fleetops, identity, nodes, routing, templates
from llm_oncall.sim.kubeapi.model import BY_KIND, Key, ResourceType, invalid, not_found
from llm_oncall.sim.pods import TERMINATED, Pod


class Controllers:
    def __init__(self, fleet: Fleet, book: identity.Bookkeeping) -> None:
        self.fleet = fleet
        self.book = book
        self.written: dict[Key, dict[str, Any]] = {}
        """ConfigMap data written through the API (the fleet's ConfigMaps keep what was written)."""
        self.cm_version = fleet.configmap_version

    def configmap(self, derived: dict[str, Any], name: str) -> dict[str, Any]:
        """One of the fleet's ConfigMaps as derived, with the data written through the API (until the fleet
        itself changes the router's)."""
        key: Key = ("configmaps", self.fleet.cfg.namespace, name)
        written = self.written.get(key)
        if name == routing.ROUTER_CONFIGMAP and self.fleet.configmap_version != self.cm_version:
            self.cm_version = self.fleet.configmap_version  # changed inside the fleet: what it holds now
            if written is not None and written.get("by") != self.cm_version:
                self.written.pop(key, None)
                written = None
        if written is not None:
            derived["data"] = dict(written["data"])
        return derived


    def effects(self, rt: ResourceType, key: Key, cur: dict[str, Any],
                new: dict[str, Any]) -> list[Callable[[], None]]:
        """Validate a write to a fleet-derived object against what the simulator models; the effects to run on
        the fleet once it is accepted (none for a dry run)."""
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
            taints = [t_ for t_ in spec_new.get("taints") or [] if t_.get("key") != nodes.UNSCHEDULABLE_TAINT]
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
                    tn.setdefault("timeAdded", identity.ts(fleet, t))
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
            before = (cur["metadata"].get("labels") or {}).get(routing.CONTEXT_RANGE)
            after = (new["metadata"].get("labels") or {}).get(routing.CONTEXT_RANGE)
            if before != after:
                if after is not None and not re.fullmatch(r"\d+-\d+", after):
                    raise invalid(rt, name, [f"metadata.labels[{routing.CONTEXT_RANGE}]: the scorer reads "
                                             f"\"min-max\" (got {after!r})"])
                pod = self.pod(name)
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
                parsed = templates.parse_template(tpl_new)
                if isinstance(parsed, str):
                    raise invalid(rt, name, [parsed])
                fx.append(lambda: fleetops.set_template(fleet, parsed, t, self.book))
            return fx
        if kind == "ConfigMap":
            data = new.get("data") or {}
            if data != (cur.get("data") or {}):
                if name == routing.ROUTER_CONFIGMAP:
                    text = str(data.get(routing.ROUTER_KEY, ""))

                    def router() -> None:
                        fleetops.set_router_config(fleet, text, t)
                        self.written[key] = {"data": dict(data), "by": fleet.configmap_version}
                        self.cm_version = fleet.configmap_version
                    fx.append(router)
                else:
                    def gateway() -> None:
                        fleetops.set_gateway_config(fleet, data)
                        self.written[key] = {"data": dict(data)}
                    fx.append(gateway)
            return fx
        if kind == "HorizontalPodAutoscaler":
            unsupported(("minReplicas", "maxReplicas"))
            errors = autoscaling.validate_hpa(name, spec_new)
            if errors:
                raise invalid(rt, name, errors)
            lo, hi = int(spec_new.get("minReplicas", 1)), int(spec_new["maxReplicas"])
            if (lo, hi) != (fleet.hpa.min_replicas, fleet.hpa.max_replicas):
                fx.append(lambda: fleet.hpa.set_bounds(lo, hi))
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

    def pod(self, name: str) -> Pod:
        """The live pod of this name (404 otherwise)."""
        p = self.fleet.by_name.get(name)
        if p is None or p.state == TERMINATED:
            raise not_found(BY_KIND["Pod"], name)
        return p
