"""GangDefragmentation (ours): free one topology domain for a gang that has waited too long
(docs/descheduler.md, "Gang defragmentation").

``args`` holds the configuration; ``waiting``, ``domains``, ``movable``, ``room``, ``planner``
(CP-SAT) and ``reservations`` are pure logic; ``client`` is the API the plugin needs beyond the
descheduler handle; ``plugin`` wires them together.
"""

from operators.descheduler.defrag.args import GangDefragmentationArgs
from operators.descheduler.defrag.plugin import NAME, GangDefragmentation, new

__all__ = ["NAME", "GangDefragmentation", "GangDefragmentationArgs", "new"]
