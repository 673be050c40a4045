"""The repair ladder's executors: restart a pod, reset a GPU (a Job running nvidia-smi -r on its node once nothing
uses it), reboot a node (a Job on it, once drained), open a hardware ticket (a Node annotation; the loop notifies).

Each handler has its own guard (`check`: what must hold before the call), idempotency (`landed`) and verification
(`effect`: did the rung do what it is for — the Job succeeded, the node came back with a new bootID, the ticket is
on the node). Commands are argv lists whose variable parts were validated by the plan (actions/ladder.py) and are
validated again here.
"""

from __future__ import annotations

from typing import Any

from llm_oncall.actions.kube import Kube, KubeError
from llm_oncall.actions.ladder import MANAGED, REBOOT_ARGV, RESET_ARGV, check_gpu
from llm_oncall.actions.model import Action, Blocked, TargetChanged


def _gone(kube: Kube, ns: str, names: list[str], uids: list[str]) -> list[str]:
    """Which of these pods still exist (same uid) — terminating ones included: they may still hold the GPU."""
    left = []
    for name, uid in zip(names, uids, strict=False):
        try:
            pod = kube.get("Pod", name, ns)
        except KubeError as exc:
            if exc.code == 404:
                continue
            raise
        if pod["metadata"]["uid"] == uid:
            left.append(name)
    return left


def _job(a: Action, kind: str, argv: list[str], host_pid: bool) -> dict[str, Any]:
    node = str(a.params["node"])
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": a.target.name, "namespace": a.target.namespace,
                         "labels": {**MANAGED, "llm-oncall.io/repair": kind},
                         "annotations": {"llm-oncall.io/incident": str(a.params.get("_incident_key", "")),
                                         "llm-oncall.io/rung": str(a.params.get("rung", ""))}},
            "spec": {"backoffLimit": 0, "ttlSecondsAfterFinished": 86_400,
                     "template": {"metadata": {"labels": {**MANAGED, "llm-oncall.io/repair": kind}},
                                  "spec": {"nodeName": node, "restartPolicy": "Never", "hostPID": host_pid,
                                           "tolerations": [{"operator": "Exists"}],
                                           "containers": [{
                                               "name": kind, "image": str(a.params["image"]), "command": argv,
                                               "securityContext": {"privileged": True},
                                               "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                                                       {"name": "NVIDIA_DRIVER_CAPABILITIES",
                                                        "value": "utility"}]}]}}}}


def _job_state(kube: Kube, a: Action) -> tuple[bool | None, str]:
    try:
        job = kube.get("Job", a.target.name, a.target.namespace)
    except KubeError as exc:
        if exc.code == 404:
            return False, f"Job {a.target.name} not found"
        raise
    st = job.get("status") or {}
    conds = {c.get("type"): c for c in st.get("conditions") or [] if c.get("status") == "True"}
    if int(st.get("succeeded") or 0) > 0 or "Complete" in conds:
        return True, f"Job {a.target.name} succeeded"
    if int(st.get("failed") or 0) > 0 or "Failed" in conds:
        msg = (conds.get("Failed") or {}).get("message") or "failed"
        return False, f"Job {a.target.name} failed: {msg}"
    return None, f"Job {a.target.name} still running"


class _JobRung:
    kind = ""

    def argv(self, a: Action) -> list[str]:
        raise NotImplementedError

    def check(self, kube: Kube, a: Action) -> None:
        node = kube.get("Node", str(a.params["node"]))
        if not node["spec"].get("unschedulable"):
            raise Blocked(f"node {a.params['node']} is schedulable: a new pod could take the GPU; cordon it first")
        left = _gone(kube, str(a.params["namespace"]), list(a.params.get("pods") or []),
                     list(a.precondition.get("uids") or []))
        if left:
            raise Blocked(f"still in use by pod(s) {', '.join(left)} (evict them first): {self.kind} waits")

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        argv = self.argv(a)
        try:
            kube.create("Job", _job(a, self.kind, argv, self.kind == "reboot-node"), a.target.namespace, dry_run)
        except KubeError as exc:
            if exc.code == 409 and not dry_run:
                return {"job": a.target.name, "argv": argv, "already": True}
            raise
        return {"job": a.target.name, "node": a.params["node"], "argv": argv}

    def landed(self, kube: Kube, a: Action) -> bool:
        return kube.exists("Job", a.target.name, a.target.namespace)


class ResetGpu(_JobRung):
    kind = "reset-gpu"

    def argv(self, a: Action) -> list[str]:
        return [*RESET_ARGV, check_gpu(str(a.params["gpu"]))]

    def effect(self, kube: Kube, a: Action) -> tuple[bool, str]:
        ok, why = _job_state(kube, a)
        return bool(ok), why + ("" if ok else " (the GPU was not reset)")


class RebootNode(_JobRung):
    kind = "reboot-node"

    def argv(self, a: Action) -> list[str]:
        return list(REBOOT_ARGV)

    def check(self, kube: Kube, a: Action) -> None:
        node = kube.get("Node", str(a.params["node"]))
        boot = ((node.get("status") or {}).get("nodeInfo") or {}).get("bootID", "")
        if boot != a.precondition.get("bootID") and not self.landed(kube, a):
            raise TargetChanged(f"node {a.params['node']} rebooted since the plan (bootID changed)")
        super().check(kube, a)

    def effect(self, kube: Kube, a: Action) -> tuple[bool, str]:
        node = kube.get("Node", str(a.params["node"]))
        st = node.get("status") or {}
        boot = (st.get("nodeInfo") or {}).get("bootID", "")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
        if boot == a.precondition.get("bootID"):
            return False, f"node {a.params['node']} did not reboot (same bootID); {_job_state(kube, a)[1]}"
        return ready, f"node {a.params['node']} rebooted (new bootID) and is {'Ready' if ready else 'not Ready'}"


class HardwareTicket:
    """The ticket itself goes to the notify target (the loop notifies `hardware_ticket`); the Node carries its
    reference so the next on-call sees it (`kubectl describe node`), and it is idempotent by that annotation."""

    def check(self, kube: Kube, a: Action) -> None:
        kube.get("Node", a.target.name)

    def apply(self, kube: Kube, a: Action, dry_run: bool) -> Any:
        ann = {str(a.params["annotation"]): str(a.params["ticket"])}
        kube.patch("Node", a.target.name, {"metadata": {"annotations": ann}}, "merge", dry_run=dry_run)
        return {"ticket": a.params["ticket"], "summary": a.params.get("summary"), "annotations": ann}

    def landed(self, kube: Kube, a: Action) -> bool:
        ann = kube.get("Node", a.target.name)["metadata"].get("annotations") or {}
        return ann.get(str(a.params["annotation"])) == str(a.params["ticket"])

    def effect(self, kube: Kube, a: Action) -> tuple[bool, str]:
        node = kube.get("Node", a.target.name)
        marked = (node["metadata"].get("annotations") or {}).get(str(a.params["annotation"])) == a.params["ticket"]
        cordoned = bool(node["spec"].get("unschedulable"))
        return marked and cordoned, (f"node {a.target.name}: ticket {'on' if marked else 'missing'}, "
                                     f"{'cordoned' if cordoned else 'NOT cordoned'}")
