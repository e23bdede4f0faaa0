"""``default_plugins``: a default plugin runs at every extension point it implements, except those
it is left off, in the profile's order or the point's explicit one; mistakes are refused."""

from __future__ import annotations

import pytest

from scheduler.framework.default_profile import DefaultPlugin, default_plugins
from scheduler.framework.profile import ExtensionPoint, PluginRef
from scheduler.framework.registry import Registry
from scheduler.plugins import DEFAULT_REGISTRY, node_affinity, node_ports, node_resources_fit, reservation

EP = ExtensionPoint
REGISTRY = Registry(
    DEFAULT_REGISTRY.get(name) for name in ("NodeAffinity", "NodePorts", "NodeResourcesFit", "Reservation")
)


def test_a_plugin_runs_at_every_point_it_implements_in_the_profiles_order() -> None:
    profile = (DefaultPlugin(node_affinity.NAME, weight=2), DefaultPlugin(node_ports.NAME))
    assert default_plugins(REGISTRY, profile, {}) == {
        EP.PRE_FILTER: (PluginRef("NodeAffinity"), PluginRef("NodePorts")),
        EP.FILTER: (PluginRef("NodeAffinity"), PluginRef("NodePorts")),
        EP.PRE_SCORE: (PluginRef("NodeAffinity"),),
        EP.SCORE: (PluginRef("NodeAffinity", 2),),
    }


def test_left_off_points_and_explicit_orders() -> None:
    profile = (
        DefaultPlugin(node_affinity.NAME, left_off=frozenset({EP.PRE_SCORE, EP.SCORE})),
        DefaultPlugin(node_ports.NAME),
    )
    plugins = default_plugins(REGISTRY, profile, {EP.FILTER: (node_ports.NAME, node_affinity.NAME)})
    assert plugins == {
        EP.PRE_FILTER: (PluginRef("NodeAffinity"), PluginRef("NodePorts")),
        EP.FILTER: (PluginRef("NodePorts"), PluginRef("NodeAffinity")),
    }


@pytest.mark.parametrize(
    ("profile", "orders", "message"),
    [
        pytest.param(
            (DefaultPlugin(node_ports.NAME), DefaultPlugin(node_ports.NAME)),
            {},
            "names NodePorts twice",
            id="twice",
        ),
        pytest.param(
            (DefaultPlugin(node_ports.NAME, left_off=frozenset({EP.BIND})),),
            {},
            "NodePorts is left off bind, which it does not implement",
            id="left-off-unimplemented",
        ),
        pytest.param(
            (DefaultPlugin(node_ports.NAME, weight=2),),
            {},
            "NodePorts has a Score weight but does not run at score",
            id="weight-without-score",
        ),
        pytest.param(
            (DefaultPlugin(node_resources_fit.NAME), DefaultPlugin(reservation.NAME)),
            {EP.BIND: (reservation.NAME, "DefaultBinder")},
            r"the explicit bind order names \['Reservation', 'DefaultBinder'\], "
            r"but the default plugins that run there are \['Reservation'\]",
            id="order-names-another-set",
        ),
    ],
)
def test_mistakes_are_refused(
    profile: tuple[DefaultPlugin, ...], orders: dict[ExtensionPoint, tuple[str, ...]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        default_plugins(REGISTRY, profile, orders)
