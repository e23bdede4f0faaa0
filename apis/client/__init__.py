"""The Kubernetes access every component shares: the ``ClusterBackend`` protocol and its API-server
implementation, request and watch plumbing, the Lease and leader election, the eviction service,
and the RBAC rule model with its chart renderer. It imports nothing of ours but ``apis``."""
