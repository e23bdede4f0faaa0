"""The Helm chart lints, and what it renders is accepted by the real API server (dry run)."""

from __future__ import annotations

import subprocess

from e2e.cluster.controlplane import ControlPlane, repo_root

CHART = repo_root() / "charts" / "koordinator-py"


def _helm(cp: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([cp.tool("helm"), *args], capture_output=True, text=True, check=False)


def test_helm_lint(control_plane: ControlPlane) -> None:
    result = _helm(control_plane, "lint", str(CHART), "--strict")
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_chart_passes_server_side_dry_run(control_plane: ControlPlane) -> None:
    rendered = _helm(
        control_plane, "template", "koordinator-py", str(CHART), "--include-crds", "--kube-version", "1.35.4"
    )
    assert rendered.returncode == 0, rendered.stderr
    assert "kind: CustomResourceDefinition" in rendered.stdout
    applied = control_plane.run_kubectl("apply", "--dry-run=server", "-f", "-", input=rendered.stdout)
    assert applied.returncode == 0, applied.stderr
    assert "created (server dry run)" in applied.stdout or "configured (server dry run)" in applied.stdout


def test_chart_crds_are_the_generated_ones() -> None:
    generated = sorted(p.name for p in (repo_root() / "crds").glob("*.yaml"))
    in_chart = sorted(p.name for p in (CHART / "crds").glob("*.yaml"))
    assert generated == in_chart
    for name in generated:
        assert (repo_root() / "crds" / name).read_text() == (CHART / "crds" / name).read_text()
