"""Device reporting: the node's GPUs, RDMA NICs, NPUs and MLUs into its Device object (docs/devices.md)."""
