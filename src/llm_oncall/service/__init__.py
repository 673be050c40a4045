"""The on-call service: watch loop (source → autopilot → incidents → actions), Alertmanager receiver, HTTP API."""
