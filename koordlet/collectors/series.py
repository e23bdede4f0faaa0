"""Names of the metric cache's series (CPU in cores, memory in bytes)."""

from __future__ import annotations

__all__ = [
    "CONTAINER_CPU",
    "CONTAINER_MEMORY",
    "CONTAINER_MEMORY_WITH_PAGE_CACHE",
    "NODE_COLD_PAGE",
    "NODE_CPU",
    "NODE_MEMORY",
    "NODE_MEMORY_WITH_HOT_PAGE",
    "NODE_MEMORY_WITH_PAGE_CACHE",
    "POD_COLD_PAGE",
    "POD_CPU",
    "POD_MEMORY",
    "POD_MEMORY_WITH_HOT_PAGE",
    "POD_MEMORY_WITH_PAGE_CACHE",
    "SYSTEM_CPU",
    "SYSTEM_MEMORY",
]

NODE_CPU = "node_cpu"
NODE_MEMORY = "node_memory"
"""MemTotal - MemAvailable: usage without page cache."""
NODE_MEMORY_WITH_PAGE_CACHE = "node_memory_with_page_cache"
"""MemTotal - MemFree."""
NODE_MEMORY_WITH_HOT_PAGE = "node_memory_with_hot_page"
"""MemTotal - MemFree - cold pages."""
NODE_COLD_PAGE = "node_cold_page"
POD_CPU = "pod_cpu"
POD_MEMORY = "pod_memory"
POD_MEMORY_WITH_PAGE_CACHE = "pod_memory_with_page_cache"
POD_MEMORY_WITH_HOT_PAGE = "pod_memory_with_hot_page"
POD_COLD_PAGE = "pod_cold_page"
CONTAINER_CPU = "container_cpu"
CONTAINER_MEMORY = "container_memory"
CONTAINER_MEMORY_WITH_PAGE_CACHE = "container_memory_with_page_cache"
SYSTEM_CPU = "system_cpu"
SYSTEM_MEMORY = "system_memory"
