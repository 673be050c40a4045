"""HTML is self-contained and escapes what it quotes from the record; Markdown tables escape pipes; Chinese."""

from __future__ import annotations

import base64
import re
import sqlite3
from pathlib import Path

from tests.postmortem import synth

from llm_oncall.incidents import IncidentStore
from llm_oncall.postmortem.write import write_postmortem

EVIL = "<script>alert('x')</script> & co"


def test_html_escapes_the_record_and_embeds_the_pngs(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    iid = synth.make(db, summary=EVIL, evidence_text="a | b <img src=x onerror=alert(1)>")
    w = write_postmortem(db, iid, tmp_path / "out")
    html = w.html.read_text(encoding="utf-8")
    assert "<script>" not in html and "<img src=x" not in html and "<b>×2" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "Load surge &lt;b&gt;×2&lt;/b&gt;" in html
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) == len(w.charts) >= 1
    assert all(base64.b64decode(b).startswith(b"\x89PNG\r\n\x1a\n") for b in images)
    assert not re.search(r'src="(?!data:)', html)  # nothing fetched from elsewhere
    md = w.markdown.read_text(encoding="utf-8")
    assert "a \\| b" in md  # a pipe in a quoted finding does not split the table row


def test_chinese(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    iid = synth.make(db)
    w = write_postmortem(db, iid, tmp_path / "zh", lang="zh")
    md = w.markdown.read_text(encoding="utf-8")
    for heading in ("# 事后复盘：KV 缓存容量耗尽", "## 摘要", "## 影响", "## 根因", "## 触发因素", "## 发现",
                    "## 响应与解决", "## 时间线（UTC）", "## 证据", "## 已排除的假设", "## 经验教训", "## 改进项"):
        assert heading in md, heading
    assert "HPA 基于每 pod 等待请求数 > 3 扩缩容" in md  # the runbook's long-term list in Chinese
    assert "待定（负责人）" in md and "llm-oncall，待评审草稿" in md
    assert "## Action items" not in md and "What went well" not in md
    html = w.html.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in html and "改进项" in html


def test_no_telemetry_no_charts_and_an_unknown_impact(tmp_path: Path) -> None:
    db = tmp_path / "bare.db"
    store = IncidentStore(db, clock=lambda: synth.EPOCH + 300.0)
    iid = store.open_incident("kv-capacity", "queue", actor="test")
    store.set_diagnosis(iid, {"incident": "kv-capacity", "confidence": 0.8, "severity": "page", "summary": "queue"})
    store.close()
    w = write_postmortem(db, iid, tmp_path / "out")
    md = w.markdown.read_text(encoding="utf-8")
    assert w.charts == [] and "impact unknown" in md and "no charts" in md
    assert "TODO (humans)" in md  # nothing in the record says what went well or wrong
    with sqlite3.connect(db) as c:  # reading did not add the telemetry tables to the user's file
        assert c.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'telemetry'").fetchone()[0] == 0


def test_the_response_names_who_approved_each_action(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    iid = synth.make(db, approver="alice@oncall")
    md = write_postmortem(db, iid, tmp_path / "out").markdown.read_text(encoding="utf-8")
    row = next(line for line in md.splitlines() if line.startswith("| 00:05:00 | test | scale_out"))
    assert "approved by alice@oncall" in row and "ok (replicas=10)" in row and "helped: recovered" in row
    timeline = md.split("## Timeline (UTC)")[1]
    assert "approval of a-1: approved" in timeline


def test_prune_keeps_the_windows_of_incidents(tmp_path: Path) -> None:
    from llm_oncall.postmortem.telemetry import TelemetryLog

    log = TelemetryLog(tmp_path / "t.db")
    for t in range(0, 10000, 100):
        log.record(float(t), {"ttft_p99": 0.1})
    log.prune(9000.0, keep=[(2000.0, 3000.0), (5000.0, 5500.0)])
    kept = sorted(t for (t,) in log.db.execute("SELECT t FROM telemetry"))
    assert kept == [float(t) for t in range(2000, 3001, 100)] + [float(t) for t in range(5000, 5501, 100)] + \
        [float(t) for t in range(9000, 10000, 100)]
    log.close()


def test_the_title_is_the_one_that_held_on_the_evidence_in_both_languages(tmp_path: Path) -> None:
    # The diagnosis named the surge ("Load surge beyond the fleet's capacity": the KV cache half empty); the
    # postmortem says so, not the runbook's generic "KV-cache capacity exhausted".
    db = tmp_path / "r.db"
    iid = synth.make(db, summary="Load surge beyond the fleet's capacity")
    en = write_postmortem(db, iid, tmp_path / "en").markdown.read_text(encoding="utf-8")
    zh = write_postmortem(db, iid, tmp_path / "zh", lang="zh").markdown.read_text(encoding="utf-8")
    assert en.startswith("# Postmortem: Load surge beyond the fleet's capacity\n"), en[:80]
    assert zh.startswith("# 事后复盘：负载激增，超出集群容量\n"), zh[:80]
