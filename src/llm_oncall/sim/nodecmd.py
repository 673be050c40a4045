"""Node and pod commands of the simulated fleet, answered in the real tools' output formats: `nvidia-smi -q`
(the ECC, row-remapper and performance sections), `nvidia-smi nvlink -e`, `dmesg`, `py-spy dump`, and the
`kubectl get pods | events | hpa`, `kubectl logs`, `kubectl rollout history` tables. They read the fleet's state
(GPU counters, kernel log, engines, pods, events) — what a shell on the node or in the pod would read. The
evidence parsers (evidence/) read these outputs in tests exactly as they read a real fleet's.
"""

from __future__ import annotations

import time

from llm_oncall.sim.dcgm import DRIVER, MODEL, PCI_BUSES, Gpu
from llm_oncall.sim.fleet import Fleet
from llm_oncall.sim.pods import CRASHLOOP, DOWN, READY, STARTING, TERMINATED, Pod

BOOT = [
    "[    0.000000] Linux version 6.8.0-1015-nvidia (buildd@lcy02-amd64-017) (x86_64-linux-gnu-gcc-13) #16-Ubuntu",
    "[   14.208311] nvidia: module license 'NVIDIA' taints kernel.",
    f"[   14.803150] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  {DRIVER}  Tue Oct  8 03:18:49 UTC 2024",
    "[   15.002140] nvidia-nvswitch: Probing device 0000:05:00.0, Vendor Id = 0x10de, Device Id = 0x22a3",
]


def _stamp(fleet: Fleet) -> str:
    return time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(fleet.cfg.epoch + fleet.now))


def _gpu_head(g: Gpu) -> list[str]:
    return [f"GPU 00000000:{PCI_BUSES[g.index % 8].upper()}:00.0",
            f"    Product Name                          : {MODEL}",
            "    Product Brand                         : NVIDIA",
            f"    GPU UUID                              : {g.uuid}"]


def _ecc(g: Gpu) -> list[str]:
    def block(title: str, sbe: int, dbe: int) -> list[str]:
        return [f"        {title}",
                "            SRAM Correctable              : 0",
                "            SRAM Uncorrectable Parity     : 0",
                "            SRAM Uncorrectable SEC-DED    : 0",
                f"            DRAM Correctable              : {sbe}",
                f"            DRAM Uncorrectable            : {dbe}"]
    return ["    ECC Mode", "        Current                           : Enabled",
            "        Pending                           : Enabled", "    ECC Errors",
            *block("Volatile", g.sbe_vol, g.dbe_vol), *block("Aggregate", g.sbe_agg, g.dbe_agg),
            "    Retired Pages", "        Single Bit ECC                    : N/A",
            "        Double Bit ECC                    : N/A", "        Pending Page Blacklist            : N/A"]


def _remap(g: Gpu) -> list[str]:
    return ["    Remapped Rows",
            f"        Correctable Error                 : {g.remapped_corr}",
            f"        Uncorrectable Error               : {g.remapped_uncorr}",
            f"        Pending                           : {'Yes' if g.remap_pending else 'No'}",
            f"        Remapping Failure Occurred        : {'Yes' if g.remap_failure else 'No'}",
            "        Bank Remap Availability Histogram",
            f"            Max                           : {2560 - g.remapped_uncorr - g.remapped_corr} bank(s)",
            f"            High                          : {g.remapped_uncorr + g.remapped_corr} bank(s)",
            "            Partial                       : 0 bank(s)",
            "            Low                           : 0 bank(s)",
            "            None                          : 0 bank(s)"]


def _performance(g: Gpu) -> list[str]:
    slow = g.clock_factor < 0.95
    act = "Active" if slow else "Not Active"
    return ["    Performance State                     : P0", "    Clocks Event Reasons",
            "        Idle                              : Not Active",
            "        Applications Clocks Setting       : Not Active",
            f"        SW Power Cap                      : {act}",
            "        HW Slowdown                       : Not Active",
            "            HW Thermal Slowdown           : Not Active",
            "            HW Power Brake Slowdown       : Not Active",
            "        Sync Boost                        : Not Active",
            f"        SW Thermal Slowdown               : {act}",
            "        Display Clock Setting             : Not Active",
            "    Clocks",
            f"        Graphics                          : {int(1980 * g.clock_factor)} MHz",
            f"        SM                                : {int(1980 * g.clock_factor)} MHz",
            "        Memory                            : 2619 MHz",
            f"    GPU Current Temp                      : {int(48 + 40 * g.busy + (25 if slow else 0))} C",
            "    Utilization", f"        Gpu                               : {int(100 * g.busy)} %"]


