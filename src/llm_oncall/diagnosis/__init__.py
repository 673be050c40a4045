"""diagnosis layer."""
