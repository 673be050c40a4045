"""runbooks layer."""
