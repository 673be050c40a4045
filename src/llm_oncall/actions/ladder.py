"""The gpu-ecc runbook's `gpu_repair` step: the GPU repair ladder's rung for the evidence, as typed actions.

The rung comes from the Xid catalogue (evidence/repair.py: each code's rung, the DCGM health classes); this
module only finds the GPU(s) the evidence names, asks the catalogue, and turns the rung's action kinds into
actions on named objects. A GPU or node that is a repeat offender (policy `repeat_offender`, counted in the
store's GPU history) goes straight to the last rung.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.actions.ledger import Ledger
from llm_oncall.actions.model import Action, ActionTarget, UnsafeName, check_name
from llm_oncall.diagnosis.engine import Diagnosis
from llm_oncall.evidence import repair, xid
from llm_oncall.signals.snapshot import Snapshot

if TYPE_CHECKING:
    from llm_oncall.actions.guard import RepeatOffender


class Scope(Protocol):
    """What the plan resolved (actions/plan.py Scope): this module needs only these."""

    namespace: str
    nodes: list[str]
    pods: list[dict[str, Any]]
    selector: dict[str, str]

RESET_IMAGE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
"""nvidia-smi comes from the driver through the NVIDIA container toolkit (NVIDIA_DRIVER_CAPABILITIES=utility)."""
REBOOT_IMAGE = "ubuntu:24.04"
"""nsenter (util-linux) into PID 1's namespaces runs the host's systemctl."""
RESET_ARGV = ("nvidia-smi", "-r", "-i")
REBOOT_ARGV = ("nsenter", "--target", "1", "--mount", "--uts", "--ipc", "--net", "--pid", "--", "systemctl",
               "reboot")
TICKET_ANNOTATION = "llm-oncall.io/hardware-ticket"
MANAGED = {"app.kubernetes.io/managed-by": "llm-oncall"}
_GPU_UUID = re.compile(r"^GPU-[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")
_GPU_INDEX = re.compile(r"^[0-9]{1,2}$")
_XID_EVIDENCE = re.compile(r"^evidence:xid_([0-9]+)$")
ECC_CODES = frozenset(c for c, e in xid.catalog().items() if e.incident_hint == "gpu-ecc")


def check_gpu(value: str) -> str:
    """A GPU id that may reach nvidia-smi's argv: an NVML UUID or an index, nothing else."""
    if not isinstance(value, str) or not (_GPU_UUID.match(value) or _GPU_INDEX.match(value)):
        raise UnsafeName(f"refusing GPU id {value!r}: not a GPU UUID or index (it would reach a command)")
    return value


@dataclass
class BadGpu:
    node: str
    gpu: str
    """nvidia-smi -i: the UUID where DCGM gives one, else the index."""
    index: str
    pods: list[str] = field(default_factory=list)
    codes: set[int] = field(default_factory=set)
    health: set[str] = field(default_factory=set)


def bad_gpus(snapshots: Sequence[Snapshot], d: Diagnosis, nodes: Sequence[str]) -> list[BadGpu]:
    """The GPUs of the scoped nodes whose DCGM fields or Xids (over the window) report a GPU fault."""
    out: dict[tuple[str, str], BadGpu] = {}
    for snap in snapshots:
        for g in snap.gpus:
            if g.node not in nodes:
                continue
            health = set()
            if (g.ecc_dbe_increase or 0) > 0:
                health.add("ecc_dbe")
            if (g.ecc_sbe_increase or 0) > 10:
                health.add("ecc_sbe_high")
            if (g.row_remap_pending or 0) > 0:
                health.add("row_remap_pending")
            if (g.row_remap_failure or 0) > 0:
                health.add("row_remap_failure")
            code = int(g.xid_last) if g.xid_last else 0
            if not health and code not in ECC_CODES:
                continue
            b = out.setdefault((g.node, g.gpu), BadGpu(g.node, g.uuid or g.gpu, g.gpu))
            b.health |= health
            if code in ECC_CODES:
                b.codes.add(code)
            if g.pod and g.pod not in b.pods:
                b.pods.append(g.pod)
    logged = {int(m.group(1)) for e in d.evidence if (m := _XID_EVIDENCE.match(e.signal))}
    for b in out.values():  # the kernel log's Xids are the node's: they go with its faulty GPU(s)
        b.codes |= logged & ECC_CODES
    return sorted(out.values(), key=lambda b: (b.node, b.index))


def plan(kube: Kube, scope: Scope, d: Diagnosis, snapshots: Sequence[Snapshot], ledger: Ledger | None,
         repeat: RepeatOffender, incident_key: str, now: float) -> list[Action]:
    gpus = bad_gpus(snapshots, d, scope.nodes)
    if not gpus:
        raise KubeError(404, "NotFound", "no GPU with a fault in the telemetry of the scoped nodes "
                        f"{', '.join(scope.nodes) or '(none)'}: nothing on the repair ladder", "list", "nodes", "")
    out: list[Action] = []
    for b in gpus:
        check_name(b.node, "node name")
        gpu = check_gpu(b.gpu)
        offender = _repeat(ledger, b, repeat, incident_key, now)
        decision = repair.choose(b.codes, b.health, offender)
        if decision is None:
            continue
        if ledger is not None:
            ledger.record_gpu_incident(b.node, gpu, incident_key, now, decision.rung)
        why = f"{decision.rung} for GPU {b.index} on {b.node}: {decision.why}"
        for kind in repair.ladder().rung(decision.rung).actions:
            out.extend(_action(kube, kind, scope, b, gpu, decision, why, incident_key))
    return _dedup(out)


