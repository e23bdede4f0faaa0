"""The committed generated code is what ``make protos`` generates from the kubelet's api.proto."""

from __future__ import annotations

from koordlet.podresources import protogen


def test_the_generated_modules_are_up_to_date() -> None:
    assert protogen.main(["--check"]) == 0
