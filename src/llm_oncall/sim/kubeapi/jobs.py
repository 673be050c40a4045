"""batch/v1 Jobs the simulator runs: the repair commands a GPU-health tool runs on a node.

A Job pinned to a node (`spec.template.spec.nodeName`) whose container command is one of these runs against the
fleet; anything else fails as an image the simulator cannot run:
- `nvidia-smi -r -i ID` (ID: index, UUID or PCI bus id): resets that GPU — as the real tool, only when no
  process uses it ("In use by another client") and only when the GPU is still on the bus ("GPU is lost");
  a reset clears the volatile ECC counters, applies pending row remaps and clears an ECC fault.
- `nsenter … -- systemctl reboot`: the node goes NotReady, its pods die (their controllers recreate them
  elsewhere), it comes back REBOOT_S later with a new bootID and its GPUs re-initialised (a GPU off the bus is
  back; a GPU with a hardware fault is not).
"""

from __future__ import annotations

from typing import Any

from llm_oncall.sim.dcgm import PCI_BUSES, Gpu
from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.kubeapi import fleetops, identity
from llm_oncall.sim.pods import TERMINATED

REBOOT_S = 90.0
"""A GPU node's reboot: firmware, kernel, driver load, kubelet Ready."""


def _argv(job: dict[str, Any]) -> tuple[str, list[str]]:
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    cs = spec.get("containers") or [{}]
    argv = [str(x) for x in (cs[0].get("command") or []) + (cs[0].get("args") or [])]
    return str(spec.get("nodeName") or ""), argv


def _gpu(fleet: Fleet, node: str, ident: str) -> Gpu | None:
    for g in fleet.gpus.get(node, []):
        pci = f"0000:{PCI_BUSES[g.index % 8]}:00"
        if ident in (str(g.index), g.uuid) or ident.lower().startswith(pci) or \
                ident.lower().lstrip("0").startswith(pci.lstrip("0")):
            return g
    return None


def reset_gpu_state(g: Gpu) -> None:
    """What a successful `nvidia-smi -r` leaves: volatile ECC counters, pending remaps and the last Xid cleared
    (the reset Job here and the twin's model of it)."""
    g.sbe_vol = g.dbe_vol = 0
    g.remap_pending = 0
    g.xid = 0
    g.fault = ""


def run(fleet: Fleet, job: dict[str, Any]) -> None:
    """Run the Job now and write its status (succeeded/failed, conditions) into it."""
    node, argv = _argv(job)
    ok, message = _execute(fleet, node, argv)
    now = identity.ts(fleet, fleet.now)
    cond = {"type": "Complete" if ok else "Failed", "status": "True", "lastProbeTime": now,
            "lastTransitionTime": now, "message": message}
    if not ok:
        cond["reason"] = "BackoffLimitExceeded"
    job["status"] = {"startTime": now, "completionTime": now, "succeeded" if ok else "failed": 1,
                     "conditions": [cond]}
    fleet.record_event(fleet.now, "job", f"Job {job['metadata']['name']} on {node or '(unscheduled)'}: "
                       f"{' '.join(argv)}: {message}")


def _execute(fleet: Fleet, node: str, argv: list[str]) -> tuple[bool, str]:
    if node not in fleet.gpus:
        return False, f"node {node!r} not found (spec.template.spec.nodeName)"
    if node in fleet.rebooting:
        return False, f"node {node} is not Ready (rebooting)"
    if argv[:3] == ["nvidia-smi", "-r", "-i"] and len(argv) == 4:
        g = _gpu(fleet, node, argv[3])
        if g is None:
            return False, f"No devices were found matching {argv[3]} (exit 6)"
        if g.fault in ("off_bus", "hardware"):
            return False, (f"Unable to determine the device handle for GPU {g.uuid}: GPU is lost. Reboot the system "
                           "to recover this GPU (exit 15)")
        users = [p.name for p in fleet.pods if p.state != TERMINATED and g in p.gpus]
        if users:
            return False, (f"GPU {g.uuid} is currently in use by another client ({', '.join(users)}); unable to "
                           "reset this GPU (exit 255)")
        reset_gpu_state(g)
        return True, f"GPU {g.uuid} was successfully reset."
    if argv[-2:] == ["systemctl", "reboot"] and argv[0] == "nsenter":
        reboot(fleet, node)
        return True, f"{node}: reboot requested"
    return False, f"the simulator cannot run {argv!r} (ErrImagePull)"


def reboot(fleet: Fleet, node: str) -> None:
    fleet.rebooting.add(node)
    fleet.boots[node] = fleet.boots.get(node, 0) + 1
    for p in [x for x in fleet.pods if x.node == node and x.state != TERMINATED]:
        fleetops.delete_pod(fleet, p, fleet.now, graceful=False)

    def up(t: float) -> None:
        fleet.rebooting.discard(node)
        for g in fleet.gpus.get(node, []):
            if g.fault != "hardware":
                reset_gpu_state(g)
    fleet.schedule(fleet.now + REBOOT_S, up)
