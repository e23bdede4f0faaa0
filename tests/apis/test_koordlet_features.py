"""koordlet's feature gates: Koordinator's names and defaults; bad input stops the start naming the gate."""

from __future__ import annotations

import pytest

from apis.errors import InvalidValue
from apis.koordlet_features import KoordletFeatureGates, parse_koordlet_feature_gates
from koordlet.__main__ import parse_args


def test_defaults_are_koordinators() -> None:
    gates = parse_koordlet_feature_gates("")
    assert gates == KoordletFeatureGates()
    assert (gates.be_cpu_suppress, gates.rdt_resctrl, gates.group_identity) == (True, True, True)
    assert (gates.be_cpu_evict, gates.be_memory_evict, gates.be_cpu_manager, gates.resctrl_hook) == (
        False,
        False,
        False,
        False,
    )


def test_cfs_quota_gates_have_koordinators_defaults() -> None:
    gates = parse_koordlet_feature_gates("")
    assert (gates.batch_resource, gates.cpu_normalization) == (True, False)
    gates = parse_koordlet_feature_gates("CPUNormalization=true,BatchResource=false")
    assert (gates.batch_resource, gates.cpu_normalization) == (False, True)


def test_gates_parsed_by_name() -> None:
    gates = parse_koordlet_feature_gates("BEMemoryEvict=true, BECPUEvict=1,BECPUSuppress=false")
    assert (gates.be_memory_evict, gates.be_cpu_evict, gates.be_cpu_suppress) == (True, True, False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Foo=true", "unrecognized koordlet feature gate: 'Foo'"),
        ("BEMemoryEvict=maybe", "invalid value of 'BEMemoryEvict'='maybe'"),
        ("BEMemoryEvict", "missing bool value for 'BEMemoryEvict'"),
    ],
)
def test_bad_gates_are_refused_naming_the_gate(text: str, message: str) -> None:
    with pytest.raises(InvalidValue, match=message):
        parse_koordlet_feature_gates(text)


def test_koordlet_flag(capsys: pytest.CaptureFixture[str]) -> None:
    config = parse_args(["--node-name", "n", "--feature-gates", "BEMemoryEvict=true"])
    assert config.gates.be_memory_evict
    config = parse_args(["--node-name", "n", "--feature-gates", "CPUEvict=true"])  # Koordinator's, not built
    assert config.gates == parse_koordlet_feature_gates("")
    assert "CPUEvict" in config.flag_notes[0]
    with pytest.raises(SystemExit):
        parse_args(["--node-name", "n", "--feature-gates", "NoSuchGate=true"])
    assert "unrecognized koordlet feature gate: 'NoSuchGate'" in capsys.readouterr().err
