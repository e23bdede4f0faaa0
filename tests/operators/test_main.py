"""koord-manager's flags and the handlers it registers."""

from __future__ import annotations

import logging

import kopf
import pytest
from kubernetes_asyncio import client
from pydantic import ValidationError

import operators.__main__ as main_module
from operators.__main__ import build_registry, operator_settings, parse_args
from operators.config import ManagerConfig


def test_peering_defaults_to_koord_manager() -> None:
    config = parse_args([])
    assert config.peering_name == "koord-manager"
    assert not config.standalone
    assert config.peering_priority is None


def test_peering_flags() -> None:
    config = parse_args(["--peering", "blue", "--peering-priority", "7", "--resync-seconds", "0.5"])
    assert (config.peering_name, config.peering_priority, config.resync_seconds) == ("blue", 7, 0.5)
    assert parse_args(["--standalone"]).standalone
    assert parse_args([]).quota_group_namespace == "koordinator-system"
    assert parse_args(["--quota-group-namespace", "quotas"]).quota_group_namespace == "quotas"


def test_reservation_gc_duration_defaults_to_koordinators_24h() -> None:
    assert parse_args([]).reservation_gc_duration_seconds == 86400
    assert parse_args(["--reservation-gc-duration-seconds", "60"]).reservation_gc_duration_seconds == 60
    with pytest.raises(ValidationError):
        parse_args(["--reservation-gc-duration-seconds", "0"])


def test_registry_holds_the_operators() -> None:
    registry = build_registry(parse_args(["--standalone"]))
    indices = {h.id for h in registry._indexing.get_all_handlers()}
    timers = {h.id for h in registry._spawning.get_all_handlers()}
    assert indices == {
        "podgroup_members",
        "node_topology_labels",
        "elastic_quotas",
        "node_capacity",
        "reservation_owners",
        "reservation_nodes",
        "colocation_profiles",
        "colocation_namespaces",
        "noderesource_pods",
    }
    assert timers == {
        "reservation_lifecycle",
        "podgroup_status",
        "networktopology_detail_status",
        "root_quota_total",
        "elasticquotaprofile_tree_root",
        "builtin_quotas_namespace",
    }
    watchers = {h.id for h in registry._watching.get_all_handlers()}
    assert {"nodemetric_per_node", "nodemetric_recreate", "noderesource_pod_events"} <= watchers
    webhooks = {h.id for h in registry._webhooks.get_all_handlers()}
    assert {"validate-elasticquota-tree", "default-elasticquotas", "validate-reservation-binding"} <= webhooks
    startup = {h.id for h in build_registry(parse_args([]))._activities.get_all_handlers()}
    assert any("peering" in i for i in startup)


def test_shutdown_is_bounded_even_when_the_api_server_is_gone() -> None:
    """Kopf's own bound is 10 minutes; koord-manager exits within 5 s of SIGTERM (or the flag's)."""
    assert operator_settings(parse_args([])).process.ultimate_exiting_timeout == 5.0
    assert (
        operator_settings(parse_args(["--shutdown-timeout", "2.5"])).process.ultimate_exiting_timeout == 2.5
    )


async def test_the_peering_object_waits_for_an_unreachable_api_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The startup handler raises TemporaryError, so Kopf retries it instead of failing the start."""

    async def nowhere(config: ManagerConfig) -> client.Configuration:
        return client.Configuration(host="https://127.0.0.1:1")  # nothing listens on port 1

    monkeypatch.setattr(main_module, "load_configuration", nowhere)
    with pytest.raises(kopf.TemporaryError, match="cannot create the ClusterKopfPeering 'koord-manager' yet"):
        await main_module.ensure_peering_object(parse_args([]), logging.getLogger("test"))


def test_koord_manager_takes_koordinators_feature_gates(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(
        ["--feature-gates", "ElasticQuotaGuaranteeUsage=true"]
    ).feature_gates.elastic_quota_guarantee_usage
    assert not parse_args([]).feature_gates.elastic_quota_guarantee_usage
    with pytest.raises(SystemExit) as exited:
        parse_args(["--feature-gates", "NoSuchGate=true"])
    assert exited.value.code == 2
    assert "unrecognized feature gate: 'NoSuchGate'" in capsys.readouterr().err
