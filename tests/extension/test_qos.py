from __future__ import annotations

import pytest

from apis.extension import qos


@pytest.mark.parametrize(
    ("labels", "kubernetes_qos", "expected"),
    [
        pytest.param({"koordinator.sh/qosClass": "LSE"}, "Burstable", "LSE", id="label-lse"),
        pytest.param({"koordinator.sh/qosClass": "LSR"}, None, "LSR", id="label-lsr"),
        pytest.param({"koordinator.sh/qosClass": "LS"}, "Guaranteed", "LS", id="label-wins"),
        pytest.param({"koordinator.sh/qosClass": "BE"}, None, "BE", id="label-be"),
        pytest.param({"koordinator.sh/qosClass": "SYSTEM"}, None, "SYSTEM", id="label-system"),
        pytest.param({}, "Guaranteed", "LSR", id="guaranteed"),
        pytest.param({}, "Burstable", "LS", id="burstable"),
        pytest.param({}, "BestEffort", "BE", id="besteffort"),
        pytest.param(None, None, "", id="nothing"),
        pytest.param({"koordinator.sh/qosClass": "be"}, "Burstable", "LS", id="lowercase-label-ignored"),
        pytest.param({"koordinator.sh/qosClass": "Gold"}, "BestEffort", "BE", id="unknown-label-ignored"),
        pytest.param({"koordinator.sh/qosClass": ""}, None, "", id="empty-label"),
    ],
)
def test_qos_class_of(labels: dict[str, str] | None, kubernetes_qos: str | None, expected: str) -> None:
    assert qos.qos_class_of(labels, kubernetes_qos) == expected


def test_constants() -> None:
    assert qos.LABEL_POD_QOS == "koordinator.sh/qosClass"
    assert set(qos.QOS_CLASSES) == {"LSE", "LSR", "LS", "BE", "SYSTEM"}
    assert qos.qos_class_by_name("LSR") == "LSR"
    assert qos.qos_class_by_name(None) == ""
    assert qos.qos_class_from_labels({"koordinator.sh/qosClass": "LS"}) == "LS"
