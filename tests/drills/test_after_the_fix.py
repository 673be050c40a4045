"""After the emergency fix the fleet is judged as it recovers: what the fix itself causes is not a new incident.

Restarting a hung tensor-parallel group brings up engines with empty prefix caches, and the sessions they served
missed other pods' caches while they were away — the hit rate falls by a third for a minute. Read as a
prefix-cache drop it paged and planned a router-config rollback right after the fix; and the scrapes of the
restart (pods not answering, errors) paged `unknown`, which renamed the incident the runbook had named.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from llm_oncall.drills.act import run_act
from llm_oncall.incidents import IncidentStore


def test_restarting_a_hung_group_pages_no_prefix_cache_drop(tmp_path: Path) -> None:
    db = tmp_path / "record.db"
    r = run_act("engine-hang", 7, record=db)
    assert r.correct and r.recovered and r.acted_at is not None
    with sqlite3.connect(db) as c:
        after = c.execute("SELECT t, signal, value FROM telemetry WHERE scope = 'diagnosis' ORDER BY t").fetchall()
    assert after, "the record holds every scrape's diagnosis"
    named = {signal for _, signal, value in after if value >= 2.0}  # severity rank 2 = page
    assert named <= {"engine-hang", "unknown"}, named
    store = IncidentStore(db)
    (inc,) = store.incidents()
    assert inc["incident"] == "engine-hang", inc
