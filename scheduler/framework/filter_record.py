"""What a row-local Filter plugin answered per row, kept so that a failed cycle's diagnosis can
count its rejections again without asking the plugin (``scheduler.framework.equivalence``).

A row's record is that of the last call that was given the row. A plugin is given only the rows
every earlier plugin of its call accepted, so a row an earlier plugin rejected keeps an older
answer; a replay in the same plugin order never reaches that row, as the earlier plugin rejects
it first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from scheduler.cache.node_table import BoolArray, IntArray
from scheduler.framework.interfaces import FilterResult

__all__ = ["FilterRecord"]

_Counts = npt.NDArray[np.int16]


@dataclass
class FilterRecord:
    """One plugin's answers, row-count long."""

    rejected: BoolArray
    reasons: dict[str, _Counts] = field(default_factory=dict)
    """Per reason, how many times the plugin gave it for each rejected row (a plugin may list
    a reason twice, and the diagnosis counts each listing)."""
    unresolvable: BoolArray | None = None

    @staticmethod
    def empty(size: int) -> FilterRecord:
        return FilterRecord(np.zeros(size, dtype=np.bool_))

    def store(self, rows: IntArray, result: FilterResult) -> None:
        rejected = ~result.feasible
        self.rejected[rows] = rejected
        for counts in self.reasons.values():
            counts[rows] = 0
        for reason, mask in result.rejections:
            found = self.reasons.get(reason)
            if found is None:
                found = self.reasons[reason] = np.zeros(self.rejected.shape[0], dtype=np.int16)
            found[rows] += mask & rejected
        if result.unresolvable is not None:
            if self.unresolvable is None:
                self.unresolvable = np.zeros(self.rejected.shape[0], dtype=np.bool_)
            self.unresolvable[rows] = result.unresolvable & rejected
        elif self.unresolvable is not None:
            self.unresolvable[rows] = False

    def replay(self, rows: IntArray) -> FilterResult:
        """The answer the plugin gave about ``rows``, as if it were asked about them now."""
        rejected = self.rejected[rows]
        rejections: list[tuple[str, BoolArray]] = []
        if rejected.any():
            for reason, counts in self.reasons.items():
                on_rows = counts[rows]
                for times in range(1, int(on_rows.max(initial=0)) + 1):
                    rejections.append((reason, on_rows >= times))
        unresolvable = None if self.unresolvable is None else self.unresolvable[rows]
        return FilterResult(feasible=~rejected, rejections=rejections, unresolvable=unresolvable)
