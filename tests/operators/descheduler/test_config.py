"""DeschedulerConfiguration: Koordinator's defaults, plugin merge rules, and start-up errors that
name the field."""

from __future__ import annotations

from datetime import timedelta

import pytest

from apis.errors import MESSAGE_LIMIT
from operators.descheduler.__main__ import main
from operators.descheduler.config import ConfigError, MigrationControllerArgs, PluginSet, load, merge, resolve
from operators.descheduler.registry import args_models

MODELS = args_models()
MC_ARGS = "profiles:\n- pluginConfig:\n  - name: MigrationController\n    args: "


def test_defaults_are_koordinators() -> None:
    config = load("apiVersion: descheduler/v1alpha2\nkind: DeschedulerConfiguration\n")
    assert config.interval == timedelta(0)  # no default: one round
    assert config.dry_run is False
    assert config.max_no_of_pods_to_evict_total is None
    assert config.leader_election.resource_name == "koord-descheduler"
    assert config.leader_election.resource_namespace == "koordinator-system"
    assert (config.client_connection.qps, config.client_connection.burst) == (50, 100)
    [profile] = resolve(config, MODELS)
    assert profile.name == "koord-descheduler"
    assert (profile.evict, profile.filter, profile.balance, profile.deschedule) == (
        ["MigrationController"],
        ["MigrationController"],
        [],
        [],
    )
    args = profile.args["MigrationController"]
    assert isinstance(args, MigrationControllerArgs)
    assert args.default_job_mode == "ReservationFirst"
    assert args.job_ttl == timedelta(minutes=5)
    assert (args.evict_qps, args.evict_burst) == (10, 1)
    assert args.max_migrating_per_node == 2
    assert args.max_migrating_per_workload is None
    assert args.max_unavailable_per_workload is None
    assert args.eviction_policy == "Eviction"
    assert args.scheduler_names == ["koord-scheduler"]
    assert set(args.object_limiters) == {"workload"}
    assert args.object_limiters["workload"].duration == "5m"
    assert args.arbitration_interval == timedelta(milliseconds=500)


def test_plugin_config_sets_args_and_keeps_the_other_defaults() -> None:
    config = load(
        """
deschedulingInterval: 10s
profiles:
- name: p
  pluginConfig:
  - name: MigrationController
    args: {evictAllBarePods: true, maxMigratingGlobally: 4, namespaces: {exclude: [kube-system]},
           defaultJobTTL: 10m, evictQPS: 2.5}
"""
    )
    assert config.interval == timedelta(seconds=10)
    args = resolve(config, MODELS)[0].args["MigrationController"]
    assert isinstance(args, MigrationControllerArgs)
    assert args.evict_all_bare_pods
    assert args.max_migrating_globally == 4
    assert args.namespaces is not None
    assert args.namespaces.exclude == ["kube-system"]
    assert args.max_migrating_per_node == 2
    assert args.job_ttl == timedelta(minutes=10)
    assert args.evict_qps == 2.5


@pytest.mark.parametrize(
    ("defaults", "enabled", "disabled", "expected"),
    [
        (["A", "B"], [], [], ["A", "B"]),
        (["A", "B"], ["C"], [], ["A", "B", "C"]),  # appended
        (["A", "B"], ["A"], [], ["A", "B"]),  # a default's name replaces it in place
        (["A", "B"], ["C"], ["*"], ["C"]),  # * drops the defaults
        (["A", "B"], [], ["A"], ["B"]),
    ],
)
def test_merge_rules(
    defaults: list[str], enabled: list[str], disabled: list[str], expected: list[str]
) -> None:
    custom = PluginSet.model_validate(
        {"enabled": [{"name": n} for n in enabled], "disabled": [{"name": n} for n in disabled]}
    )
    assert merge(defaults, custom) == expected


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "profiles:\n- plugins:\n    balance:\n      enabled: [{name: LowNodeLoadd}]\n",
            "profiles[0].plugins.balance: unknown plugin 'LowNodeLoadd'",
        ),
        (
            "profiles:\n- plugins:\n    balance:\n      enabled: [{name: MigrationController}]\n",
            "profiles[0].plugins.balance: MigrationController is not a balance plugin",
        ),
        (
            MC_ARGS + "{evictQPS: 0}\n",
            "profiles[0].pluginConfig[0].args.evictQPS",
        ),
        (
            MC_ARGS + "{maxUnavailablePerWorkload: ten}\n",
            "profiles[0].pluginConfig[0].args.maxUnavailablePerWorkload",
        ),
        (
            MC_ARGS + "{defaultJobTTL: 5 minutes}\n",
            "profiles[0].pluginConfig[0].args.defaultJobTTL: Value error",
        ),
        (
            MC_ARGS + "{namespaces: {include: [a], exclude: [b]}}\n",
            "only one of include and exclude",
        ),
        (
            MC_ARGS + "{evictionPolicy: Kill}\n",
            "profiles[0].pluginConfig[0].args.evictionPolicy",
        ),
        ("profiles:\n- name: a\n- {}\n", "profiles[1].name: required"),
        ("dryrun: true\n", "dryrun: Extra inputs are not permitted"),
    ],
)
def test_an_invalid_configuration_names_the_field(yaml_text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=None) as caught:
        resolve(load(yaml_text), MODELS)
    assert message in str(caught.value)


def test_the_process_refuses_to_start_on_an_invalid_configuration(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"  # type: ignore[operator]
    path.write_text("profiles:\n- plugins:\n    balance:\n      enabled: [{name: Nope}]\n")
    assert main(["--config", str(path)]) == 2
    assert "profiles[0].plugins.balance: unknown plugin 'Nope'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 10_000 + "]" * 10_000, "nested deeper than"),
        ("profiles: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n", "nested deeper than"),
        ("profiles: [\n", "not valid YAML"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            ),
            "aliases are expanded",
        ),
        ("a: \ud800\n", "not UTF-8"),
    ],
)
def test_hostile_yaml_is_a_clear_start_up_error(
    text: str, message: str, tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=message):
        load(text)
    if text.isascii():
        path = tmp_path / "config.yaml"  # type: ignore[operator]
        path.write_text(text)
        assert main(["--config", str(path)]) == 2
        err = capsys.readouterr().err
        assert message in err
        assert len(err) <= 2 * MESSAGE_LIMIT


def test_a_configuration_with_5000_problems_gives_a_bounded_error() -> None:
    text = "profiles:\n" + "- {name: a, bogus: 1}\n" * 5_000
    with pytest.raises(ConfigError) as caught:
        load(text)
    assert len(str(caught.value)) <= 2 * MESSAGE_LIMIT
    assert str(caught.value).endswith(" more problems")