def _repeat(ledger: Ledger | None, b: BadGpu, policy: RepeatOffender, key: str, now: float) -> str | None:
    if ledger is None:
        return None
    since = now - policy.days * 86_400.0
    same_gpu = ledger.gpu_incidents(b.node, b.gpu, since, exclude=key)
    same_node = ledger.gpu_incidents(b.node, None, since, exclude=key)
    if len(same_gpu) + 1 >= policy.incidents:
        return f"GPU {b.index} on {b.node}: {len(same_gpu) + 1} incidents in {policy.days:g} days"
    if len(same_node) + 1 >= policy.incidents:
        return f"node {b.node}: {len(same_node) + 1} GPU incidents in {policy.days:g} days"
    return None


def _action(kube: Kube, kind: str, scope: Scope, b: BadGpu, gpu: str, decision: repair.Decision, why: str,
            key: str) -> list[Action]:
    ns, node_t = scope.namespace, ActionTarget(kind="Node", namespace="", name=b.node)
    common = {"rung": decision.rung, "gpu": gpu, "gpu_index": b.index, "node": b.node,
              "xids": sorted(decision.codes), "health": sorted(decision.health)}
    pods = [p for p in kube.list("Pod", ns, scope.selector or None) if (p.get("spec") or {}).get("nodeName") == b.node
            and not p["metadata"].get("deletionTimestamp")]
    on_gpu = [p for p in pods if p["metadata"]["name"] in b.pods] or [
        p for p in pods if p["metadata"]["name"] in {x["metadata"]["name"] for x in scope.pods}]
    if kind == "restart_pod":
        return [Action(id="", kind="restart_pod",
                       target=ActionTarget(kind="Pod", namespace=ns, name=p["metadata"]["name"]),
                       params={**common, "pods": [p["metadata"]["name"]]},
                       precondition={"uid": p["metadata"]["uid"]},
                       why=f"{why}: restart pod {p['metadata']['name']} (delete; its controller recreates it)")
                for p in on_gpu]
    if kind == "cordon_node":
        n = kube.get("Node", b.node)
        return [Action(id="", kind="cordon_node", target=node_t, params=dict(common),
                       precondition={"resourceVersion": n["metadata"]["resourceVersion"]},
                       revert={"unschedulable": False}, why=f"{why}: cordon {b.node}: nothing new lands there")]
    if kind == "evict_pods":
        chosen = on_gpu if decision.rung == "reset_gpu" else pods
        if not chosen:
            return []
        what = f"the pods on GPU {b.index}" if decision.rung == "reset_gpu" else f"the pods of {ns} on {b.node}"
        return [Action(id="", kind="evict_pods", target=node_t,
                       params={**common, "pods": [p["metadata"]["name"] for p in chosen]},
                       precondition={"uids": [p["metadata"]["uid"] for p in chosen]},
                       why=f"{why}: evict {what} ({len(chosen)}) so they reschedule elsewhere")]
    if kind == "reset_gpu":
        name = _job_name("gpu-reset", b.node, gpu, key)
        job = ActionTarget(kind="Job", namespace=ns, name=name, api_version="batch/v1")
        return [Action(id="", kind="reset_gpu", target=job,
                       params={**common, "job": name, "namespace": ns, "image": RESET_IMAGE,
                               "argv": [*RESET_ARGV, gpu], "pods": [p["metadata"]["name"] for p in on_gpu]},
                       precondition={"uids": [p["metadata"]["uid"] for p in on_gpu]},
                       why=f"{why}: once nothing uses it, Job {name} runs {' '.join([*RESET_ARGV, gpu])} on "
                           f"{b.node}")]
    if kind == "reboot_node":
        n = kube.get("Node", b.node)
        boot = ((n.get("status") or {}).get("nodeInfo") or {}).get("bootID", "")
        name = _job_name("node-reboot", b.node, "", key)
        job = ActionTarget(kind="Job", namespace=ns, name=name, api_version="batch/v1")
        return [Action(id="", kind="reboot_node", target=job,
                       params={**common, "job": name, "namespace": ns, "image": REBOOT_IMAGE,
                               "argv": list(REBOOT_ARGV), "pods": [p["metadata"]["name"] for p in pods]},
                       precondition={"bootID": boot, "uids": [p["metadata"]["uid"] for p in pods]},
                       why=f"{why}: once drained, Job {name} reboots {b.node} (systemctl reboot in the host's "
                           "namespaces); verified by a new bootID and Ready")]
    if kind == "hardware_ticket":
        return [Action(id="", kind="hardware_ticket", target=node_t,
                       params={**common, "annotation": TICKET_ANNOTATION, "ticket": key,
                               "summary": f"{b.node} GPU {b.index} ({gpu}): {decision.why}"},
                       why=f"{why}: open a hardware ticket (notify) and mark the node "
                           f"({TICKET_ANNOTATION})")]
    raise ValueError(f"the repair ladder names an unknown action kind {kind!r}")


def _job_name(prefix: str, node: str, gpu: str, key: str) -> str:
    digest = hashlib.sha256(f"{node}/{gpu}/{key}".encode()).hexdigest()[:8]
    return check_name(f"{prefix}-{node[:40].rstrip('-.')}-{digest}", "job name")


def _dedup(actions: list[Action]) -> list[Action]:
    """Two bad GPUs on one node: one cordon, one drain per node (the first rung's), one reboot."""
    seen: dict[tuple[str, str], Action] = {}
    out = []
    for a in actions:
        k = (a.kind, a.target.ref() if a.kind != "reboot_node" else str(a.params["node"]))
        first = seen.get(k)
        if first is None:
            seen[k] = a
            out.append(a)
        elif a.kind == "evict_pods":
            for name, uid in zip(a.params["pods"], a.precondition["uids"], strict=True):
                if name not in first.params["pods"]:
                    first.params["pods"].append(name)
                    first.precondition["uids"].append(uid)
    return out
