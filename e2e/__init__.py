"""End-to-end tests, the local control plane they run against, and benchmarks."""
