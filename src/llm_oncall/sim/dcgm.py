"""dcgm-exporter pages per node: one series per GPU, labels as the exporter writes them.

Without a custom counters CSV the exporter leaves ECC, retired-page and NVLink-error fields disabled, so those
series are absent (not zero); `custom_csv=True` models a CSV that enables them (plus ROW_REMAP_PENDING).
"""

from __future__ import annotations

from dataclasses import dataclass

from llm_oncall.sim.exposition import fmt

PCI_BUSES = ("18", "2a", "3a", "5d", "9a", "ab", "ba", "db")
MODEL = "NVIDIA H100 80GB HBM3"
DRIVER = "550.127.05"
XID_MSG = {0: "", 48: "DBE (Double Bit Error) ECC Error", 63: "ECC page retirement or row remapping "
           "recording event", 74: "NVLINK Error", 79: "GPU has fallen off the bus.", 94: "Contained ECC error"}


class Gpu:
    __slots__ = (
        "busy", "clock_factor", "container", "crc_data", "crc_flit", "dbe_agg", "dbe_vol", "energy_mj", "fault",
        "index", "namespace", "nvlink_bytes", "pod", "recovery", "remap_failure", "remap_pending",
        "remapped_corr", "remapped_uncorr", "replay", "sbe_agg", "sbe_vol", "uuid", "xid",
    )

    def __init__(self, index: int, uuid: str) -> None:
        self.index = index
        self.uuid = uuid
        self.pod = ""
        self.namespace = ""
        self.container = ""
        self.busy = 0.0
        self.clock_factor = 1.0
        self.energy_mj = 0.0
        self.nvlink_bytes = 0.0
        self.sbe_vol = self.dbe_vol = self.sbe_agg = self.dbe_agg = 0
        self.remapped_corr = self.remapped_uncorr = 0
        self.remap_pending = 0
        self.remap_failure = 0
        self.crc_flit = self.crc_data = self.replay = self.recovery = 0
        self.xid = 0
        self.fault = ""
        """An injected hardware fault still present: "" | "ecc" (cleared by a GPU reset) | "off_bus" (by a
        reboot) | "hardware" (by neither)."""

    def power_w(self) -> float:
        return 70.0 + 560.0 * self.busy * self.clock_factor

    def advance(self, dt: float, busy: float, tp: int) -> None:
        self.busy = 0.8 * self.busy + 0.2 * busy if dt < 5.0 else busy
        self.energy_mj += self.power_w() * dt * 1000.0
        if tp > 1:
            self.nvlink_bytes += busy * dt * 4.0e10


@dataclass(frozen=True)
class DcgmOptions:
    custom_csv: bool = True


def render_node(node: str, gpus: list[Gpu], opts: DcgmOptions) -> str:
    out: list[str] = []
    labels: list[str] = []
    for g in gpus:
        lab = (f'gpu="{g.index}",UUID="{g.uuid}",pci_bus_id="00000000:{PCI_BUSES[g.index % 8].upper()}:00.0",'
               f'device="nvidia{g.index}",modelName="{MODEL}",Hostname="{node}",DCGM_FI_DRIVER_VERSION="{DRIVER}"')
        if g.pod:
            lab += f',container="{g.container}",namespace="{g.namespace}",pod="{g.pod}"'
        else:
            lab += ',container="",namespace="",pod=""'
        labels.append(lab)

    def field(name: str, kind: str, help_: str, values: list[float], xid: bool = False) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        for g, lab, v in zip(gpus, labels, values, strict=True):
            if xid:
                lab = f'{lab},err_code="{g.xid}",err_msg="{XID_MSG.get(g.xid, "unknown")}"'
            out.append(f"{name}{{{lab}}} {fmt(v) if isinstance(v, float) else v}")

    field("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
          [float(round(1980 * g.clock_factor if g.busy > 0.05 else 345)) for g in gpus])
    field("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", [2619.0 for _ in gpus])
    field("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).",
          [float(round(34 + 30 * g.busy)) for g in gpus])
    field("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", [float(round(31 + 35 * g.busy)) for g in gpus])
    field("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", [round(g.power_w(), 3) for g in gpus])
    field("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
          [float(int(g.energy_mj)) for g in gpus])
    field("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", [0.0 for _ in gpus])
    field("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", [float(round(100 * g.busy)) for g in gpus])
    field("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).",
          [float(round(60 * g.busy)) for g in gpus])
    field("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", [0.0 for _ in gpus])
    field("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", [0.0 for _ in gpus])
    field("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.",
          [float(g.xid) for g in gpus], xid=True)
    field("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
          [5200.0 if g.pod else 81004.0 for g in gpus])
    field("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
          [75804.0 if g.pod else 0.0 for g in gpus])
    field("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).", [555.0 for _ in gpus])
    field("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "Total number of NVLink bandwidth counters for all "
          "lanes.", [float(int(g.nvlink_bytes)) for g in gpus])
    field("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", [0.0 for _ in gpus])
    field("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable "
          "errors", [float(g.remapped_uncorr) for g in gpus])
    field("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors",
          [float(g.remapped_corr) for g in gpus])
    field("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed",
          [float(g.remap_failure) for g in gpus])
    field("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.",
          [round(0.95 * g.busy, 6) for g in gpus])
    field("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.",
          [round(0.35 * g.busy, 6) for g in gpus])
    field("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles the device memory interface is active sending "
          "or receiving data.", [round(0.7 * g.busy, 6) for g in gpus])
    if opts.custom_csv:
        field("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.",
              [float(g.sbe_vol) for g in gpus])
        field("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
              [float(g.dbe_vol) for g in gpus])
        field("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "counter", "Total number of single-bit persistent ECC errors.",
              [float(g.sbe_agg) for g in gpus])
        field("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors.",
              [float(g.dbe_agg) for g in gpus])
        field("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending.",
              [float(g.remap_pending) for g in gpus])
        field("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink flow-control "
              "CRC errors.", [float(g.crc_flit) for g in gpus])
        field("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink data CRC "
              "errors.", [float(g.crc_data) for g in gpus])
        field("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink retries.",
              [float(g.replay) for g in gpus])
        field("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter", "Total number of NVLink recovery "
              "errors.", [float(g.recovery) for g in gpus])
    return "\n".join(out) + "\n"
