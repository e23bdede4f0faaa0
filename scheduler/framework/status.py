"""Results of extension points are values, not exceptions, as in kube-scheduler's framework.

Pick the code by what should happen next:

- ``SUCCESS``: go on.
- ``UNSCHEDULABLE``: the pod does not fit now; preemption (PostFilter) may help; the pod waits in
  the unschedulable queue for a cluster event that could change that.
- ``UNSCHEDULABLE_AND_UNRESOLVABLE``: the pod does not fit and preemption cannot help (a node
  selector, a taint); PostFilter is skipped for the nodes rejected this way.
- ``ERROR``: a fault (a bug, a failed call); the pod goes to backoff and the reason is logged.
- ``WAIT``: Permit only: hold the pod until allowed, rejected or timed out.
- ``SKIP``: PreFilter/PreScore only: the plugin has nothing to do for this pod this cycle.
- ``PENDING``: at PreEnqueue, keep the pod out of the active queue (a gang short of members); at
  PreFilter, a plugin works on the pod off the cycle (a gang placement being solved) and will
  activate it: the pod waits quietly, with no FailedScheduling event.

The runtime, not the plugin, stamps the failing plugin's name on the status.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = ["Code", "Status"]


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


_CODE_SUCCESS = Code.SUCCESS
"""Read once: a member read off ``Code`` is a descriptor call, and ``ok`` is asked dozens of times
per pod."""
_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE})


@dataclass(frozen=True, slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @staticmethod
    def success() -> Status:
        return _SUCCESS

    @staticmethod
    def unschedulable(*reasons: str) -> Status:
        return Status(Code.UNSCHEDULABLE, reasons)

    @staticmethod
    def unresolvable(*reasons: str) -> Status:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)

    @staticmethod
    def error(message: str) -> Status:
        return Status(Code.ERROR, (message,))

    @staticmethod
    def wait(*reasons: str) -> Status:
        return Status(Code.WAIT, reasons)

    @staticmethod
    def skip() -> Status:
        return _SKIP

    @staticmethod
    def pending(*reasons: str) -> Status:
        return Status(Code.PENDING, reasons)

    @property
    def ok(self) -> bool:
        return self.code is _CODE_SUCCESS

    @property
    def rejected(self) -> bool:
        return self.code in _REJECTED

    def with_plugin(self, plugin: str) -> Status:
        # Built directly: dataclasses.replace costs ten times as much, on every SKIP of every cycle.
        return self if self.plugin == plugin else Status(self.code, self.reasons, plugin)

    def message(self) -> str:
        return ", ".join(self.reasons)


_SUCCESS = Status()
_SKIP = Status(Code.SKIP)
