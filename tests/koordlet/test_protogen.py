"""The committed generated code is what ``make protos`` generates: the kubelet's PodResources API
and NRI's api.proto and ttrpc envelopes."""

from __future__ import annotations

from koordlet import protogen


def test_the_generated_modules_are_up_to_date() -> None:
    assert protogen.main(["--check"]) == 0


def test_both_sets_are_checked() -> None:
    assert {str(s.directory) for s in protogen.SETS} == {"koordlet/podresources/api", "koordlet/nri/proto"}
