"""Shape and known facts of the Xid catalogue data file (src/llm_oncall/evidence/catalog/xid.yaml)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

CATALOG = Path(__file__).parents[2] / "src/llm_oncall/evidence/catalog/xid.yaml"

FLAGS = ("hardware", "driver", "user_app", "bus", "memory", "nvlink", "thermal")
REQUIRED = ("code", "name", "description", *FLAGS, "severity", "incident_hint", "node_benign", "action", "gpud_repair")
SEVERITIES = {"critical", "warning", "info"}
INCIDENTS = {"gpu-ecc", "engine-hang", None}
ACTIONS = {"isolate_node", "reset_gpu", "reboot_node", "restart_group", "check_application", "none"}
GPUD_REPAIRS = {"REBOOT_SYSTEM", "HARDWARE_INSPECTION", "CHECK_USER_APP_AND_GPU", "IGNORE_NO_ACTION_REQUIRED"}


@cache
def _doc() -> dict[str, Any]:
    with CATALOG.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _codes() -> list[dict[str, Any]]:
    return _doc()["codes"]


def _by_code() -> dict[int, dict[str, Any]]:
    return {e["code"]: e for e in _codes()}


def test_catalog_loads_with_source_and_codes() -> None:
    doc = _doc()
    assert isinstance(doc, dict)
    assert isinstance(doc["source"], str) and doc["source"].startswith("NVIDIA Xid Errors document r")
    assert "leptonai/gpud" in doc["source"]
    assert isinstance(doc["codes"], list) and len(doc["codes"]) >= 150


def test_codes_are_unique_and_ascending() -> None:
    codes = [e["code"] for e in _codes()]
    assert all(isinstance(c, int) and not isinstance(c, bool) and c > 0 for c in codes)
    assert codes == sorted(set(codes))


def test_codes_cover_the_documented_range() -> None:
    codes = {e["code"] for e in _codes()}
    assert set(range(1, 173)) <= codes


@pytest.mark.parametrize("entry", _codes(), ids=lambda e: f"xid{e['code']}")
def test_entry_has_required_keys_with_allowed_values(entry: dict[str, Any]) -> None:
    missing = [k for k in REQUIRED if k not in entry]
    assert not missing, missing
    assert isinstance(entry["name"], str) and entry["name"].strip()
    assert "\n" not in entry["name"]
    assert isinstance(entry["description"], str) and entry["description"].strip()
    assert "\n" not in entry["description"]
    for flag in FLAGS:
        assert isinstance(entry[flag], bool), flag
    assert isinstance(entry["node_benign"], bool)
    assert entry["severity"] in SEVERITIES
    assert entry["incident_hint"] in INCIDENTS
    assert entry["action"] in ACTIONS
    repairs = entry["gpud_repair"]
    assert isinstance(repairs, list) and set(repairs) <= GPUD_REPAIRS
    assert len(repairs) == len(set(repairs))


@pytest.mark.parametrize("entry", _codes(), ids=lambda e: f"xid{e['code']}")
def test_mapping_is_consistent(entry: dict[str, Any]) -> None:
    if entry["node_benign"]:
        assert entry["incident_hint"] is None
        assert entry["action"] == "check_application"
    if entry["incident_hint"] == "engine-hang":
        assert entry["nvlink"]
    if entry["incident_hint"] is not None:
        assert entry["action"] != "none"
    if entry["name"] in ("Unused", "Reserved"):
        assert entry["severity"] == "info"
        assert entry["incident_hint"] is None


def test_xid_48_double_bit_ecc() -> None:
    e = _by_code()[48]
    assert e["memory"] and e["hardware"]
    assert e["incident_hint"] == "gpu-ecc"
    assert e["severity"] == "critical"
    assert "ECC" in e["name"]


@pytest.mark.parametrize("code", [63, 64])
def test_row_remap_and_page_retirement(code: int) -> None:
    e = _by_code()[code]
    assert "remap" in e["name"].lower() or "retire" in e["name"].lower()
    assert e["memory"]
    assert e["incident_hint"] == "gpu-ecc"
    assert not e["node_benign"]


def test_xid_74_nvlink() -> None:
    e = _by_code()[74]
    assert e["nvlink"]
    assert "NVLINK" in e["name"].upper()
    assert e["incident_hint"] == "engine-hang"
    assert e["action"] == "restart_group"


def test_xid_79_fallen_off_the_bus() -> None:
    e = _by_code()[79]
    assert e["name"] == "GPU has fallen off the bus"
    assert e["bus"] and e["hardware"]
    assert e["incident_hint"] == "gpu-ecc"
    assert e["severity"] == "critical"
    assert e["action"] in {"reboot_node", "isolate_node"}
    assert "REBOOT_SYSTEM" in e["gpud_repair"]


@pytest.mark.parametrize("code", [94, 95])
def test_contained_and_uncontained_ecc(code: int) -> None:
    e = _by_code()[code]
    assert e["memory"]
    assert e["incident_hint"] == "gpu-ecc"
    assert not e["node_benign"]
    assert "contained" in e["name"].lower()


def test_uncontained_ecc_needs_a_gpu_reset() -> None:
    assert _by_code()[95]["action"] in {"reset_gpu", "reboot_node", "isolate_node"}
    assert _by_code()[95]["severity"] == "critical"


@pytest.mark.parametrize("code", [13, 31, 43, 45])
def test_application_faults_are_node_benign(code: int) -> None:
    e = _by_code()[code]
    assert e["node_benign"]
    assert e["incident_hint"] is None
    assert e["action"] == "check_application"
    assert e["user_app"]


@pytest.mark.parametrize("code", [119, 120])
def test_gsp_errors(code: int) -> None:
    e = _by_code()[code]
    assert "GSP" in e["name"]
    assert e["incident_hint"] == "gpu-ecc"
    assert e["severity"] == "critical"


def test_nvlink5_series() -> None:
    by = _by_code()
    for code in range(144, 151):
        e = by[code]
        assert e["nvlink"], code
        assert e["incident_hint"] == "engine-hang", code


def test_xid_154_recovery_action_changed_is_present() -> None:
    e = _by_code()[154]
    assert "Recovery Action" in e["name"]
    assert e["incident_hint"] is None
    assert not e["node_benign"]
