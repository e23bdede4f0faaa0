"""The ClusterBackend seam: the Kubernetes API server, or an in-memory cluster (tests, simulate)."""
