"""The system and default quotas stay outside the sharing; PreFilter decides their pods from the
ledger's sums in place (``QuotaChecks.fits_outside``) and builds the figures only to word a
rejection: the decision must be the one the figures' checks give, whatever the quota's min and
max, the pods charged (pending or on a node, preemptible or not) and the job admitted."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from apis.extension import quota as quota_ext
from scheduler.cache.pod_info import PodInfo
from scheduler.plugins.elastic_quota import ElasticQuotaArgs
from scheduler.plugins.elastic_quota.checks import QuotaChecks, spec_figures
from scheduler.plugins.elastic_quota.ledger import Ledger
from scheduler.quota import QuotaSpec
from tests.scheduler.builders import make_pod

QUOTA = "koordinator-default-quota"
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")

limits = st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 12))
requests = st.dictionaries(st.sampled_from(RESOURCES), st.integers(0, 6))
pods = st.tuples(requests, st.booleans(), st.booleans())
"""A pod's requests, whether it is on a node and whether it is preemptible."""


def _pod(name: str, asked: dict[str, int], on_node: bool, preemptible: bool) -> PodInfo:
    built = make_pod(name).req({k: str(v) for k, v in asked.items()})
    if not preemptible:
        built = built.label(quota_ext.LABEL_PREEMPTIBLE, "false")
    if on_node:
        built = built.on("n1")
    return built.info()


@settings(max_examples=300, deadline=None)
@given(
    minimum=limits,
    maximum=limits,
    charged=st.lists(pods, max_size=6),
    admitted=st.lists(pods, min_size=1, max_size=3),
    runtime=st.booleans(),
)
def test_fits_outside_decides_as_the_figures_do(
    minimum: dict[str, int],
    maximum: dict[str, int],
    charged: list[tuple[dict[str, int], bool, bool]],
    admitted: list[tuple[dict[str, int], bool, bool]],
    runtime: bool,
) -> None:
    ledger = Ledger("default-scheduler")
    for i, (asked, on_node, preemptible) in enumerate(charged):
        ledger.on_pod(_pod(f"c{i}", asked, on_node, preemptible), QUOTA)
    job = [_pod(f"a{i}", asked, False, preemptible) for i, (asked, _, preemptible) in enumerate(admitted)]
    spec = QuotaSpec(QUOTA, quota_ext.ROOT_QUOTA_NAME, min=minimum, max=maximum, shared_weight=maximum)
    checks = QuotaChecks(ElasticQuotaArgs.model_validate({"enableRuntimeQuota": runtime}), ledger)
    figures = spec_figures(spec, ledger.usage_of(QUOTA))
    assert checks.fits_outside(QUOTA, spec, job) == (checks.check_figures(figures, job, parents=()) is None)
