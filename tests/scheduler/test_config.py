"""KubeSchedulerConfiguration loading: kube-scheduler's plugin-set semantics, strictness and defaults.

The default plugin set and ``implements`` here are small fakes shaped like the shipped profile, so
these tests do not depend on the real plugins.
"""

from __future__ import annotations

import logging
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from scheduler import __main__ as koord_scheduler
from scheduler.config import (
    DEFAULT_CONFIG_YAML,
    ConfigError,
    SchedulerConfig,
    load_config,
)
from scheduler.framework.profile import ExtensionPoint as EP
from scheduler.framework.profile import PluginRef
from scheduler.framework.registry import Registry
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY

DEFAULTS: dict[EP, tuple[PluginRef, ...]] = {
    EP.PRE_ENQUEUE: (PluginRef("Coscheduling"),),
    EP.QUEUE_SORT: (PluginRef("PrioritySort"),),
    EP.PRE_FILTER: (PluginRef("Reservation"), PluginRef("Coscheduling"), PluginRef("ElasticQuota")),
    EP.FILTER: (PluginRef("LoadAwareScheduling"), PluginRef("Reservation")),
    EP.POST_FILTER: (PluginRef("Coscheduling"), PluginRef("DefaultPreemption")),
    EP.PRE_SCORE: (PluginRef("Reservation"),),
    EP.SCORE: (
        PluginRef("LoadAwareScheduling", 1),
        PluginRef("Reservation", 5000),
        PluginRef("Coscheduling", 1),
    ),
    EP.RESERVE: (PluginRef("Reservation"), PluginRef("Coscheduling"), PluginRef("ElasticQuota")),
    EP.PERMIT: (PluginRef("Coscheduling"),),
    EP.PRE_BIND: (PluginRef("Reservation"), PluginRef("DefaultPreBind")),
    EP.BIND: (PluginRef("DefaultBinder"),),
    EP.POST_BIND: (PluginRef("Coscheduling"),),
}

IMPLEMENTS: dict[str, frozenset[EP]] = {
    "PrioritySort": frozenset({EP.QUEUE_SORT}),
    "CustomSort": frozenset({EP.QUEUE_SORT}),
    "Coscheduling": frozenset(
        {EP.PRE_ENQUEUE, EP.PRE_FILTER, EP.POST_FILTER, EP.SCORE, EP.RESERVE, EP.PERMIT, EP.POST_BIND}
    ),
    "Reservation": frozenset(
        {EP.PRE_FILTER, EP.FILTER, EP.POST_FILTER, EP.PRE_SCORE, EP.SCORE, EP.RESERVE, EP.PRE_BIND, EP.BIND}
    ),
    "ElasticQuota": frozenset({EP.PRE_FILTER, EP.POST_FILTER, EP.RESERVE}),
    "LoadAwareScheduling": frozenset({EP.FILTER, EP.SCORE, EP.RESERVE}),
    "DefaultPreemption": frozenset({EP.POST_FILTER}),
    "DefaultPreBind": frozenset({EP.PRE_BIND}),
    "DefaultBinder": frozenset({EP.BIND}),
    "NodeNUMAResource": frozenset({EP.PRE_FILTER, EP.FILTER, EP.SCORE, EP.RESERVE, EP.PRE_BIND}),
    "NodeResourcesFitPlus": frozenset({EP.SCORE}),
    "ScarceResourceAvoidance": frozenset({EP.SCORE}),
}


def implements(name: str) -> frozenset[EP]:
    return IMPLEMENTS[name]


HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


def load(body: str, header: str = HEADER) -> SchedulerConfig:
    return load_config(header + textwrap.dedent(body), DEFAULTS, implements)


def names(config: SchedulerConfig, point: EP, profile: int = 0) -> list[str]:
    return [ref.name for ref in config.profiles[profile].plugins[point]]


def score(config: SchedulerConfig, profile: int = 0) -> list[tuple[str, int]]:
    return [(ref.name, ref.weight) for ref in config.profiles[profile].plugins[EP.SCORE]]


def plugins(point: str, entries: str) -> str:
    """One profile ``a`` whose ``plugins`` set only ``point`` to the flow-style ``entries``."""
    return f"profiles:\n- schedulerName: a\n  plugins:\n    {point}:\n      {entries}\n"


def plugin_config(entries: str) -> str:
    return f"profiles:\n- schedulerName: a\n  pluginConfig: {entries}\n"


def defaults_except(**changed: list[str]) -> dict[EP, list[str]]:
    """The default names per point, with the points named in ``changed`` (by field name) replaced."""
    out = {point: [ref.name for ref in DEFAULTS.get(point, ())] for point in EP}
    for key, value in changed.items():
        out[EP(key)] = value
    return out


# ---- resolution -----------------------------------------------------------------------------

NODE_RESOURCES_FIT_PLUS = """\
profiles:
- pluginConfig:
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitPlusArgs
      resources:
        nvidia.com/gpu:
          type: MostAllocated
          weight: 2
        cpu:
          type: LeastAllocated
          weight: 1
        memory:
          type: LeastAllocated
          weight: 1
    name: NodeResourcesFitPlus
  plugins:
    score:
      enabled:
      - name: NodeResourcesFitPlus
        weight: 2
  schedulerName: koord-scheduler
"""

