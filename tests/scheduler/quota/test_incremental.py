"""Incremental quota-tree updates give exactly what a full computation gives: random trees (with
outside quotas, non-lending quotas, min scaling and the guarantee gate), random usage changes and
random changes of quotas' min, max, weight and lending."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.quota import QuotaSpec, TreeInput, Usage, compute_tree
from scheduler.quota.incremental import TreeState
from tests.examples import examples


@st.composite
def usages(draw: st.DrawFn) -> Usage:
    request = draw(st.integers(0, 300))
    used = draw(st.integers(0, request))
    np_used = draw(st.integers(0, used))
    return Usage(
        request={"cpu": request, "memory": draw(st.integers(0, 300))},
        used={"cpu": used},
        non_preemptible_request={"cpu": np_used},
        non_preemptible_used={"cpu": np_used},
    )


@st.composite
def respecced(draw: st.DrawFn, spec: QuotaSpec) -> QuotaSpec:
    """The same quota (same parent) with new min, max, weight and lending."""
    maximum = {r: draw(st.integers(0, 200)) for r in spec.max}
    return QuotaSpec(
        spec.name,
        spec.parent,
        min={r: draw(st.integers(0, high)) for r, high in maximum.items()},
        max=maximum,
        shared_weight={r: draw(st.integers(0, 100)) for r in maximum},
        lends=draw(st.booleans()),
    )


Round = tuple[dict[str, Usage], dict[str, QuotaSpec]]


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[dict[str, QuotaSpec], dict[str, Usage], TreeInput, list[Round], bool, bool]:
    """A root, the outside quota ``sys``, up to 14 quotas (each under an earlier one), two
    resources; then up to 6 rounds of usage changes on a few quotas each."""
    quotas = {
        "root": QuotaSpec("root", "", max={"cpu": 10**9, "memory": 10**9}),
        "sys": QuotaSpec("sys", "root", max={"cpu": 50, "memory": 50}, shared_weight={"cpu": 50}),
    }
    names = ["root"]
    for i in range(draw(st.integers(1, 14))):
        name = f"q{i}"
        spec: dict[str, dict[str, int]] = {"min": {}, "max": {}, "weight": {}}
        for resource in draw(st.sampled_from([("cpu",), ("cpu", "memory")])):
            high = draw(st.integers(0, 200))
            spec["max"][resource] = high
            spec["min"][resource] = draw(st.integers(0, high))
            spec["weight"][resource] = draw(st.integers(0, 100))
        quotas[name] = QuotaSpec(
            name,
            draw(st.sampled_from(names)),
            min=spec["min"],
            max=spec["max"],
            shared_weight=spec["weight"],
            lends=draw(st.booleans()),
        )
        names.append(name)
    everyone = sorted(quotas)
    usage = {name: draw(usages()) for name in everyone}
    rounds = [
        {name: draw(usages()) for name in draw(st.lists(st.sampled_from(everyone), min_size=1, max_size=3))}
        for _ in range(draw(st.integers(1, 6)))
    ]
    respecs = [
        {
            name: draw(respecced(quotas[name]))
            for name in draw(st.lists(st.sampled_from(names[1:]), max_size=2))
        }
        for _ in rounds
    ]
    total = {"cpu": draw(st.integers(0, 800)), "memory": draw(st.integers(0, 800))}
    tree = TreeInput("root", total, outside=frozenset({"sys"}))
    return (
        quotas,
        usage,
        tree,
        list(zip(rounds, respecs, strict=True)),
        draw(st.booleans()),
        draw(st.booleans()),
    )


@settings(max_examples=examples(100, full=1500), deadline=None)
@given(scenarios())
def test_an_incremental_update_equals_a_full_computation(
    scenario: tuple[dict[str, QuotaSpec], dict[str, Usage], TreeInput, list[Round], bool, bool],
) -> None:
    quotas, usage, tree, rounds, scale_min, guarantee = scenario
    state = TreeState(quotas, usage, tree, scale_min=scale_min, guarantee=guarantee)
    assert state.figures == compute_tree(quotas, usage, tree, scale_min=scale_min, guarantee=guarantee)
    for changes, specs in rounds:
        usage = {**usage, **changes}
        quotas = {**quotas, **specs}
        state.update(changes, usage, specs)
        assert state.figures == compute_tree(quotas, usage, tree, scale_min=scale_min, guarantee=guarantee)


def test_a_change_within_min_touches_only_the_path_to_the_root() -> None:
    """Ten teams under two departments, every request within min: one team's new pod changes
    that team, its department and the root, and no one else's figures (with min scaling, the
    siblings' scaled mins follow their parent's runtime: they are refreshed too, and no more)."""
    quotas = {"root": QuotaSpec("root", "", max={"cpu": 10**9})}
    for d in range(2):
        quotas[f"d{d}"] = QuotaSpec(f"d{d}", "root", min={"cpu": 500}, max={"cpu": 1000})
        for t in range(5):
            quotas[f"d{d}t{t}"] = QuotaSpec(f"d{d}t{t}", f"d{d}", min={"cpu": 100}, max={"cpu": 200})
    usage = {name: Usage(request={"cpu": 10}) for name in quotas if "t" in name}
    tree = TreeInput("root", {"cpu": 1000})
    state = TreeState(quotas, usage, tree, scale_min=False)
    scaled = TreeState(quotas, usage, tree)
    usage["d0t3"] = Usage(request={"cpu": 20}, used={"cpu": 20})
    assert state.update(["d0t3"], usage) == {"d0t3", "d0", "root"}
    assert state.figures == compute_tree(quotas, usage, tree, scale_min=False)
    assert scaled.update(["d0t3"], usage) == {"root", "d0", *(f"d0t{t}" for t in range(5))}
    assert scaled.figures == compute_tree(quotas, usage, tree)
