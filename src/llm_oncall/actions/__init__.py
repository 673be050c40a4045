"""Actions: the emergency fix as typed data (plan), guarded (policy, dry-run, caps, cooldowns), executed through
the Kubernetes API (lightkube) and gateway objects, verified, audited."""
