import gc

from scheduler.cache.per_pod_version import PerPodVersion
from scheduler.cache.pod_info import PodInfo
from tests.scheduler.builders import make_pod


def _counting() -> tuple[PerPodVersion[str], list[str]]:
    asked: list[str] = []

    def compute(pod: PodInfo) -> str:
        asked.append(pod.key)
        return f"{pod.key}:{pod.labels.get('v', '')}"

    return PerPodVersion(compute), asked


def test_a_pod_version_is_computed_once_whichever_podinfo_holds_it() -> None:
    of, asked = _counting()
    pod = make_pod("a").label("v", "1").obj()
    assert of(PodInfo.of(pod)) == "default/a:1"
    assert of(PodInfo.of(pod)) == "default/a:1"
    assert asked == ["default/a"]


def test_a_new_version_of_the_pod_is_computed_again() -> None:
    of, asked = _counting()
    first = make_pod("a").label("v", "1").info()
    second = make_pod("a").label("v", "2").info()
    assert of(first) == "default/a:1"
    assert of(second) == "default/a:2"
    assert asked == ["default/a", "default/a"]


def test_an_entry_goes_with_its_pod_version() -> None:
    of, _ = _counting()
    kept = make_pod("kept").info()
    of(kept)
    of(make_pod("gone").info())
    gc.collect()
    assert len(of) == 1
    assert of(kept) == "default/kept:"
