"""`drill kv-capacity --act --postmortem DIR`: the Markdown of the seeded drill is golden (simulated time on the
simulator's epoch; only the incident id's random suffix differs between runs), every section is there, the timeline
holds the diagnosis and the executed action, and action items of at least three kinds."""

from __future__ import annotations

import os
import re
from pathlib import Path

from tests.postmortem.conftest import Drill

GOLDEN = Path(__file__).parent / "golden" / "kv-capacity.md"
SECTIONS = ("## Summary", "## Impact", "## Root cause(s)", "## Trigger", "## Detection", "## Response and resolution",
            "## Timeline (UTC)", "## Evidence", "## Ruled-out hypotheses", "## Lessons learned", "### What went well",
            "### What went wrong", "### Where we got lucky", "## Action items", "## Charts")


def normalise(md: str, incident_id: str) -> str:
    return md.replace(incident_id, "INCIDENT_ID")


def test_the_markdown_of_the_seeded_drill_is_golden(kv_drill: Drill) -> None:
    r, out = kv_drill
    assert r["incident_id"] is not None
    md = normalise((out / "postmortem.md").read_text(encoding="utf-8"), r["incident_id"])
    if os.environ.get("LLM_ONCALL_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(md, encoding="utf-8")
    assert md == GOLDEN.read_text(encoding="utf-8")


def test_every_section_the_diagnosis_the_action_and_three_kinds_of_items(kv_drill: Drill) -> None:
    r, out = kv_drill
    md = (out / "postmortem.md").read_text(encoding="utf-8")
    for s in SECTIONS:
        assert f"\n{s}\n" in md, s
    assert (out / "postmortem.html").is_file() and (out / "golden-signals.png").is_file()
    timeline = md.split("## Timeline (UTC)")[1].split("## Evidence")[0]
    assert re.search(r"\| diagnosis \| diagnosis: kv-capacity \(0\.9\)", timeline)
    assert re.search(r"\| action \| action scale_out on HorizontalPodAutoscaler/llm/vllm-llama-8b: executed", timeline)
    assert "first symptom in the telemetry" in timeline and "| recovery |" in timeline
    assert r["postmortem"] is not None
    kinds = {i["type"] for i in r["postmortem"]["action_items"]}
    assert len(kinds) >= 3 and kinds <= {"mitigate", "prevent", "detect", "process"}
    assert all(i["owner"] == "TBD (owner)" for i in r["postmortem"]["action_items"])
    # the runbook's long-term list is there, typed
    assert any(i["type"] == "prevent" and "HPA" in i["text"] for i in r["postmortem"]["action_items"])
    # the impact is estimated, and says how
    assert r["postmortem"]["impact"]["known"] and r["postmortem"]["impact"]["slo_minutes_burned"] > 0
    assert "*How this was estimated:*" in md


def test_the_record_beside_it_reproduces_the_postmortem(kv_drill: Drill, tmp_path: Path) -> None:
    from llm_oncall.postmortem.write import write_postmortem

    r, out = kv_drill
    assert r["incident_id"] is not None
    w = write_postmortem(out / "record.db", r["incident_id"], tmp_path)
    assert w.markdown.read_text(encoding="utf-8") == (out / "postmortem.md").read_text(encoding="utf-8")
