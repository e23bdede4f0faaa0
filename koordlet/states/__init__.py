"""koordlet's view of the cluster (Koordinator's statesinformer): one watch per kind, shared in memory."""
