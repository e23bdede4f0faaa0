"""LowNodeLoad, Koordinator's load-aware descheduling plugin (docs/descheduler.md, algorithms.md 12.2).

``args`` holds the configuration; ``usage``, ``thresholds``, ``classify``, ``anomaly``,
``ordering``, ``nodefit`` and ``balance`` are pure logic; ``plugin`` wires them to the
descheduler framework's handle and evictor.
"""

from operators.descheduler.lownodeload.args import LowNodeLoadArgs
from operators.descheduler.lownodeload.plugin import NAME, LowNodeLoad, new

__all__ = ["NAME", "LowNodeLoad", "LowNodeLoadArgs", "new"]
