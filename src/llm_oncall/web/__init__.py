"""The web console (server-rendered pages over the service; docs/console.md)."""
