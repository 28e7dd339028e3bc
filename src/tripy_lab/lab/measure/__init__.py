"""What runs and measures a build: timing, per-layer time, per-op accuracy."""