SECTIONS = {"ECC": _ecc, "ROW_REMAPPER": _remap, "PERFORMANCE": _performance}


def nvidia_smi_q(fleet: Fleet, node: str, display: str | None = None) -> str:
    """`nvidia-smi -q [-d ECC|ROW_REMAPPER|PERFORMANCE]` on `node` (every section without -d)."""
    gpus = fleet.gpus[node]
    wanted = [s.strip().upper() for s in display.split(",")] if display else list(SECTIONS)
    bad = [s for s in wanted if s not in SECTIONS]
    if bad:
        raise ValueError(f"nvidia-smi: unknown display section {bad[0]} (ECC, ROW_REMAPPER, PERFORMANCE)")
    out = ["", "==============NVSMI LOG==============", "",
           f"Timestamp                                 : {_stamp(fleet)}",
           f"Driver Version                            : {DRIVER}",
           "CUDA Version                              : 12.4", "",
           f"Attached GPUs                             : {len(gpus)}"]
    for g in gpus:
        out += _gpu_head(g)
        for s in wanted:
            out += SECTIONS[s](g)
        out.append("")
    return "\n".join(out)


def nvidia_smi_nvlink_errors(fleet: Fleet, node: str) -> str:
    """`nvidia-smi nvlink -e`: per GPU and link, the replay, recovery and CRC error counters."""
    out: list[str] = []
    for g in fleet.gpus[node]:
        out.append(f"GPU {g.index}: {MODEL} (UUID: {g.uuid})")
        for link in range(18):
            share = 1 if link == 0 else 0  # the errors of a bad cable show on one link
            out += [f"\t Link {link}: Replay Errors: {g.replay * share}",
                    f"\t Link {link}: Recovery Errors: {g.recovery * share}",
                    f"\t Link {link}: CRC Errors: {(g.crc_flit + g.crc_data) * share}"]
    return "\n".join(out)


def dmesg(fleet: Fleet, node: str, kernel_lines: list[str]) -> str:
    """`dmesg`: the boot lines and what the kernel logged since (the node's kern.log as it was scraped)."""
    return "\n".join(BOOT + kernel_lines)


_IDLE = ["Thread {pid} (idle): \"MainThread\"",
         "    poll (zmq/sugar/poll.py:106)",
         "    wait (vllm/distributed/device_communicators/shm_broadcast.py:198)",
         "    acquire_read (vllm/distributed/device_communicators/shm_broadcast.py:698)",
         "    dequeue (vllm/distributed/device_communicators/shm_broadcast.py:779)",
         "    worker_busy_loop (vllm/v1/executor/multiproc_executor.py:973)",
         "    worker_main (vllm/v1/executor/multiproc_executor.py:879)"]
_BUSY = ["Thread {pid} (active): \"MainThread\"",
         "    forward (vllm/model_executor/models/llama.py:310)",
         "    _call_impl (torch/nn/modules/module.py:1762)",
         "    execute_model (vllm/v1/worker/gpu_model_runner.py:1424)",
         "    execute_model (vllm/v1/worker/gpu_worker.py:311)",
         "    worker_busy_loop (vllm/v1/executor/multiproc_executor.py:973)",
         "    worker_main (vllm/v1/executor/multiproc_executor.py:879)"]
_HUNG = ["Thread {pid} (active): \"MainThread\"",
         "    all_reduce (torch/distributed/distributed_c10d.py:2806)",
         "    all_reduce (vllm/distributed/device_communicators/pynccl.py:128)",
         "    all_reduce (vllm/distributed/device_communicators/cuda_communicator.py:118)",
         "    _all_reduce_out_place (vllm/distributed/parallel_state.py:397)",
         "    all_reduce (vllm/distributed/parallel_state.py:382)",
         "    tensor_model_parallel_all_reduce (vllm/distributed/communication_op.py:14)",
         "    forward (vllm/model_executor/layers/linear.py:1342)",
         "    forward (vllm/model_executor/models/llama.py:310)",
         "    execute_model (vllm/v1/worker/gpu_model_runner.py:1424)",
         "    execute_model (vllm/v1/worker/gpu_worker.py:311)",
         "    worker_busy_loop (vllm/v1/executor/multiproc_executor.py:973)",
         "    worker_main (vllm/v1/executor/multiproc_executor.py:879)"]


