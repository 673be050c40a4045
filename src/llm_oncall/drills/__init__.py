"""drills layer."""
