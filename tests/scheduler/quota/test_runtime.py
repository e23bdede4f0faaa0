"""Runtime quota as pure math: the worked example of algorithms.md 4.3, min scaling (4.4), and
properties over random trees (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.quota import (
    Child,
    QuotaSpec,
    TreeInput,
    Usage,
    compute_tree,
    hamilton_shares,
    scale_mins,
    share,
)
from tests.examples import examples

EXAMPLE = [
    Child("A", min=20, request=5, weight=40),
    Child("B", min=30, request=45, weight=60),
    Child("C", min=10, request=60, weight=30),
    Child("D", min=20, request=80, weight=90),
]


def test_the_worked_example_of_the_guide() -> None:
    assert share(100, EXAMPLE) == {"A": 5, "B": 42, "C": 16, "D": 37}


def test_a_quota_that_does_not_lend_keeps_its_min() -> None:
    children = [Child("A", min=20, request=5, weight=40, lends=False), *EXAMPLE[1:]]
    assert share(100, children) == {"A": 20, "B": 37, "C": 13, "D": 30}


def test_the_worked_example_through_a_tree() -> None:
    """The same numbers when the four quotas hang under a root of 100 with pods asking 5/45/60/80."""
    quotas = {"root": QuotaSpec("root", "", max={"cpu": 1000})}
    requests = {"A": 5, "B": 45, "C": 60, "D": 80}
    for child in EXAMPLE:
        quotas[child.name] = QuotaSpec(
            child.name, "root", min={"cpu": child.min}, max={"cpu": 100}, shared_weight={"cpu": child.weight}
        )
    usage = {name: Usage(request={"cpu": amount}) for name, amount in requests.items()}
    figures = compute_tree(quotas, usage, TreeInput("root", {"cpu": 100}))
    assert {name: figures[name].runtime["cpu"] for name in requests} == {"A": 5, "B": 42, "C": 16, "D": 37}
    assert figures["root"].request == {"cpu": 190}


def test_a_capped_child_hands_its_excess_to_the_others() -> None:
    # B is hungry for only 2 above its min: it is capped at its request and C gets the rest.
    children = [Child("B", min=10, request=12, weight=50), Child("C", min=10, request=100, weight=50)]
    assert share(40, children) == {"B": 12, "C": 28}


def test_weight_zero_never_receives_spare() -> None:
    assert share(40, [Child("B", 0, 30, 0), Child("C", 0, 10, 1)]) == {"B": 0, "C": 10}


@pytest.mark.parametrize(
    ("total", "mins", "expected"),
    [
        (100, {"a": 30, "b": 50}, {"a": 30, "b": 50}),
        (40, {"a": 30, "b": 50}, {"a": 15, "b": 25}),
        (10, {"a": 1, "b": 1, "c": 1, "d": 100}, {"a": 0, "b": 0, "c": 0, "d": 9}),
        (0, {"a": 30}, {"a": 0}),
        (-5, {"a": 30}, {"a": 0}),
    ],
    ids=["fits", "halved", "truncated", "nothing", "negative"],
)
def test_mins_scale_down_in_proportion(total: int, mins: dict[str, int], expected: dict[str, int]) -> None:
    assert scale_mins(total, mins) == expected


def test_hamilton_leftover_ties_go_by_name() -> None:
    assert hamilton_shares(1, {"b": 1, "a": 1}) == {"b": 0, "a": 1}
    assert hamilton_shares(10, {"x": 0, "y": 3}) == {"x": 0, "y": 10}


@given(st.integers(0, 10_000), st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 1000), min_size=1))
def test_hamilton_shares_sum_exactly(amount: int, weights: dict[str, int]) -> None:
    shares = hamilton_shares(amount, weights)
    if any(w > 0 for w in weights.values()):
        assert sum(shares.values()) == amount
    total_weight = sum(weights.values())
    for name, weight in weights.items():
        if total_weight:
            assert abs(shares[name] * total_weight - weight * amount) < total_weight  # within one unit


# ---- random trees ------------------------------------------------------------------------------


@st.composite
def trees(draw: st.DrawFn) -> tuple[dict[str, QuotaSpec], dict[str, Usage], int]:
    """A root and up to 9 quotas under it (each hangs under an earlier one), one resource."""
    count = draw(st.integers(1, 9))
    quotas = {"root": QuotaSpec("root", "", max={"cpu": 10**9})}
    names = ["root"]
    for i in range(count):
        name = f"q{i}"
        parent = draw(st.sampled_from(names))
        high = draw(st.integers(0, 200))
        low = draw(st.integers(0, high))
        weight = draw(st.integers(0, 100))
        lends = draw(st.booleans())
        quotas[name] = QuotaSpec(
            name, parent, min={"cpu": low}, max={"cpu": high}, shared_weight={"cpu": weight}, lends=lends
        )
        names.append(name)
    parents = {q.parent for q in quotas.values()}
    usage = {
        name: Usage(request={"cpu": draw(st.integers(0, 300))}) for name in quotas if name not in parents
    }
    return quotas, usage, draw(st.integers(0, 600))


def _children(quotas: dict[str, QuotaSpec], parent: str) -> list[str]:
    return [name for name, q in quotas.items() if q.parent == parent and name != "root"]


@settings(max_examples=examples(300))
@given(trees())
def test_runtime_respects_max_and_parent(tree: tuple[dict[str, QuotaSpec], dict[str, Usage], int]) -> None:
    quotas, usage, total = tree
    figures = compute_tree(quotas, usage, TreeInput("root", {"cpu": total}))
    assert set(figures) == set(quotas)
    for name, f in figures.items():
        kids = _children(quotas, name)
        parent_runtime = max(f.runtime["cpu"], 0)
        for kid in kids:
            child = figures[kid].runtime["cpu"]
            assert 0 <= child <= figures[kid].max["cpu"], kid
            assert child <= parent_runtime, kid
        assert sum(figures[k].runtime["cpu"] for k in kids) <= parent_runtime, name


@settings(max_examples=examples(300))
@given(trees())
def test_a_request_within_min_is_granted(tree: tuple[dict[str, QuotaSpec], dict[str, Usage], int]) -> None:
    """Where the siblings' mins fit in what their parent has, a quota asking no more than its min
    gets all it asks for (and one that does not lend gets its whole min)."""
    quotas, usage, total = tree
    figures = compute_tree(quotas, usage, TreeInput("root", {"cpu": total}))
    for name, f in figures.items():
        kids = _children(quotas, name)
        if sum(figures[k].min["cpu"] for k in kids) > f.runtime["cpu"]:
            continue
        for kid in kids:
            child = figures[kid]
            if child.request["cpu"] <= child.min["cpu"]:
                wanted = child.request["cpu"] if quotas[kid].lends else child.min["cpu"]
                assert child.runtime["cpu"] == wanted, kid


@settings(max_examples=examples(200))
@given(trees())
def test_requests_add_up_the_tree(tree: tuple[dict[str, QuotaSpec], dict[str, Usage], int]) -> None:
    quotas, usage, total = tree
    figures = compute_tree(quotas, usage, TreeInput("root", {"cpu": total}))
    for name, f in figures.items():
        kids = _children(quotas, name)
        if kids:
            assert f.child_request["cpu"] == sum(figures[k].request["cpu"] for k in kids)
        if name != "root":
            assert f.request["cpu"] <= f.max["cpu"]
            if not quotas[name].lends:
                assert f.request["cpu"] >= min(f.min["cpu"], f.max["cpu"])


def test_outside_quotas_keep_their_max_and_their_use_is_taken_off() -> None:
    quotas = {
        "root": QuotaSpec("root", "", max={"cpu": 10**9}),
        "default": QuotaSpec("default", "root", max={"cpu": 10**6}),
        "team": QuotaSpec("team", "root", max={"cpu": 100}, shared_weight={"cpu": 100}),
    }
    usage = {"default": Usage(request={"cpu": 500}, used={"cpu": 30}), "team": Usage(request={"cpu": 100})}
    figures = compute_tree(quotas, usage, TreeInput("root", {"cpu": 100}, outside=frozenset({"default"})))
    assert figures["default"].runtime == {"cpu": 10**6}
    assert figures["root"].runtime["cpu"] == 70
    assert figures["team"].runtime == {"cpu": 70}
    # The default quota's request is not taken out of the shared spare (the "bug?" of 4.10).
    assert figures["root"].child_request["cpu"] == 100


def borrowed_tree() -> tuple[dict[str, QuotaSpec], dict[str, Usage]]:
    """P (min = max = 8) with A and B (min 4, max 8): B holds 6 (2 of them A's idle min), then A
    asks for its min back."""
    quotas = {
        "root": QuotaSpec("root", "", max={"cpu": 1000}),
        "P": QuotaSpec("P", "root", min={"cpu": 8}, max={"cpu": 8}, shared_weight={"cpu": 8}),
        "A": QuotaSpec("A", "P", min={"cpu": 4}, max={"cpu": 8}, shared_weight={"cpu": 8}),
        "B": QuotaSpec("B", "P", min={"cpu": 4}, max={"cpu": 8}, shared_weight={"cpu": 8}),
    }
    usage = {"A": Usage(request={"cpu": 4}), "B": Usage(request={"cpu": 6}, used={"cpu": 6})}
    return quotas, usage


def test_without_the_guarantee_a_lender_takes_its_min_back() -> None:
    quotas, usage = borrowed_tree()
    figures = compute_tree(quotas, usage, TreeInput("root", {"cpu": 8}))
    assert (figures["A"].runtime, figures["B"].runtime) == ({"cpu": 4}, {"cpu": 4})
    assert figures["B"].guaranteed == figures["B"].allocated == {}  # not computed without the gate


def test_the_guarantee_keeps_what_a_quota_holds() -> None:
    """Koordinator's ElasticQuotaGuaranteeUsage: allocated = used (leaf) or the children's
    guaranteed (parent); guaranteed = max(min, allocated), and no quota is shared below it."""
    quotas, usage = borrowed_tree()
    figures = compute_tree(quotas, usage, TreeInput("root", {"cpu": 8}), guarantee=True)
    assert (figures["A"].allocated, figures["A"].guaranteed) == ({"cpu": 0}, {"cpu": 4})
    assert (figures["B"].allocated, figures["B"].guaranteed) == ({"cpu": 6}, {"cpu": 6})
    assert (figures["P"].allocated, figures["P"].guaranteed) == ({"cpu": 10}, {"cpu": 10})
    assert figures["B"].runtime == {"cpu": 6}  # not taken back below what B holds
    assert figures["A"].runtime == {"cpu": 4}
    assert figures["root"].guaranteed == {}