def py_spy_dump(fleet: Fleet, pod: str) -> str:
    """`py-spy dump --pid <worker>` inside the pod: where the engine's worker process is."""
    p = _pod(fleet, pod)
    if p.state != READY:
        raise ValueError(f"error: unable to upgrade connection: container not found (pod {pod} is {_status(p)})")
    pid = 200 + p.index % 50
    stack = _HUNG if p.hung else (_BUSY if p.engine.num_running else _IDLE)
    return "\n".join([f"Process {pid}: VLLM::Worker_TP0   (Python 3.12.9)", "Python v3.12.9 (/usr/bin/python3.12)", "",
                      *(line.format(pid=pid) for line in stack),
                      f"Thread {pid + 41} (idle): \"Thread-1 (_report_usage_worker)\"",
                      "    sleep (vllm/usage/usage_lib.py:212)",
                      "    _report_continuous_usage (vllm/usage/usage_lib.py:212)"])


def _pod(fleet: Fleet, pod: str) -> Pod:
    p = fleet.by_name.get(pod)
    if p is None or p.state == TERMINATED:
        raise ValueError(f'Error from server (NotFound): pods "{pod}" not found')
    return p


def _status(p: Pod) -> str:
    if p.state in (STARTING, CRASHLOOP) and p.crashes:
        return "CrashLoopBackOff"
    return {READY: "Running", STARTING: "Running", CRASHLOOP: "CrashLoopBackOff", DOWN: "Error"}.get(p.state,
                                                                                                   "Terminating")


def _age(s: float) -> str:
    s = max(0.0, s)
    return f"{int(s)}s" if s < 120 else (f"{int(s // 60)}m" if s < 7200 else f"{int(s // 3600)}h")


def kubectl_get_pods(fleet: Fleet, wide: bool = False) -> str:
    cols = "NAME                                READY   STATUS             RESTARTS        AGE"
    out = [cols + ("   IP            NODE" if wide else "")]
    for p in fleet.pods:
        if p.state == TERMINATED:
            continue
        ready = "1/1" if p.state == READY else "0/1"
        age = _age(fleet.now - p.state_at + (86400.0 if p.state_at <= 0 else 0.0))
        restarts = f"{p.restarts} ({_age(fleet.now - p.state_at)} ago)" if p.restarts else "0"
        line = f"{p.name:<35} {ready:<7} {_status(p):<18} {restarts:<15} {age}"
        if wide:
            line += f"   10.8.{p.index // 250}.{p.index % 250 + 2:<7} {p.node}"
        out.append(line)
    return "\n".join(out)


def kubectl_get_events(fleet: Fleet) -> str:
    out = ["LAST SEEN   TYPE     REASON              OBJECT                         MESSAGE"]
    for e in fleet.events()[-30:]:
        obj = e.get("object") or e.get("kind", "")
        out.append(f"{_age(fleet.now - float(e.get('t', 0.0))):<11} Normal   {e.get('kind', '')!s:<19} "
                   f"{obj!s:<30} {e.get('detail', '')}")
    return "\n".join(out)


def kubectl_logs(fleet: Fleet, pod: str, lines: list[str], tail: int = 60) -> str:
    _pod(fleet, pod)
    return "\n".join(lines[-tail:])


def kubectl_rollout_history(fleet: Fleet) -> str:
    out = [f"deployment.apps/{fleet.cfg.deployment}", "REVISION  CHANGE-CAUSE"]
    for i, r in enumerate(fleet.revisions, 1):
        out.append(f"{i:<9} vllm {r.vllm_version}, model revision {r.model_revision}"
                   f"{', --enforce-eager' if r.enforce_eager else ''} (pod-template-hash {r.name})")
    return "\n".join(out)


