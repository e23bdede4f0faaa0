"""Gang / coscheduling labels and annotations (api-reference 2.1).

A gang is declared, in precedence order, by the PodGroup label ``pod-group.scheduling.sigs.k8s.io``,
the deprecated lightweight label ``pod-group.scheduling.sigs.k8s.io/name``, or the annotation
``gang.scheduling.koordinator.sh/name``. A gang is identified as ``namespace/name``.

Koordinator is lenient with several gang values: an unknown mode or match policy silently becomes
the default, and an unusable total-number or waiting-time falls back as well. The ``resolve_*``
functions reproduce that and return a :class:`Fallback` whose ``warning`` explains a replacement;
the ``parse_*`` functions are strict and raise InvalidAnnotation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Literal, get_args

from pydantic import TypeAdapter

from apis.errors import InvalidAnnotation, echo
from apis.extension._annotation import Fallback, lookup, parse_duration, parse_go_int, parse_json
from apis.extension.networktopology import ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC

__all__ = [
    "ANNOTATION_ALIAS_GANG_MATCH_POLICY",
    "ANNOTATION_BIND_GANG_GROUP_ID",
    "ANNOTATION_BIND_GANG_MEMBER_COUNT",
    "ANNOTATION_GANG_GROUPS",
    "ANNOTATION_GANG_MATCH_POLICY",
    "ANNOTATION_GANG_MIN_NUM",
    "ANNOTATION_GANG_MODE",
    "ANNOTATION_GANG_NAME",
    "ANNOTATION_GANG_NETWORK_TOPOLOGY_INDEX",
    "ANNOTATION_GANG_NETWORK_TOPOLOGY_SPEC",
    "ANNOTATION_GANG_PREFIX",
    "ANNOTATION_GANG_TIMEOUT",
    "ANNOTATION_GANG_TOTAL_NUM",
    "ANNOTATION_GANG_WAIT_TIME",
    "DEFAULT_GANG_MATCH_POLICY",
    "DEFAULT_GANG_MODE",
    "DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID",
    "DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT",
    "GANG_MATCH_POLICIES",
    "GANG_MATCH_POLICY_ONCE_SATISFIED",
    "GANG_MATCH_POLICY_ONLY_WAITING",
    "GANG_MATCH_POLICY_WAITING_AND_RUNNING",
    "GANG_MODES",
    "GANG_MODE_NON_STRICT",
    "GANG_MODE_STRICT",
    "LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_MIN_AVAILABLE",
    "LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME",
    "LABEL_POD_GROUP",
    "GangMatchPolicy",
    "GangMode",
    "gang_group_id",
    "gang_group_members",
    "gang_id",
    "get_gang_groups",
    "get_gang_match_policy",
    "get_network_topology_index",
    "member_rank_key",
    "parse_gang_groups",
    "parse_gang_min_available",
    "parse_gang_total_number",
    "parse_gang_waiting_time",
    "parse_network_topology_index",
    "resolve_gang_match_policy",
    "resolve_gang_mode",
    "resolve_gang_total_number",
    "resolve_gang_waiting_time",
]

LABEL_POD_GROUP = "pod-group.scheduling.sigs.k8s.io"
"""Pod label naming the PodGroup CR in the same namespace (highest precedence). No ``/name`` suffix."""
LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_NAME = "pod-group.scheduling.sigs.k8s.io/name"
"""Deprecated lightweight-coscheduling gang name label."""
LABEL_LIGHTWEIGHT_COSCHEDULING_POD_GROUP_MIN_AVAILABLE = "pod-group.scheduling.sigs.k8s.io/min-available"
"""Deprecated lightweight-coscheduling min members label."""

ANNOTATION_GANG_PREFIX = "gang.scheduling.koordinator.sh"
ANNOTATION_GANG_NAME = ANNOTATION_GANG_PREFIX + "/name"
ANNOTATION_GANG_MIN_NUM = ANNOTATION_GANG_PREFIX + "/min-available"
ANNOTATION_GANG_WAIT_TIME = ANNOTATION_GANG_PREFIX + "/waiting-time"
ANNOTATION_GANG_TOTAL_NUM = ANNOTATION_GANG_PREFIX + "/total-number"
ANNOTATION_GANG_MODE = ANNOTATION_GANG_PREFIX + "/mode"
ANNOTATION_GANG_GROUPS = ANNOTATION_GANG_PREFIX + "/groups"
ANNOTATION_GANG_TIMEOUT = ANNOTATION_GANG_PREFIX + "/timeout"
"""Reserved: defined upstream as "the scheduler marks a timed-out gang" but never written."""
ANNOTATION_GANG_MATCH_POLICY = ANNOTATION_GANG_PREFIX + "/match-policy"
ANNOTATION_ALIAS_GANG_MATCH_POLICY = "pod-group.scheduling.sigs.k8s.io/match-policy"
"""Alias of the match policy, read only when the primary key is absent or empty."""
ANNOTATION_GANG_NETWORK_TOPOLOGY_INDEX = ANNOTATION_GANG_PREFIX + "/network-topology-index"

ANNOTATION_BIND_GANG_GROUP_ID = "internal.scheduling.koordinator.sh/bind-gang-group-id"
ANNOTATION_BIND_GANG_MEMBER_COUNT = "internal.scheduling.koordinator.sh/bind-gang-member-count"
DEPRECATED_ANNOTATION_BIND_GANG_GROUP_ID = "scheduling.koordinator.sh/bind-gang-group-id"
"""Still written by the scheduler next to the internal key."""
DEPRECATED_ANNOTATION_BIND_GANG_MEMBER_COUNT = "scheduling.koordinator.sh/bind-gang-member-count"
"""Still written by the scheduler next to the internal key."""

GangMode = Literal["Strict", "NonStrict"]
GANG_MODE_STRICT: GangMode = "Strict"
GANG_MODE_NON_STRICT: GangMode = "NonStrict"
GANG_MODES: tuple[GangMode, ...] = get_args(GangMode)
DEFAULT_GANG_MODE: GangMode = GANG_MODE_STRICT

GangMatchPolicy = Literal["only-waiting", "waiting-and-running", "once-satisfied"]
GANG_MATCH_POLICY_ONLY_WAITING: GangMatchPolicy = "only-waiting"
GANG_MATCH_POLICY_WAITING_AND_RUNNING: GangMatchPolicy = "waiting-and-running"
GANG_MATCH_POLICY_ONCE_SATISFIED: GangMatchPolicy = "once-satisfied"
GANG_MATCH_POLICIES: tuple[GangMatchPolicy, ...] = get_args(GangMatchPolicy)
DEFAULT_GANG_MATCH_POLICY: GangMatchPolicy = GANG_MATCH_POLICY_ONCE_SATISFIED
"""The default of ``CoschedulingArgs.defaultMatchPolicy``."""


def gang_id(namespace: str, name: str) -> str:
    """The gang key ``namespace/name``."""
    return f"{namespace}/{name}"


def gang_group_id(members: Iterable[str]) -> str:
    """The gang group id: the sorted ``namespace/name`` members joined with ``,``."""
    return ",".join(sorted(members))


def gang_group_members(group_id: str) -> list[str]:
    """The ``namespace/name`` gangs of a gang group id (``gang_group_id``'s inverse)."""
    return group_id.split(",")


def resolve_gang_mode(raw: str | None) -> Fallback[GangMode]:
    """The effective mode: ``Strict`` when absent or empty; an unknown value gives ``Strict`` + a warning."""
    if not raw:
        return Fallback(DEFAULT_GANG_MODE)
    if raw in GANG_MODES:
        return Fallback(raw)
    return Fallback(
        DEFAULT_GANG_MODE,
        f"{ANNOTATION_GANG_MODE}: unknown gang mode {echo(raw)} (expected one of {', '.join(GANG_MODES)}); "
        f"using {DEFAULT_GANG_MODE}",
    )


def get_gang_match_policy(annotations: Mapping[str, str] | None) -> str | None:
    """The raw match policy: the primary key, else the ``pod-group.scheduling.sigs.k8s.io`` alias."""
    primary = lookup(annotations, ANNOTATION_GANG_MATCH_POLICY)
    if primary:
        return primary
    return lookup(annotations, ANNOTATION_ALIAS_GANG_MATCH_POLICY)


def resolve_gang_match_policy(
    raw: str | None, default: GangMatchPolicy = DEFAULT_GANG_MATCH_POLICY
) -> Fallback[GangMatchPolicy]:
    """The effective match policy: ``default`` when absent or empty; an unknown value becomes ``default``
    with a warning."""
    if not raw:
        return Fallback(default)
    if raw in GANG_MATCH_POLICIES:
        return Fallback(raw)
    return Fallback(
        default,
        f"{ANNOTATION_GANG_MATCH_POLICY}: unknown match policy {echo(raw)} "
        f"(expected one of {', '.join(GANG_MATCH_POLICIES)}); using {default}",
    )


def parse_gang_min_available(raw: str, key: str = ANNOTATION_GANG_MIN_NUM) -> int:
    """The min members: a decimal int32 (Go ``strconv.ParseInt(s, 10, 32)``).

    ``key`` may be the deprecated label ``pod-group.scheduling.sigs.k8s.io/min-available``.
    """
    return parse_go_int(key, raw, bits=32)


def parse_gang_total_number(raw: str) -> int:
    """The total number of children: a decimal int32."""
    return parse_go_int(ANNOTATION_GANG_TOTAL_NUM, raw, bits=32)


def resolve_gang_total_number(raw: str | None, min_available: int) -> Fallback[int]:
    """The effective total: ``min_available`` when missing, invalid or below ``min_available``."""
    if not raw:
        return Fallback(min_available)
    try:
        total = parse_gang_total_number(raw)
    except InvalidAnnotation as error:
        return Fallback(min_available, f"{error}; using min-available {min_available}")
    if total < min_available:
        return Fallback(
            min_available,
            f"{ANNOTATION_GANG_TOTAL_NUM}: {total} is less than min-available {min_available}; "
            f"using {min_available}",
        )
    return Fallback(total)


def parse_gang_waiting_time(raw: str) -> timedelta:
    """The Permit wait time as a Go duration (``"300s"``); raises on a malformed duration."""
    return parse_duration(ANNOTATION_GANG_WAIT_TIME, raw)


def resolve_gang_waiting_time(raw: str | None) -> Fallback[timedelta | None]:
    """The wait time, or None meaning "use ``CoschedulingArgs.defaultTimeout``" when missing, zero,
    negative or invalid (a negative or invalid value also yields a warning, as Koordinator logs one)."""
    if not raw:
        return Fallback(None)
    try:
        wait = parse_gang_waiting_time(raw)
    except InvalidAnnotation as error:
        return Fallback(None, f"{error}; using the default timeout")
    if wait < timedelta(0):
        return Fallback(
            None, f"{ANNOTATION_GANG_WAIT_TIME}: {echo(raw)} is negative; using the default timeout"
        )
    if wait == timedelta(0):
        return Fallback(None)
    return Fallback(wait)


_GROUPS: TypeAdapter[list[str]] = TypeAdapter(list[str])


def parse_gang_groups(raw: str) -> list[str]:
    """The JSON array of ``"namespace/gangName"`` members of a gang group."""
    groups = parse_json(ANNOTATION_GANG_GROUPS, raw, _GROUPS)
    for index, member in enumerate(groups):
        namespace, _, name = member.partition("/")
        if member.count("/") != 1 or not namespace or not name:
            raise InvalidAnnotation(
                ANNOTATION_GANG_GROUPS,
                f"[{index}]: a gang group member must be written as namespace/name (got {echo(member)})",
            )
    return groups


def get_gang_groups(annotations: Mapping[str, str] | None) -> list[str] | None:
    """The gang group members, or None when the annotation is absent or empty (the gang alone)."""
    raw = lookup(annotations, ANNOTATION_GANG_GROUPS)
    if not raw:
        return None
    return parse_gang_groups(raw)


def parse_network_topology_index(raw: str) -> int:
    """The member's rank (Go ``strconv.Atoi``: a decimal int64)."""
    return parse_go_int(ANNOTATION_GANG_NETWORK_TOPOLOGY_INDEX, raw, bits=64)


def get_network_topology_index(annotations: Mapping[str, str] | None) -> int | None:
    """The rank, or None when the annotation is absent (Koordinator orders unindexed pods last)."""
    raw = lookup(annotations, ANNOTATION_GANG_NETWORK_TOPOLOGY_INDEX)
    if raw is None:
        return None
    return parse_network_topology_index(raw)


def member_rank_key(annotations: Mapping[str, str] | None, name: str) -> tuple[int, int, str]:
    """Where a gang's member goes in its placement order: by network-topology index, then name; a
    member without an index (or with a malformed one) after every indexed member, by name."""
    try:
        index = get_network_topology_index(annotations)
    except InvalidAnnotation:
        index = None
    return (0, index, name) if index is not None else (1, 0, name)
