"""ElasticQuota's ledger keeps each quota's sums incrementally; a pod charged again with the same
quota, gang, preemptibility and requests (reserved, then seen bound) only moves ``used``. Over
random sequences of pod events, Reserve, Unreserve, deletions and reservation charges shrunk and
restored, the sums must equal those made afresh from the charges, and every charge must be
indexed by its quota and gang."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.extension import gang as gang_ext
from apis.extension import quota as quota_ext
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.elastic_quota.ledger import Ledger
from tests.scheduler.builders import make_pod

SCHEDULER = "koord-scheduler"
QUOTAS = ("a", "b")

pods = st.fixed_dictionaries(
    {
        "uid": st.sampled_from(["p0", "p1", "p2"]),
        "cpu": st.integers(1, 3),
        "on_node": st.booleans(),
        "preemptible": st.booleans(),
        "gang": st.sampled_from([None, "g"]),
        "scheduler": st.sampled_from([SCHEDULER, "other"]),
        "terminal": st.booleans(),
    }
)
steps = st.tuples(st.sampled_from(["event", "reserve", "unreserve", "remove", "shrink", "restore"]), pods)


def _pod(spec: dict[str, Any]) -> PodInfo:
    built = make_pod(spec["uid"]).uid(spec["uid"]).req(cpu=str(spec["cpu"]))
    if not spec["preemptible"]:
        built = built.label(quota_ext.LABEL_PREEMPTIBLE, "false")
    if spec["gang"]:
        built = built.label(gang_ext.LABEL_POD_GROUP, spec["gang"])
    if spec["on_node"]:
        built = built.on("n1")
    obj = built.obj()
    obj.spec.scheduler_name = spec["scheduler"]
    if spec["terminal"]:
        obj.status.phase = "Succeeded"
    return PodInfo.of(obj)


def _nonzero(sums: dict[str, int]) -> dict[str, int]:
    return {name: amount for name, amount in sums.items() if amount}


@settings(max_examples=200, deadline=None)
@given(sequence=st.lists(st.tuples(steps, st.sampled_from(QUOTAS)), max_size=14))
def test_the_sums_equal_those_made_afresh(sequence: list[tuple[tuple[str, dict[str, Any]], str]]) -> None:
    ledger = Ledger(SCHEDULER)
    shrunk: dict[str, PodInfo] = {}
    for (action, spec), quota in sequence:
        pod = _pod(spec)
        if action == "event":
            ledger.on_pod(pod, quota)
        elif action == "reserve":
            ledger.reserve(pod, quota)
        elif action == "unreserve":
            ledger.unreserve(pod, quota)
        elif action == "remove":
            ledger.remove(pod.uid)
        elif action == "shrink":
            before = ledger.replace_requests(pod.uid, {"cpu": 500})
            if before is not None:
                shrunk[pod.uid] = before
        elif pod.uid in shrunk:
            ledger.restore(shrunk.pop(pod.uid))

        fresh = Ledger(SCHEDULER)
        for uid in ledger.uids():
            charge = ledger.charge(uid)
            assert charge is not None
            fresh._put(charge)
            assert ledger._by_quota[charge.quota][uid] is charge
            if charge.gang is not None:
                assert ledger._by_gang[(charge.quota, charge.gang)][uid] is charge
        kept, made = ledger.usage(), fresh.usage()
        for name in set(kept) | set(made):
            mine, theirs = kept.get(name), made.get(name)
            for part in ("request", "used", "non_preemptible_request", "non_preemptible_used"):
                assert _nonzero(getattr(mine, part) if mine else {}) == _nonzero(
                    getattr(theirs, part) if theirs else {}
                ), (name, part)
