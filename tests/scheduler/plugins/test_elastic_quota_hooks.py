"""Quota hook plugins (``ElasticQuotaArgs.hookPlugins``): loaded from the registry or from an
installed entry point of ``koordinator_py.quota_hooks``, each hook called, and its result honoured
by the ElasticQuota plugin; an unknown factory stops the configuration from loading."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import ValidationError

from apis.client.backend import ELASTICQUOTAS, PODS, EventType, WatchEvent
from apis.scheduling.elasticquota import ElasticQuota as ElasticQuotaObject
from scheduler.cache.pod_info import PodInfo
from scheduler.config import ConfigError, load_config
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.status import Code
from scheduler.plugins import DEFAULT_PLUGINS, DEFAULT_REGISTRY
from scheduler.plugins.elastic_quota import ElasticQuotaArgs, hooks
from tests.scheduler.plugins.test_elastic_quota import World, pod, quota
from tests.scheduler.test_config import HEADER


class Recorder(hooks.QuotaHook):
    """The sample hook: records every call; caps quotas whose name its args list at 1 cpu (through
    ``replace_quotas`` and ``on_quota_update``), and refuses pods labelled ``hook/refuse``."""

    calls: list[tuple[str, ...]] = []

    def _capped(self, q: ElasticQuotaObject) -> ElasticQuotaObject:
        if (q.metadata.name or "") not in self.args.split(","):
            return q
        capped = q.model_copy(deep=True)
        assert capped.spec is not None
        capped.spec.max = {**(capped.spec.max or {}), "cpu": "1"}  # type: ignore[dict-item]
        return ElasticQuotaObject.model_validate(capped.to_wire())

    def replace_quotas(self, quotas: Sequence[ElasticQuotaObject]) -> Sequence[ElasticQuotaObject] | None:
        self.calls.append(("replace_quotas", *sorted(q.metadata.name or "" for q in quotas)))
        return [self._capped(q) for q in quotas]

    def on_quota_update(
        self, old: ElasticQuotaObject | None, new: ElasticQuotaObject | None
    ) -> ElasticQuotaObject | None:
        name = (new or old).metadata.name or ""  # type: ignore[union-attr]
        self.calls.append(("on_quota_update", name, "old" if old else "-", "new" if new else "-"))
        return self._capped(new) if new is not None else None

    def on_pod_updated(self, quota: str, old: PodInfo | None, new: PodInfo | None) -> None:
        self.calls.append(("on_pod_updated", quota, old.name if old else "-", new.name if new else "-"))

    def check_pod(self, quota: str, pod: PodInfo) -> str | None:
        self.calls.append(("check_pod", quota, pod.name))
        return "refused by the sample hook" if pod.labels.get("hook/refuse") else None


@pytest.fixture(autouse=True)
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test registers its sample hooks into a registry of its own."""
    monkeypatch.setattr(hooks, "_factories", {})


@pytest.fixture
def recorder() -> type[Recorder]:
    hooks.register_factory("sample-recorder", Recorder)
    Recorder.calls = []
    return Recorder


def last_call(recorder: type[Recorder]) -> tuple[str, ...]:
    return recorder.calls[-1]


def world_with(factory_key: str, args: str = "") -> World:
    conf = {"key": "rec", "factoryKey": factory_key, "factoryArgs": args}
    return World(args=ElasticQuotaArgs.model_validate({"hookPlugins": [conf]}))


