"""The one read of ``slo-controller-config`` a controller makes before the ConfigMap's watch event
may have come (the NodeSLO, NodeMetric and CPU normalization controllers need it for their first
node): the first events of many nodes share one GET, and a watch event that came while the read was
out wins over what it read."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["FirstConfigRead", "SLOConfigReader"]


class SLOConfigReader(Protocol):
    async def slo_config_map(self) -> dict[str, Any] | None: ...


class FirstConfigRead:
    def __init__(self, client: SLOConfigReader) -> None:
        self._client = client
        self._lock = asyncio.Lock()

    async def ensure(
        self, taken: Callable[[], bool], take: Callable[[dict[str, Any] | None], object]
    ) -> None:
        """Unless ``taken()`` (the controller has the ConfigMap, from this read or its watch event),
        read it and ``take`` it (None: there is none). The API's errors propagate."""
        if taken():
            return
        async with self._lock:
            if taken():  # read by the event that held the lock
                return
            found = await self._client.slo_config_map()
            if not taken():
                take(found)
