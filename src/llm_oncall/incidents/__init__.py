"""The incident store (SQLite): incidents and their lifecycle, the timeline of every event, the alerts."""

from llm_oncall.incidents.store import STATUSES, IncidentStore, StoreError

__all__ = ["STATUSES", "IncidentStore", "StoreError"]
