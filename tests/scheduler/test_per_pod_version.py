from scheduler.cache.per_pod_version import PerPodVersion
from scheduler.cache.pod_info import PodInfo
from tests.scheduler.builders import make_pod


def _counting() -> tuple[PerPodVersion[str], list[str]]:
    asked: list[str] = []

    def compute(pod: PodInfo) -> str:
        asked.append(pod.key)
        return f"{pod.key}:{pod.labels.get('v', '')}"

    return PerPodVersion(compute, size=2), asked


def test_a_pod_version_is_computed_once_whichever_podinfo_holds_it() -> None:
    of, asked = _counting()
    pod = make_pod("a").label("v", "1").obj()
    assert of(PodInfo.of(pod)) == "default/a:1"
    assert of(PodInfo.of(pod)) == "default/a:1"
    assert asked == ["default/a"]


def test_a_new_version_of_the_pod_is_computed_again() -> None:
    of, asked = _counting()
    assert of(make_pod("a").label("v", "1").info()) == "default/a:1"
    assert of(make_pod("a").label("v", "2").info()) == "default/a:2"
    assert asked == ["default/a", "default/a"]


def test_the_oldest_versions_are_forgotten_beyond_the_size() -> None:
    of, asked = _counting()
    pods = [make_pod(name).info() for name in ("a", "b", "c")]
    for pod in pods:
        of(pod)
    of(pods[2])
    of(pods[0])
    assert asked == ["default/a", "default/b", "default/c", "default/a"]
