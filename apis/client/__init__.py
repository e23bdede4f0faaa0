"""The Kubernetes access every component shares: the ``ClusterBackend`` protocol and its API-server
implementation, request and watch plumbing, the Lease and leader election, the eviction service,
and the RBAC rule model with its chart renderer. It imports nothing of ours but ``apis``."""

from apis.client.lazy_k8s import defer_generated_namespaces

defer_generated_namespaces()  # before any module of this package imports kubernetes_asyncio