def test_each_hook_is_called_and_its_result_honoured(recorder: type[Recorder]) -> None:
    world = world_with("sample-recorder", "capped")
    assert recorder.calls == [("replace_quotas",)]  # the quota informer's first (empty) list
    world.feed(
        ELASTICQUOTAS, WatchEvent(EventType.REPLACED, objects=(quota("capped", "capped", max={"cpu": "8"}),))
    )
    assert last_call(recorder) == ("replace_quotas", "capped")
    assert world.plugin.quota_figures()["capped"].max == {"cpu": 1000}  # the replacement is used

    world.quotas(quota("open", "open", max={"cpu": "8"}), quota("capped", "capped", max={"cpu": "8"}))
    assert recorder.calls[-2:] == [
        ("on_quota_update", "open", "-", "new"),
        ("on_quota_update", "capped", "old", "new"),
    ]
    assert world.plugin.quota_figures()["capped"].max == {"cpu": 1000}

    code, message, _ = world.pre_filter(world.pod(pod("big", "2", "capped").obj()))
    assert code == Code.UNSCHEDULABLE
    assert message.startswith("Insufficient quotas: quota capped cpu used 0 + request 2 > runtime 1")

    small = world.pod(pod("small", "1", "open").obj())
    assert world.pre_filter(small)[0] == Code.SUCCESS
    assert last_call(recorder) == ("check_pod", "open", "small")
    refused = world.pod(pod("refused", "1", "open", **{"hook/refuse": "yes"}).obj())
    code, message, _ = world.pre_filter(refused)
    assert code == Code.UNSCHEDULABLE
    assert message == "quota open: refused by the sample hook (quota hook rec)"

    recorder.calls.clear()
    world.plugin.reserve(CycleState(), small, "n1")
    world.plugin.unreserve(CycleState(), small, "n1")
    world.pod(pod("small", "1", "open").on("n1").obj())  # seen bound
    world.feed(PODS, WatchEvent(EventType.DELETED, obj=pod("small", "1", "open").on("n1").obj()))
    world.feed(PODS, WatchEvent(EventType.MODIFIED, obj=pod("big", "2", "capped").obj()))  # pending: not told
    assert recorder.calls == [
        ("on_pod_updated", "open", "-", "small"),  # reserved
        ("on_pod_updated", "open", "small", "-"),  # unreserved
        ("on_pod_updated", "open", "-", "small"),  # bound
        ("on_pod_updated", "open", "small", "-"),  # deleted
    ]

    bound = pod("again", "1", "open").on("n1").obj()
    world.feed(PODS, WatchEvent(EventType.REPLACED, objects=(bound,)))  # a re-list
    world.feed(PODS, WatchEvent(EventType.REPLACED, objects=()))
    assert recorder.calls[-2:] == [
        ("on_pod_updated", "open", "-", "again"),
        ("on_pod_updated", "open", "again", "-"),
    ]

    world.feed(ELASTICQUOTAS, WatchEvent(EventType.DELETED, obj=quota("open", "open", max={"cpu": "8"})))
    assert last_call(recorder) == ("on_quota_update", "open", "old", "-")


class Broken(hooks.QuotaHook):
    def check_pod(self, quota: str, pod: PodInfo) -> str | None:
        raise RuntimeError("bug in a hook")


def test_a_hook_that_raises_is_logged_and_changes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    hooks.register_factory("sample-broken", Broken)
    world = world_with("sample-broken")
    world.quotas(quota("q", "q", max={"cpu": "8"}))
    assert world.pre_filter(world.pod(pod("p", "1", "q").obj()))[0] == Code.SUCCESS
    assert "quota hook rec failed in check_pod" in caplog.text


def test_a_hook_installed_as_an_entry_point_is_loaded_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A package declaring ``[project.entry-points."koordinator_py.quota_hooks"]`` (its installed
    dist-info's entry_points.txt), found on sys.path."""
    (tmp_path / "sample_quota_hook.py").write_text(
        "from scheduler.plugins.elastic_quota.hooks import QuotaHook\n\n"
        "class NoSmallPods(QuotaHook):\n"
        "    def check_pod(self, quota, pod):\n"
        "        return 'pods below 1 cpu are refused' if pod.requests.get('cpu', 0) < 1000 else None\n"
    )
    dist = tmp_path / "sample_quota_hook-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sample-quota-hook\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        f"[{hooks.ENTRY_POINT_GROUP}]\nno-small-pods = sample_quota_hook:NoSmallPods\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    world = world_with("no-small-pods")
    world.quotas(quota("q", "q", max={"cpu": "8"}))
    code, message, _ = world.pre_filter(world.pod(pod("tiny", "500m", "q").obj()))
    assert (code, message) == (Code.UNSCHEDULABLE, "quota q: pods below 1 cpu are refused (quota hook rec)")
    assert world.pre_filter(world.pod(pod("fine", "1", "q").obj()))[0] == Code.SUCCESS


def test_an_unknown_hook_factory_stops_the_configuration_from_loading() -> None:
    body = (
        "profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: ElasticQuota\n"
        "    args: {hookPlugins: [{key: limits, factoryKey: no-such-hook}]}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config(HEADER + body, DEFAULT_PLUGINS, DEFAULT_REGISTRY)
    assert caught.value.problems == [
        "profiles[0].pluginConfig[ElasticQuota].args.hookPlugins: [0] limits: factory no-such-hook not "
        "found (neither registered nor an installed entry point of the group koordinator_py.quota_hooks) "
        "(got [{'key': 'limits', 'factoryKey': 'no-such-hook'}])"
    ]


@pytest.mark.parametrize(
    ("entries", "problem"),
    [
        ([{"key": "", "factoryKey": "sample-recorder"}], "[0]: key is empty"),
        ([{"key": "a", "factoryKey": ""}], "[0] a: factoryKey is empty"),
        (
            [{"key": "a", "factoryKey": "sample-recorder"}, {"key": "a", "factoryKey": "sample-recorder"}],
            "[1]: key a is used twice",
        ),
    ],
    ids=["empty-key", "empty-factory-key", "duplicate-key"],
)
def test_hook_entries_need_a_unique_key_and_a_factory_key(
    recorder: type[Recorder], entries: list[dict[str, str]], problem: str
) -> None:
    with pytest.raises(ValidationError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        ElasticQuotaArgs.model_validate({"hookPlugins": entries})
