"""The scheduler's only mutable cluster state (cache.py) and the per-node views plugins read."""