SCARCE_RESOURCE_AVOIDANCE = """\
profiles:
- pluginConfig:
  - args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: ScarceResourceAvoidanceArgs
      resources:
      - nvidia.com/gpu
    name: ScarceResourceAvoidance
  plugins:
    score:
      enabled:
      - name: NodeResourcesFitPlus
        weight: 2
      - name: ScarceResourceAvoidance
        weight: 2
      disabled:
      - name: "*"
  schedulerName: koord-scheduler
"""

DEFAULT_SCORE = [("LoadAwareScheduling", 1), ("Reservation", 5000), ("Coscheduling", 1)]


@pytest.mark.parametrize(
    ("body", "want_points", "want_score"),
    [
        pytest.param(
            "profiles:\n- schedulerName: koord-scheduler\n",
            defaults_except(),
            DEFAULT_SCORE,
            id="no-plugins-runs-the-default-set",
        ),
        pytest.param(
            NODE_RESOURCES_FIT_PLUS,
            defaults_except(
                score=["LoadAwareScheduling", "Reservation", "Coscheduling", "NodeResourcesFitPlus"]
            ),
            [*DEFAULT_SCORE, ("NodeResourcesFitPlus", 2)],
            id="v1.6-NodeResourcesFitPlus-appends-after-defaults",
        ),
        pytest.param(
            SCARCE_RESOURCE_AVOIDANCE,
            defaults_except(score=["NodeResourcesFitPlus", "ScarceResourceAvoidance"]),
            [("NodeResourcesFitPlus", 2), ("ScarceResourceAvoidance", 2)],
            id="v1.6-ScarceResourceAvoidance-star-disables-only-score",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                filter:
                  disabled: [{name: LoadAwareScheduling}]
            """,
            defaults_except(filter=["Reservation"]),
            DEFAULT_SCORE,
            id="disable-one-default-at-one-point",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                score:
                  enabled: [{name: Coscheduling, weight: 7}]
            """,
            defaults_except(score=["Coscheduling", "LoadAwareScheduling", "Reservation"]),
            [("Coscheduling", 7), ("LoadAwareScheduling", 1), ("Reservation", 5000)],
            id="re-enabling-a-default-moves-it-first-and-re-weights-it",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                score:
                  enabled: [{name: Reservation}]
            """,
            defaults_except(score=["Reservation", "LoadAwareScheduling", "Coscheduling"]),
            [("Reservation", 1), ("LoadAwareScheduling", 1), ("Coscheduling", 1)],
            id="re-enabling-a-default-without-weight-means-weight-1",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                score:
                  enabled: [{name: Reservation, weight: 3}]
                  disabled: [{name: Reservation}]
            """,
            defaults_except(score=["LoadAwareScheduling", "Coscheduling", "Reservation"]),
            [("LoadAwareScheduling", 1), ("Coscheduling", 1), ("Reservation", 3)],
            id="disable-then-enable-moves-a-default-last",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                queueSort:
                  enabled: [{name: CustomSort}]
                  disabled: [{name: "*"}]
            """,
            defaults_except(queueSort=["CustomSort"]),
            DEFAULT_SCORE,
            id="replace-the-queue-sort",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                multiPoint:
                  enabled: [{name: NodeNUMAResource, weight: 4}]
            """,
            defaults_except(
                preFilter=["Reservation", "Coscheduling", "ElasticQuota", "NodeNUMAResource"],
                filter=["LoadAwareScheduling", "Reservation", "NodeNUMAResource"],
                score=["LoadAwareScheduling", "Reservation", "Coscheduling", "NodeNUMAResource"],
                reserve=["Reservation", "Coscheduling", "ElasticQuota", "NodeNUMAResource"],
                preBind=["Reservation", "DefaultPreBind", "NodeNUMAResource"],
            ),
            [*DEFAULT_SCORE, ("NodeNUMAResource", 4)],
            id="multiPoint-expands-to-every-implemented-point",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                multiPoint:
                  enabled: [{name: NodeNUMAResource, weight: 4}]
                filter:
                  disabled: [{name: NodeNUMAResource}]
                reserve:
                  disabled: [{name: "*"}]
                score:
                  enabled: [{name: NodeNUMAResource, weight: 9}]
            """,
            defaults_except(
                preFilter=["Reservation", "Coscheduling", "ElasticQuota", "NodeNUMAResource"],
                score=["NodeNUMAResource", "LoadAwareScheduling", "Reservation", "Coscheduling"],
                reserve=[],
                preBind=["Reservation", "DefaultPreBind", "NodeNUMAResource"],
            ),
            [("NodeNUMAResource", 9), *DEFAULT_SCORE],
            id="multiPoint-yields-to-per-point-disable-star-and-override",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                multiPoint:
                  enabled: [{name: Reservation, weight: 10}]
            """,
            defaults_except(
                postFilter=["Coscheduling", "DefaultPreemption", "Reservation"],
                bind=["DefaultBinder", "Reservation"],
            ),
            [("LoadAwareScheduling", 1), ("Reservation", 10), ("Coscheduling", 1)],
            id="multiPoint-re-listing-a-default-keeps-its-place-takes-the-weight-and-expands",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                multiPoint:
                  enabled:
                  - {name: PrioritySort}
                  - {name: DefaultBinder}
                  - {name: LoadAwareScheduling, weight: 2}
                  disabled: [{name: "*"}]
            """,
            {
                **{point: [] for point in EP},
                EP.QUEUE_SORT: ["PrioritySort"],
                EP.BIND: ["DefaultBinder"],
                EP.FILTER: ["LoadAwareScheduling"],
                EP.SCORE: ["LoadAwareScheduling"],
                EP.RESERVE: ["LoadAwareScheduling"],
            },
            [("LoadAwareScheduling", 2)],
            id="multiPoint-disable-star-drops-every-default",
        ),
        pytest.param(
            """\
            profiles:
            - schedulerName: koord-scheduler
              plugins:
                multiPoint:
                  disabled: [{name: Coscheduling}]
            """,
            defaults_except(
                preEnqueue=[],
                preFilter=["Reservation", "ElasticQuota"],
                postFilter=["DefaultPreemption"],
                score=["LoadAwareScheduling", "Reservation"],
                reserve=["Reservation", "ElasticQuota"],
                permit=[],
                postBind=[],
            ),
            [("LoadAwareScheduling", 1), ("Reservation", 5000)],
            id="multiPoint-disable-one-removes-it-everywhere",
        ),
    ],
)
def test_profile_resolution(
    body: str, want_points: dict[EP, list[str]], want_score: list[tuple[str, int]]
) -> None:
    config = load(body)
    assert len(config.profiles) == 1
    assert {point: names(config, point) for point in EP} == want_points
    assert score(config) == want_score


def test_a_profile_that_only_sets_plugin_args_keeps_every_default_plugin() -> None:
    config = load(
        """\
        profiles:
        - schedulerName: koord-scheduler
          pluginConfig:
          - name: Coscheduling
            args:
              apiVersion: kubescheduler.config.k8s.io/v1
              kind: CoschedulingArgs
              enablePreemption: true
        """
    )
    (profile,) = config.profiles
    assert profile.plugins == {point: DEFAULTS.get(point, ()) for point in EP}
    assert profile.plugin_args == {"Coscheduling": {"enablePreemption": True}}


def test_plugin_args_are_kept_raw_without_api_version_and_kind() -> None:
    config = load(NODE_RESOURCES_FIT_PLUS)
    assert config.profiles[0].plugin_args == {
        "NodeResourcesFitPlus": {
            "resources": {
                "nvidia.com/gpu": {"type": "MostAllocated", "weight": 2},
                "cpu": {"type": "LeastAllocated", "weight": 1},
                "memory": {"type": "LeastAllocated", "weight": 1},
            }
        }
    }


def test_several_profiles_resolve_independently() -> None:
    config = load(
        """\
        profiles:
        - schedulerName: koord-scheduler
        - schedulerName: koord-scheduler-no-score
          percentageOfNodesToScore: 30
          plugins:
            score:
              disabled: [{name: "*"}]
        """
    )
    assert [p.scheduler_name for p in config.profiles] == ["koord-scheduler", "koord-scheduler-no-score"]
    assert score(config, 0) == DEFAULT_SCORE
    assert score(config, 1) == []
    assert config.profile("koord-scheduler-no-score").percentage_of_nodes_to_score == 30
    assert config.profile("koord-scheduler").percentage_of_nodes_to_score is None


# ---- defaults and versions --------------------------------------------------------------------


def test_no_profiles_means_one_koord_scheduler_profile_with_the_default_set() -> None:
    config = load("")
    assert [p.scheduler_name for p in config.profiles] == ["koord-scheduler"]
    assert config.profiles[0].plugins == {point: DEFAULTS.get(point, ()) for point in EP}


def test_a_lone_unnamed_profile_is_default_scheduler_as_in_kube() -> None:
    config = load("profiles:\n- percentageOfNodesToScore: 50\n")
    assert config.profiles[0].scheduler_name == "default-scheduler"


def test_process_settings_have_kube_scheduler_and_koordinator_defaults() -> None:
    config = load("")
    le = config.leader_election
    assert le.leader_elect is True
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (
        timedelta(seconds=15),
        timedelta(seconds=10),
        timedelta(seconds=2),
    )
    assert (le.resource_lock, le.resource_name, le.resource_namespace) == (
        "leases",
        "koord-scheduler",
        "koordinator-system",
    )
    assert (config.client_connection.qps, config.client_connection.burst) == (50.0, 100)
    assert config.client_connection.kubeconfig == ""
    assert config.parallelism == 16
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (1, 10)
    assert config.percentage_of_nodes_to_score is None


def test_process_settings_are_read() -> None:
    config = load(
        """\
        leaderElection:
          leaderElect: false
          leaseDuration: 1m30s
          renewDeadline: 1m
          retryPeriod: 500ms
        clientConnection:
          kubeconfig: /etc/kubernetes/scheduler.conf
          qps: 100
          burst: 200
        parallelism: 32
        percentageOfNodesToScore: 40
        podInitialBackoffSeconds: 2
        podMaxBackoffSeconds: 60
        """
    )
    assert config.leader_election.leader_elect is False
    assert config.leader_election.lease_duration == timedelta(seconds=90)
    assert config.leader_election.retry_period == timedelta(milliseconds=500)
    assert config.client_connection.kubeconfig == "/etc/kubernetes/scheduler.conf"
    assert (config.client_connection.qps, config.client_connection.burst) == (100.0, 200)
    assert config.parallelism == 32
    assert config.percentage_of_nodes_to_score == 40
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (2, 60)


def test_zero_qps_and_burst_mean_the_defaults_as_in_kube() -> None:
    config = load("clientConnection:\n  qps: 0\n  burst: 0\n")
    assert (config.client_connection.qps, config.client_connection.burst) == (50.0, 100)


@pytest.mark.parametrize("version", ["v1", "v1beta3", "v1beta2"])
def test_older_api_versions_are_read_as_v1(version: str) -> None:
    header = f"apiVersion: kubescheduler.config.k8s.io/{version}\nkind: KubeSchedulerConfiguration\n"
    body = f"""\
        profiles:
        - schedulerName: koord-scheduler
          pluginConfig:
          - name: Reservation
            args:
              apiVersion: kubescheduler.config.k8s.io/{version}
              kind: ReservationArgs
              enablePreemption: true
        """
    config = load(body, header=header)
    assert config.api_version == f"kubescheduler.config.k8s.io/{version}"
    assert config.profiles[0].plugin_args == {"Reservation": {"enablePreemption": True}}
    assert config.profiles[0].plugins[EP.SCORE] == DEFAULTS[EP.SCORE]


def test_v1beta2_bind_addresses_are_accepted_and_ignored() -> None:
    header = "apiVersion: kubescheduler.config.k8s.io/v1beta2\nkind: KubeSchedulerConfiguration\n"
    config = load("healthzBindAddress: 0.0.0.0:10251\nmetricsBindAddress: 0.0.0.0:10251\n", header=header)
    assert config.profiles[0].scheduler_name == "koord-scheduler"
    with pytest.raises(ConfigError, match='unknown field "healthzBindAddress"'):
        load("healthzBindAddress: 0.0.0.0:10251\n")


def test_the_shipped_default_config_runs_the_default_set() -> None:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULTS, implements)
    assert [p.scheduler_name for p in config.profiles] == ["koord-scheduler"]
    assert config.profiles[0].plugins == {point: DEFAULTS.get(point, ()) for point in EP}
    assert config.leader_election.resource_namespace == "koordinator-system"


def test_loads_from_a_file_a_path_string_and_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "scheduler-config.yaml"
    path.write_text(HEADER + SCARCE_RESOURCE_AVOIDANCE)
    from_path = load_config(path, DEFAULTS, implements)
    from_str = load_config(str(path), DEFAULTS, implements)
    mapping: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {"schedulerName": "koord-scheduler", "plugins": {"score": {"disabled": [{"name": "*"}]}}}
        ],
    }
    from_mapping = load_config(mapping, DEFAULTS, implements)
    assert from_path == from_str
    assert score(from_path) == [("NodeResourcesFitPlus", 2), ("ScarceResourceAvoidance", 2)]
    assert score(from_mapping) == []


# ---- rejected configurations ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param("leaderElect: true\n", 'unknown field "leaderElect"', id="unknown-top-level-field"),
        pytest.param(
            "profiles:\n- schedulerName: a\n  pluginConfigs: []\n",
            'unknown field "profiles[0].pluginConfigs"',
            id="unknown-nested-field-as-in-the-v1.6-reservation-example",
        ),
        pytest.param(
            plugins("score", "enabled: [{name: Reservation, wieght: 2}]"),
            'unknown field "profiles[0].plugins.score.enabled[0].wieght"',
            id="unknown-field-in-a-plugin",
        ),
        pytest.param(
            "profiles:\n- schedulerName: koord-scheduler\n- schedulerName: koord-scheduler\n",
            "profiles[1].schedulerName: duplicate value 'koord-scheduler'",
            id="duplicate-scheduler-name",
        ),
        pytest.param(
            "profiles:\n- schedulerName: a\n- percentageOfNodesToScore: 10\n",
            "profiles[1].schedulerName: required",
            id="unnamed-profile-among-several",
        ),
        pytest.param(
            "parallelism: '16'\n", "parallelism: Input should be a valid integer", id="no-type-coercion"
        ),
        pytest.param("parallelism: 0\n", "parallelism: must be greater than 0", id="parallelism-zero"),
        pytest.param("percentageOfNodesToScore: 101\n", "percentageOfNodesToScore", id="percentage-over-100"),
        pytest.param(
            "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 2\n",
            "podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds",
            id="max-backoff-below-initial",
        ),
        pytest.param(
            "leaderElection:\n  leaseDuration: '15'\n",
            "leaderElection.leaseDuration",
            id="duration-without-unit",
        ),
        pytest.param(
            "leaderElection:\n  leaseDuration: 5s\n",
            "leaderElection.leaseDuration: must be greater than renewDeadline",
            id="lease-shorter-than-renew-deadline",
        ),
        pytest.param(
            "leaderElection:\n  resourceLock: endpoints\n",
            'leaderElection.resourceLock: must be "leases"',
            id="resource-lock-not-leases",
        ),
        pytest.param(
            "extenders: [{urlPrefix: 'http://x'}]\n",
            "extenders: scheduler extenders are not supported",
            id="extenders",
        ),
        pytest.param(
            plugin_config("[{name: Coscheduling, args: {kind: ReservationArgs}}]"),
            "profiles[0].pluginConfig[0].args.kind: must be 'CoschedulingArgs'",
            id="args-kind-mismatch",
        ),
        pytest.param(
            plugin_config("[{name: Coscheduling}, {name: Coscheduling}]"),
            "profiles[0].pluginConfig[1].name: duplicate config for plugin 'Coscheduling'",
            id="duplicate-plugin-config",
        ),
        pytest.param(
            plugin_config("[{name: Coscheduling, args: {apiVersion: v1}}]"),
            "profiles[0].pluginConfig[0].args.apiVersion: must be one of",
            id="args-api-version",
        ),
        pytest.param(
            plugins("filter", "enabled: [{name: NoSuchPlugin}]"),
            "profiles[0].plugins.filter.enabled[0]: unknown plugin 'NoSuchPlugin'",
            id="unknown-plugin",
        ),
        pytest.param(
            plugins("filter", "enabled: [{name: DefaultBinder}]"),
            "plugin 'DefaultBinder' does not implement filter",
            id="plugin-at-a-point-it-does-not-implement",
        ),
        pytest.param(
            plugins("multiPoint", "enabled: [{name: NoSuchPlugin}]"),
            "profiles[0].plugins.multiPoint.enabled[0]: unknown plugin 'NoSuchPlugin'",
            id="unknown-multiPoint-plugin",
        ),
        pytest.param(
            plugins("score", "enabled: [{name: NodeResourcesFitPlus}, {name: NodeResourcesFitPlus}]"),
            "profiles[0].plugins.score.enabled[1]: plugin 'NodeResourcesFitPlus' is listed twice",
            id="plugin-enabled-twice",
        ),
        pytest.param(
            plugins("score", "enabled: [{name: NodeResourcesFitPlus, weight: -1}]"),
            "profiles[0].plugins.score.enabled[0].weight: must not be negative",
            id="negative-weight",
        ),
        pytest.param(
            plugins("queueSort", "enabled: [{name: CustomSort}]"),
            "profiles[0].plugins.queueSort: exactly one plugin must be enabled, got 2",
            id="two-queue-sorts",
        ),
        pytest.param(
            plugins("bind", "disabled: [{name: '*'}]"),
            "profiles[0].plugins.bind: at least one plugin must be enabled, got 0",
            id="no-binder",
        ),
        pytest.param(
            "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    queueSort:\n"
            "      enabled: [{name: CustomSort}]\n      disabled: [{name: '*'}]\n",
            "profiles[1].plugins.queueSort: must be the same for all profiles",
            id="queue-sort-differs-between-profiles",
        ),
        pytest.param(
            "kind: KubeSchedulerConfiguration\nkind: X\n", "duplicate field 'kind'", id="duplicate-yaml-key"
        ),
    ],
)
def test_invalid_configurations_are_rejected_with_the_field_named(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(body)
    assert message in str(caught.value), str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "kind: KubeSchedulerConfiguration\nprofiles: []\n",
            "apiVersion: required field is missing",
            id="no-apiVersion",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1alpha1\nkind: KubeSchedulerConfiguration\n",
            "apiVersion: Input should be",
            id="unsupported-apiVersion",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: Policy\n",
            "kind: Input should be",
            id="wrong-kind",
        ),
        pytest.param("- a\n- b\n", "expected a mapping at the top level", id="not-a-mapping"),
        pytest.param("a: [\n", "not valid YAML", id="broken-yaml"),
    ],
)
def test_malformed_documents_are_rejected(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match="invalid KubeSchedulerConfiguration") as caught:
        load_config(text, DEFAULTS, implements)
    assert message in str(caught.value), str(caught.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        load("parallelism: 0\nprofiles:\n- schedulerName: a\n- schedulerName: a\n")
    assert len(caught.value.problems) == 2
    assert caught.value.problems[0].startswith("parallelism:")
    assert caught.value.problems[1].startswith("profiles[1].schedulerName:")


def test_a_file_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(HEADER + "bogus: 1\n")
    with pytest.raises(ConfigError, match=r"in .*bad\.yaml"):
        load_config(path, DEFAULTS, implements)


# ---- strict plugin names and args, against the real registry ----------------------------------


def load_real(body: str) -> SchedulerConfig:
    return load_config(HEADER + textwrap.dedent(body), DEFAULT_PLUGINS, DEFAULT_REGISTRY)


def problems_of(body: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_real(body)
    return caught.value.problems


ARGS_MODELS = [name for name in DEFAULT_REGISTRY.names() if DEFAULT_REGISTRY.get(name).args_model]


@pytest.mark.parametrize("plugin", ARGS_MODELS)
def test_every_args_model_rejects_an_unknown_field_naming_the_plugin(plugin: str) -> None:
    problems = problems_of(plugin_config(f"[{{name: {plugin}, args: {{noSuchField: 1}}}}]"))
    assert problems == [f'unknown field "profiles[0].pluginConfig[{plugin}].args.noSuchField"']


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            plugin_config("[{name: ElasticQuota, args: {hookPlugin: []}}]"),
            'unknown field "profiles[0].pluginConfig[ElasticQuota].args.hookPlugin"'
            ' (did you mean "hookPlugins"?)',
            id="typo-suggests-the-field",
        ),
        pytest.param(
            plugin_config(
                "[{name: NodeResourcesFit, args: {scoringStrategy: {resources: [{name: cpu, wieght: 2}]}}}]"
            ),
            'unknown field "profiles[0].pluginConfig[NodeResourcesFit].args.scoringStrategy.resources[0]'
            '.wieght" (did you mean "weight"?)',
            id="nested-in-a-list",
        ),
        pytest.param(
            plugin_config(
                "[{name: NodeResourcesFitPlus, args: {resources: {cpu: {type: MostAllocated, weigth: 1}}}}]"
            ),
            'unknown field "profiles[0].pluginConfig[NodeResourcesFitPlus].args.resources.cpu.weigth"'
            ' (did you mean "weight"?)',
            id="nested-in-a-map",
        ),
        pytest.param(
            plugin_config(
                "[{name: NodeAffinity, args: {addedAffinity: "
                "{requiredDuringSchedulingIgnoredDuringExecutions: {nodeSelectorTerms: []}}}}]"
            ),
            'unknown field "profiles[0].pluginConfig[NodeAffinity].args.addedAffinity'
            '.requiredDuringSchedulingIgnoredDuringExecutions"'
            ' (did you mean "requiredDuringSchedulingIgnoredDuringExecution"?)',
            id="nested-in-an-api-type-that-reads-leniently",
        ),
        pytest.param(
            plugin_config(
                "[{name: NodeAffinity, args: {addedAffinity: {"
                "preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: "
                "{matchExpressions: [{key: a, operator: In, valeus: [b]}]}}]}}}]"
            ),
            '.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].valeus"'
            ' (did you mean "values"?)',
            id="deep-in-an-api-type",
        ),
        pytest.param(
            plugin_config("[{name: Coscheduling, args: {enablePreemtion: true}}]"),
            '(did you mean "enablePreemption"?)',
            id="coscheduling-typo",
        ),
        pytest.param(
            "leaderElection: {leaderElekt: false}\n",
            'unknown field "leaderElection.leaderElekt" (did you mean "leaderElect"?)',
            id="typo-outside-plugin-args",
        ),
        pytest.param(
            plugin_config("[{name: PrioritySort, args: {foo: 1}}]"),
            "profiles[0].pluginConfig[PrioritySort].args: plugin 'PrioritySort' takes no arguments",
            id="args-for-a-plugin-without-args",
        ),
        pytest.param(
            plugin_config("[{name: Coscheduling, args: {defaultTimeout: -1s}}]"),
            "profiles[0].pluginConfig[Coscheduling].args.defaultTimeout: must be >= 0",
            id="invalid-value",
        ),
        pytest.param(
            plugin_config("[{name: ScarceResourceAvoidance, args: {resources: gpu}}]"),
            "profiles[0].pluginConfig[ScarceResourceAvoidance].args.resources: Input should be a valid list",
            id="wrong-type",
        ),
    ],
)
def test_plugin_args_are_checked_at_load_with_the_plugin_and_field_named(body: str, message: str) -> None:
    problems = problems_of(body)
    assert any(message in p for p in problems), problems


def test_args_of_a_plugin_the_profile_does_not_enable_are_checked_too() -> None:
    problems = problems_of(plugin_config("[{name: ScarceResourceAvoidance, args: {resource: [gpu]}}]"))
    assert problems == [
        'unknown field "profiles[0].pluginConfig[ScarceResourceAvoidance].args.resource"'
        ' (did you mean "resources"?)'
    ]


NOT_SUPPORTED_ARGS = [
    pytest.param("Coscheduling", "controllerWorkers", "4", "1", id="coscheduling-controllerWorkers"),
    pytest.param("Coscheduling", "skipCheckScheduleCycle", "true", "false", id="coscheduling-skipCheck"),
    pytest.param("ElasticQuota", "enableQueueHint", "true", "false", id="elasticquota-enableQueueHint"),
    pytest.param(
        "ElasticQuota",
        "quotaSnapshotUpdateInterval",
        "60s",
        "2m",
        id="elasticquota-quotaSnapshotUpdateInterval",
    ),
    pytest.param(
        "ElasticQuota",
        "disableDefaultQuotaPreemption",
        "false",
        "true",
        id="elasticquota-disableDefaultQuotaPreemption",
    ),
    pytest.param(
        "Reservation", "minCandidateNodesPercentage", "50", "10", id="reservation-minCandidateNodesPercentage"
    ),
    pytest.param(
        "Reservation", "minCandidateNodesAbsolute", "10", "100", id="reservation-minCandidateNodesAbsolute"
    ),
    pytest.param("Reservation", "controllerWorkers", "4", "1", id="reservation-controllerWorkers"),
    pytest.param("Reservation", "resyncIntervalSeconds", "30", "60", id="reservation-resyncIntervalSeconds"),
]


@pytest.mark.parametrize(("plugin", "field", "value", "default"), NOT_SUPPORTED_ARGS)
def test_a_koordinator_argument_not_implemented_is_not_supported_yet(
    plugin: str, field: str, value: str, default: str
) -> None:
    problems = problems_of(plugin_config(f"[{{name: {plugin}, args: {{{field}: {value}}}}}]"))
    assert len(problems) == 1, problems
    assert problems[0].startswith(
        f"profiles[0].pluginConfig[{plugin}].args.{field}: not supported yet by koord-scheduler: only "
    ), problems
    assert "(Koordinator's default) is accepted" in problems[0]


@pytest.mark.parametrize(("plugin", "field", "value", "default"), NOT_SUPPORTED_ARGS)
def test_a_koordinator_argument_not_implemented_is_accepted_at_its_default(
    plugin: str, field: str, value: str, default: str
) -> None:
    config = load_real(plugin_config(f"[{{name: {plugin}, args: {{{field}: {default}}}}}]"))
    assert field in config.profiles[0].plugin_args[plugin]


KNOWN = ", ".join(DEFAULT_REGISTRY.names())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            plugins("filter", "enabled: [{name: NodeAfinity}]"),
            "profiles[0].plugins.filter.enabled[0]: unknown plugin 'NodeAfinity' (did you mean "
            f"'NodeAffinity'?); the plugins koord-scheduler has: {KNOWN}",
            id="enabled-typo",
        ),
        pytest.param(
            plugins("multiPoint", "enabled: [{name: Nope}]"),
            f"profiles[0].plugins.multiPoint.enabled[0]: unknown plugin 'Nope'; the plugins koord-scheduler "
            f"has: {KNOWN}",
            id="multiPoint-unknown",
        ),
        pytest.param(
            plugin_config("[{name: Cosheduling, args: {enablePreemption: true}}]"),
            "profiles[0].pluginConfig[0].name: unknown plugin 'Cosheduling' (did you mean 'Coscheduling'?);"
            f" the plugins koord-scheduler has: {KNOWN}",
            id="pluginConfig-typo",
        ),
    ],
)
def test_an_unknown_plugin_name_lists_the_known_ones(body: str, message: str) -> None:
    assert problems_of(body) == [message]


@pytest.mark.parametrize(
    ("name", "origin"),
    [
        pytest.param("SchedulingHint", "Koordinator", id="SchedulingHint"),
        pytest.param("DefaultPreBind", "Koordinator", id="DefaultPreBind"),
        pytest.param("DefaultPreemption", "kube-scheduler", id="DefaultPreemption"),
    ],
)
@pytest.mark.parametrize(
    ("section", "where"),
    [
        pytest.param("plugins", "profiles[0].plugins.multiPoint.enabled[0]", id="in-plugins"),
        pytest.param("pluginConfig", "profiles[0].pluginConfig[0].name", id="in-pluginConfig"),
    ],
)
def test_a_plugin_a_registry_lacks_is_not_supported_yet_rather_than_unknown(
    name: str, origin: str, section: str, where: str
) -> None:
    """koord-scheduler registers every plugin of the catalog now; a registry without one (a build
    that leaves a plugin out) still calls it known and missing, not a typo."""
    registry = Registry(spec for spec in DEFAULT_REGISTRY.specs() if spec.name != name)
    body = (
        plugins("multiPoint", f"enabled: [{{name: {name}}}]")
        if section == "plugins"
        else plugin_config(f"[{{name: {name}, args: {{}}}}]")
    )
    with pytest.raises(ConfigError) as caught:
        load_config(HEADER + textwrap.dedent(body), DEFAULT_PLUGINS, registry)
    assert caught.value.problems == [
        f"{where}: plugin {name!r} is a {origin} plugin that koord-scheduler does not support yet;"
        f" the plugins koord-scheduler has: {', '.join(registry.names())}"
    ]


def test_device_share_args_are_configured_by_koordinator_names() -> None:
    config = load_real(
        """
        profiles:
        - schedulerName: koord-scheduler
          pluginConfig:
          - name: DeviceShare
            args:
              scoringStrategy: {type: LeastAllocated}
        """
    )
    assert config.profile("koord-scheduler").plugin_args["DeviceShare"] == {
        "scoringStrategy": {"type": "LeastAllocated"}
    }
    assert problems_of(plugin_config("[{name: DeviceShare, args: {scoringStrategy: {type: Balanced}}}]")), (
        "an unknown scoring type is rejected"
    )


def test_the_shipped_default_config_passes_the_strict_checks() -> None:
    config = load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    assert config.profile("koord-scheduler").plugins == {
        point: DEFAULT_PLUGINS.get(point, ()) for point in EP
    }


def test_koord_scheduler_reports_an_invalid_config_and_exits_2_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(koord_scheduler, "configure_logging", lambda verbosity: None)
    path = tmp_path / "config.yaml"
    path.write_text(HEADER + plugin_config("[{name: ElasticQuota, args: {hookPlugin: []}}]"))
    assert koord_scheduler.main(["--config", str(path)]) == koord_scheduler.EXIT_INVALID_CONFIG == 2
    err = capsys.readouterr().err
    assert err.startswith(f"koord-scheduler: invalid KubeSchedulerConfiguration in {path}:\n")
    assert '(did you mean "hookPlugins"?)' in err
    assert "Traceback" not in err


def test_koord_scheduler_takes_koordinators_feature_gates_to_every_plugin() -> None:
    args = koord_scheduler.parse_args(["--feature-gates", "ElasticQuotaIgnorePodOverhead=true"])
    settings = koord_scheduler.settings_of(
        load_config(DEFAULT_CONFIG_YAML, DEFAULT_PLUGINS, DEFAULT_REGISTRY), args.feature_gates
    )
    assert settings.feature_gates.elastic_quota_ignore_pod_overhead
    assert not settings.feature_gates.disable_default_quota


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        ("NoSuchGate=true", "unrecognized feature gate: 'NoSuchGate'"),
        ("DisableDefaultQuota=yes please", "invalid value of 'DisableDefaultQuota'='yes please'"),
    ],
)
def test_a_feature_gate_koord_scheduler_cannot_honour_stops_it_at_start(
    gates: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        koord_scheduler.main(["--feature-gates", gates])
    assert exited.value.code == koord_scheduler.EXIT_INVALID_CONFIG
    assert message in capsys.readouterr().err


def test_koordinators_scheduler_configuration_logs_no_info_line_per_re_enabled_plugin(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Koordinator's config/manager/scheduler-config.yaml (tests/data, verbatim) loads, and
    re-enabling default plugins at two dozen extension points logs no INFO line each (at most one
    DEBUG line)."""
    path = Path(__file__).parent.parent / "data" / "koordinator_scheduler_config.yaml"
    with caplog.at_level(logging.DEBUG):
        config = load_config(path, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    assert config.profile("koord-scheduler")
    overriding = [record for record in caplog.records if "overriding" in record.getMessage()]
    assert [record.levelno for record in overriding] in ([], [logging.DEBUG])
    assert not [record for record in caplog.records if record.levelno == logging.INFO]


KOORDINATOR_SHIPPED = Path(__file__).parent.parent / "data" / "koordinator_scheduler_config.yaml"


@pytest.mark.parametrize(
    ("point", "koordinators"),
    [
        pytest.param(
            EP.PRE_FILTER,
            [
                "SchedulingHint",
                "Reservation",
                "NodeNUMAResource",
                "DeviceShare",
                "Coscheduling",
                "ElasticQuota",
            ],
            id="preFilter",
        ),
        pytest.param(
            EP.POST_FILTER,
            ["Reservation", "Coscheduling", "ElasticQuota", "DefaultPreemption"],
            id="postFilter",
        ),
        pytest.param(EP.PRE_SCORE, ["Reservation", "Coscheduling"], id="preScore"),
        pytest.param(
            EP.PRE_BIND,
            ["NodeNUMAResource", "DeviceShare", "Reservation", "Coscheduling", "DefaultPreBind"],
            id="preBind",
        ),
        pytest.param(EP.BIND, ["Reservation", "DefaultBinder"], id="bind"),
    ],
)
def test_koordinators_shipped_configuration_enables_what_it_names(point: EP, koordinators: list[str]) -> None:
    """Every plugin the shipped profile enables at a point runs there, beside the default ones it
    keeps (``*`` disabled at postFilter and bind: exactly Koordinator's list there)."""
    config = load_config(KOORDINATOR_SHIPPED, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    enabled = names(config, point)
    assert set(koordinators) <= set(enabled)
    if point in (EP.POST_FILTER, EP.BIND):
        assert enabled == koordinators


def test_koordinators_shipped_configuration_scores_with_its_weights() -> None:
    config = load_config(KOORDINATOR_SHIPPED, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    weights = {ref.name: ref.weight for ref in config.profiles[0].plugins[EP.SCORE]}
    assert {name: weights[name] for name in ("LoadAwareScheduling", "Reservation", "Coscheduling")} == {
        "LoadAwareScheduling": 1,
        "Reservation": 5000,
        "Coscheduling": 1,
    }


def test_koordinators_shipped_configuration_builds_every_plugin() -> None:
    """The profile's plugins are built (a plugin enabled at a point it lacks would raise here)."""
    from scheduler.backend.memory import MemoryBackend
    from scheduler.cache.cache import Cache
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.handle import Handle
    from scheduler.framework.runtime import Framework

    config = load_config(KOORDINATOR_SHIPPED, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    cache = Cache()
    framework = Framework(
        config.profiles[0],
        DEFAULT_REGISTRY,
        Handle(backend=MemoryBackend(), snapshot=lambda: Snapshot(cache)),
    )
    assert {"SchedulingHint", "DefaultPreemption", "DefaultPreBind"} <= set(framework.plugins)


def test_no_kubeconfig_anywhere_means_in_cluster_credentials() -> None:
    """The chart runs koord-scheduler with neither --kubeconfig nor clientConnection.kubeconfig:
    that is the in-cluster service account, never the directory ``.``."""
    from scheduler.__main__ import kubeconfig_of, load, parse_args

    args = parse_args([])
    assert kubeconfig_of(args, load(args).client_connection) is None
    args = parse_args(["--kubeconfig", "/k"])
    assert kubeconfig_of(args, load(args).client_connection) == Path("/k")
