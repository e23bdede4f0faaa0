"""`make image`: the image is built (or found up to date), unpacked with umoci and run with plain
runc, as a node's container runtime would run it: every entry point starts, as uid 65532, with
its runtime dependencies importable, and the image holds no compiler, pip or package cache.

The full tier only: a cold build takes minutes (mmdebstrap, ~40 wheels) and it needs root (the
root file system is built in a chroot, runc runs the container)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster.controlplane import repo_root
from e2e.image import name

pytestmark = [
    pytest.mark.full,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(os.geteuid() != 0, reason="building (chroot) and running (runc) the image needs root"),
]

ROOT = repo_root()
ARCH = "amd64"
IMAGES = name.images_dir()
LAYOUT = IMAGES / f"koordinator-py-{name.version()}-{ARCH}"
ARCHIVE = IMAGES / f"koordinator-py-{name.version()}-{ARCH}.oci.tar"
ENTRY_POINTS = ("koord-scheduler", "koord-manager", "koord-descheduler", "koordlet", "koordctl")


def _build() -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(ROOT / "e2e" / "image" / "build.sh"), ARCH],
        env={**os.environ, "PY": sys.executable},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    built = _build()
    assert built.returncode == 0, built.stdout + built.stderr
    path = tmp_path_factory.mktemp("image") / "bundle"
    subprocess.run(
        ["umoci", "unpack", "--image", f"{LAYOUT}:{name.version()}", str(path)],
        check=True,
        capture_output=True,
    )
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _run(bundle: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Runs `args` in the image with runc and the runtime config umoci derived from the image's
    config (its user, environment and working directory)."""
    config_path = bundle / "config.json"
    config: dict[str, Any] = json.loads(config_path.read_text())
    config["process"]["terminal"] = False
    config["process"]["args"] = list(args)
    config_path.write_text(json.dumps(config))
    container = f"koord-image-test-{os.getpid()}-{time.monotonic_ns()}"
    return subprocess.run(
        ["runc", "run", "--bundle", str(bundle), container],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_every_entry_point_starts_as_nonroot(bundle: Path) -> None:
    script = (
        "id -u; id -g; for c in " + " ".join(ENTRY_POINTS) + '; do "$c" --help >/dev/null && echo "$c"; done'
    )
    result = _run(bundle, "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["65532", "65532", *ENTRY_POINTS], result.stderr


def test_the_image_cmd_is_koord_scheduler_help(bundle: Path) -> None:
    result = _run(bundle, *_image_config()["config"]["Cmd"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: koord-scheduler"), result.stdout
    assert json.loads((bundle / "config.json").read_text())["process"]["user"]["uid"] == 65532


def test_runtime_dependencies_import(bundle: Path) -> None:
    modules = (
        "ortools.sat.python.cp_model, numpy, pandas, kopf, kubernetes_asyncio, pynvml, psutil, cryptography"
    )
    result = _run(bundle, "python", "-c", f"import {modules}; import sys; print(sys.version_info[:2])")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(3, 11)"


def test_no_compiler_pip_or_package_cache(bundle: Path) -> None:
    rootfs = bundle / "rootfs"
    for directory in ("usr/bin", "usr/sbin", "usr/local/bin", "opt/koordinator-py/bin"):
        present = {p.name for p in (rootfs / directory).iterdir()} if (rootfs / directory).exists() else set()
        for tool in ("gcc", "cc", "g++", "c++", "clang", "pip", "pip3", "apt-get"):
            assert tool not in present, f"/{directory}/{tool}"
    site = rootfs / "opt/koordinator-py/lib/python3.11/site-packages"
    assert not list(site.glob("pip")), "pip is installed in the venv"
    assert not (rootfs / "root/.cache").exists()
    assert not list((rootfs / "var/cache/apt").glob("**/*.deb"))
    assert not [p for p in (rootfs / "var/lib/apt/lists").glob("*") if p.is_file() and p.name != "lock"]
    assert not list((rootfs / "usr/share/man").glob("*"))


def _image_config() -> dict[str, Any]:
    with tarfile.open(ARCHIVE) as archive:

        def member(path: str) -> Any:
            file = archive.extractfile(path)
            assert file is not None, path
            return json.load(file)

        def blob(digest: str) -> Any:
            return member(f"blobs/sha256/{digest.removeprefix('sha256:')}")

        index = member("index.json")
        (manifest,) = index["manifests"]
        config: dict[str, Any] = blob(blob(manifest["digest"])["config"]["digest"])
        config["_annotations"] = manifest["annotations"]
        return config


def test_archive_is_named_for_containerd(bundle: Path) -> None:
    config = _image_config()
    # `ctr -n k8s.io images import` names the image after io.containerd.image.name.
    assert config["_annotations"]["io.containerd.image.name"] == name.reference()
    assert config["_annotations"]["org.opencontainers.image.ref.name"] == name.version()
    assert (config["architecture"], config["os"]) == (ARCH, "linux")
    assert config["config"]["User"] == "65532:65532"


def test_a_warm_build_is_a_no_op(bundle: Path) -> None:
    before = ARCHIVE.stat().st_mtime_ns
    started = time.monotonic()
    built = _build()
    assert built.returncode == 0, built.stderr
    assert "up to date" in built.stderr
    assert time.monotonic() - started < 60
    assert ARCHIVE.stat().st_mtime_ns == before
