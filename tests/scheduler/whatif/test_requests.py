"""``POST /debug/whatif`` and ``koordctl whatif``: a malformed request is a 4xx naming the field,
an answer is JSON, YAML, a table or a wide table."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from scheduler.http import SchedulerHTTPServer
from scheduler.koordctl import main as koordctl
from scheduler.metrics import SchedulerMetrics
from scheduler.whatif.request import MAX_MEMBERS, RequestError, parse_request
from tests.scheduler.whatif.cluster import apply, gang, pod, running, topology_backend, until


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"{not json", 400, "body"),
        (b"{}", 422, "body"),
        (json.dumps({"pod": "a", "gang": "b"}).encode(), 422, "body"),
        (json.dumps({"pod": "a", "timeLimitSeconds": 60}).encode(), 422, "timeLimitSeconds"),
        (json.dumps({"pod": "a", "colour": "red"}).encode(), 422, "colour"),
    ],
)
def test_a_malformed_request_names_its_field(body: bytes, status: int, field: str) -> None:
    with pytest.raises(RequestError) as raised:
        parse_request(body)
    assert raised.value.status == status
    assert raised.value.field == field


async def _post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.post(f"{url}/debug/whatif", data=body) as response:
        return response.status, await response.json()


async def test_the_http_api_answers_and_refuses_with_the_field() -> None:
    backend = topology_backend({"b1": ("s1", 2)})
    async with running(backend) as app:
        server = SchedulerHTTPServer(
            SchedulerMetrics(), ready=lambda: True, what_if=app.whatif.answer, port=0
        )
        async with server:
            status, answer = await _post(server.url, json.dumps({"objects": gang("train", 2)}))
            assert status == 200
            assert answer["fits_now"]["fits"] is True
            assert len(answer["fits_now"]["placements"]) == 2

            broken = pod("p")
            broken["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
            status, error = await _post(server.url, json.dumps({"objects": [broken]}))
            assert status == 422
            assert error["field"].startswith("objects[0]")

            huge = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "d"},
                "spec": {"replicas": MAX_MEMBERS + 1, "template": {"spec": pod("t")["spec"]}},
            }
            status, error = await _post(server.url, json.dumps({"objects": [huge]}))
            assert status == 413, error
            assert error["field"] == "objects"

            status, error = await _post(server.url, json.dumps({"pod": "nobody"}))
            assert status == 404
            assert error["field"] == "pod"

            status, error = await _post(server.url, io.BytesIO(b"x" * (2 * 1024 * 1024)))
            assert status == 413


async def test_a_deployment_is_expanded_to_its_replicas() -> None:
    backend = topology_backend({"b1": ("s1", 2)})
    async with running(backend) as app:
        deployment = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web"},
            "spec": {
                "replicas": 3,
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": pod("t")["spec"]},
            },
        }
        server = SchedulerHTTPServer(
            SchedulerMetrics(), ready=lambda: True, what_if=app.whatif.answer, port=0
        )
        async with server:
            status, answer = await _post(server.url, json.dumps({"objects": [deployment]}))
        assert status == 200
        assert answer["members"] == 3
        assert answer["fits_now"]["fits"] is False  # two 8-GPU nodes, three whole-node replicas
        assert answer["largest"]["members_now"] == 2
        assert answer["smallest_change"]["kind"] == "members"
        assert answer["smallest_change"]["members"] == 2


async def test_koordctl_whatif_prints_a_table_wide_json_and_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = topology_backend({"b1": ("s1", 6)})
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump_all(gang("train", 8, min_member=6)))
    async with running(backend) as app:
        server = SchedulerHTTPServer(
            SchedulerMetrics(), ready=lambda: True, what_if=app.whatif.answer, port=0
        )
        async with server:
            outputs = {}
            for output in ("table", "wide", "json", "yaml"):
                code = await asyncio.to_thread(
                    koordctl, ["whatif", "-f", str(job), "--server", server.url, "-o", output]
                )
                assert code == 0
                outputs[output] = capsys.readouterr().out
    table = outputs["table"].splitlines()
    assert table[0].split()[:3] == ["JOB", "MEMBERS", "FITS"]
    assert "default/train" in table[1]
    assert "run 6 of the 8 members" in table[1]
    assert "Blocker:" in outputs["wide"]
    assert "CHECKED PLACEMENT" in outputs["wide"]
    assert json.loads(outputs["json"])["smallest_change"]["members"] == 6
    assert yaml.safe_load(outputs["yaml"])["largest"]["members_now"] == 6


async def test_koordctl_explain_adds_the_smallest_change_for_a_pending_pod(
    capsys: pytest.CaptureFixture[str],
) -> None:
    backend = topology_backend({"b1": ("s1", 3), "b2": ("s2", 3)})
    async with running(backend) as app:
        apply(backend, gang("train", 4, gather=("BlockLayer", "MustGather")))
        await until(lambda: app.explanations.get("default", "train-1") is not None)
        server = SchedulerHTTPServer(
            SchedulerMetrics(),
            ready=lambda: True,
            explain=app.explanations.lookup,
            what_if=app.whatif.answer,
            port=0,
        )
        async with server:
            capsys.readouterr()
            args = ["explain", "pod", "train-1", "--server", server.url]
            assert await asyncio.to_thread(koordctl, args) == 0
            text = capsys.readouterr().out
            assert await asyncio.to_thread(koordctl, [*args, "-o", "json"]) == 0
            as_json = json.loads(capsys.readouterr().out)
            assert await asyncio.to_thread(koordctl, [*args, "--no-whatif"]) == 0
            plain = capsys.readouterr().out
    assert "Blocker:   topology: gang default/train needs 4 members in one BlockLayer domain" in text
    assert "Smallest change: PreferGather instead of MustGather at BlockLayer" in text
    assert as_json["whatif"]["smallest_change"]["kind"] == "topology"
    assert "Smallest change" not in plain
