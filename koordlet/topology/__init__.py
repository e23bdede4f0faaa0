"""NodeResourceTopology reporting (the host's CPUs, NUMA nodes and kubelet policy) and cpuset apply."""