def kubectl_get_hpa(fleet: Fleet) -> str:
    cfg = fleet.cfg.hpa
    if not cfg.enabled:
        return "No resources found"
    cur = sum(1 for p in fleet.pods if p.state != TERMINATED)
    metric = cfg.metric.replace("vllm:", "")
    return ("NAMESPACE   NAME             REFERENCE                          TARGETS          MINPODS   MAXPODS   "
            f"REPLICAS\n{fleet.cfg.namespace:<11} {fleet.cfg.deployment[:16]:<16} "
            f"Deployment/{fleet.cfg.deployment:<23} {metric}/{cfg.target_value:g}   {cfg.min_replicas:<9} "
            f"{cfg.max_replicas:<9} {cur}")


def _row(left: str, right: str) -> str:
    return f"| {left:<25} | {right:<56} |"


def dcgmi_health(fleet: Fleet, node: str) -> str:
    """`dcgmi health -c` (health watches for memory and NVLink set): the report table of the node's GPUs."""
    sep = "+---------------------------+----------------------------------------------------------+"
    findings: list[tuple[int, str, str, list[str]]] = []
    for g in fleet.gpus[node]:
        if g.dbe_vol or g.remap_pending or g.remap_failure:
            text = [f"Detected {g.dbe_vol} volatile double-bit ECC error(s) in GPU {g.index}."]
            if g.remap_pending:
                text += [f"GPU {g.index} had uncorrectable memory errors and row remapping", "is pending."]
            findings.append((g.index, "Failure", "Memory system", text))
        crc = g.crc_flit + g.crc_data
        if crc > 100:
            findings.append((g.index, "Warning", "NVLink system",
                             [f"Detected {crc} CRC FLIT NvLink errors on GPU {g.index}'s link 0",
                              "which exceeds threshold of 100"]))
    overall = "Failure" if any(f[1] == "Failure" for f in findings) else ("Warning" if findings else "Healthy")
    out = [sep, "| Health Monitor Report" + " " * 64 + "|",
           sep.replace("-", "="), _row("Overall Health", overall)]
    if findings:
        out.append(_row("GPU", ""))
    for idx, level, system, text in findings:
        out += [_row(f"-> {idx}", level), _row("   -> Errors", ""), _row(f"      -> {system}", level)]
        out += [_row("", line) for line in text]
    out.append(sep)
    return "\n".join(out)


def kubectl_describe_pod(fleet: Fleet, pod: str) -> str:
    """`kubectl describe pod`: the container's state, its last termination (from the restart events) and events."""
    p = _pod(fleet, pod)
    restarts = [e for e in fleet.events()
                if e.get("kind") == "restart" and (e.get("pod") == pod or str(e.get("detail", "")).startswith(pod))]
    last = restarts[-1] if restarts else None
    oom = last is not None and "OOMKilled" in str(last.get("reason", "")) + str(last.get("detail", ""))
    status = _status(p)
    lines = [f"Name:             {p.name}", f"Namespace:        {fleet.cfg.namespace}",
             f"Node:             {p.node}/10.0.0.{p.index % 250 + 2}",
             f"Labels:           app={fleet.cfg.deployment}", f"                  pod-template-hash={p.revision.name}",
             f"Status:           {'Running' if p.state != TERMINATED else 'Terminating'}", "Containers:", "  vllm:",
             f"    Image:         vllm/vllm-openai:v{p.revision.vllm_version}"]
    if status == "CrashLoopBackOff":
        lines += ["    State:          Waiting", "      Reason:       CrashLoopBackOff"]
    else:
        lines += ["    State:          Running"]
    if last is not None:
        lines += ["    Last State:     Terminated", f"      Reason:       {'OOMKilled' if oom else 'Error'}",
                  f"      Exit Code:    {137 if oom else 1}"]
    lines += [f"    Ready:          {'True' if p.state == READY else 'False'}", f"    Restart Count:  {p.restarts}",
              "    Limits:", f"      nvidia.com/gpu:  {len(p.gpus)}", "Events:",
              "  Type     Reason     Age   From     Message", "  ----     ------     ----  ----     -------"]
    if status == "CrashLoopBackOff":
        lines.append(f"  Warning  BackOff    {_age(fleet.now - p.state_at)}   kubelet  Back-off restarting failed "
                     f"container vllm in pod {p.name}_{fleet.cfg.namespace}")
    return "\n".join(lines)
