"""Incident record → blameless postmortem (Markdown and self-contained HTML, with charts of the window)."""
