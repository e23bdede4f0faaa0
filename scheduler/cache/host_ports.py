"""Which node rows hold each host port: kube-scheduler's ``NodeInfo.UsedPorts``, indexed by port.

Keyed by (protocol, port), then host IP, then row, with a count of holders, so that NodePorts'
Filter is a mask built from the few rows that use the pod's ports, never a loop over nodes. Counts
rather than a set: two pods bound by hand with the same port leave it used while either remains
(kube-scheduler's set would free it with the first), and additions commute, so the snapshot can lift
and restore holders in any order (a count may go below zero between a lift and its undo).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from scheduler.cache.node_table import BoolArray
from scheduler.cache.pod_info import DEFAULT_BIND_ALL_HOST_IP, HostPort

__all__ = ["HostPortIndex", "conflicts"]


def conflicts(wanted: HostPort, used: HostPort) -> bool:
    """kube-scheduler's ``HostPortInfo.CheckConflict`` for one used port: same protocol and port, and
    the same IP or either side bound to every IP (``0.0.0.0``)."""
    (ip, protocol, port), (used_ip, used_protocol, used_port) = wanted, used
    if (protocol, port) != (used_protocol, used_port):
        return False
    return DEFAULT_BIND_ALL_HOST_IP in (ip, used_ip) or ip == used_ip


class HostPortIndex:
    def __init__(self) -> None:
        self._holders: dict[tuple[str, int], dict[str, dict[int, int]]] = {}
        """(protocol, port) -> host IP -> row -> how many pods there hold it."""

    def add(self, row: int, ports: Iterable[HostPort], sign: int = 1) -> None:
        """Count (``sign`` 1) or release (-1) a pod's host ports on ``row``."""
        for ip, protocol, port in ports:
            by_ip = self._holders.setdefault((protocol, port), {})
            rows = by_ip.setdefault(ip, {})
            count = rows.get(row, 0) + sign
            if count:
                rows[row] = count
            else:
                rows.pop(row, None)
                if not rows:
                    del by_ip[ip]
                    if not by_ip:
                        del self._holders[(protocol, port)]

    def conflict_mask(self, wanted: Iterable[HostPort], size: int) -> BoolArray:
        """Full-length mask of the rows where any of ``wanted`` conflicts with a port in use."""
        mask = np.zeros(size, dtype=np.bool_)
        for ip, protocol, port in wanted:
            by_ip = self._holders.get((protocol, port))
            if not by_ip:
                continue
            ips = by_ip.keys() if ip == DEFAULT_BIND_ALL_HOST_IP else (ip, DEFAULT_BIND_ALL_HOST_IP)
            for holder_ip in ips:
                rows = [row for row, count in by_ip.get(holder_ip, {}).items() if count > 0 and row < size]
                if rows:
                    mask[np.asarray(rows, dtype=np.int64)] = True
        return mask

    def used_on(self, row: int) -> list[HostPort]:
        """The host ports in use on ``row`` (for tests and explanations)."""
        return sorted(
            (ip, protocol, port)
            for (protocol, port), by_ip in self._holders.items()
            for ip, rows in by_ip.items()
            if rows.get(row, 0) > 0
        )
