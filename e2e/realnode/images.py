"""OCI images for the real node, without a registry: pack a directory into an OCI archive with
umoci, and import any OCI archive into the node's containerd (namespace ``k8s.io``, where the CRI
plugin, hence kubelet, sees it)."""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

from e2e.realnode import host
from e2e.realnode.config import PAUSE_IMAGE, RealNodeConfig

__all__ = [
    "BUSYBOX_IMAGE",
    "CRI_NAMESPACE",
    "build_image",
    "busybox_image",
    "ctr",
    "image_names",
    "import_image",
    "pause_image",
]

CRI_NAMESPACE = "k8s.io"
PINNED_LABEL = "io.cri-containerd.pinned=pinned"
"""Kubelet's image GC never removes a pinned image (the sandbox image above all)."""


def _split(name: str) -> tuple[str, str]:
    """``localhost/pause:3.10`` -> (``localhost/pause``, ``3.10``)."""
    repo, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:
        raise ValueError(f"image name {name!r} needs a tag (repository:tag)")
    return repo, tag


def build_image(name: str, rootfs: Path, entrypoint: list[str], archive: Path) -> Path:
    """Pack ``rootfs`` (a directory, copied as the image's single layer) into an OCI archive at
    ``archive`` whose index names the image ``name``'s tag; ``import_image`` gives it the full name."""
    _, tag = _split(name)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="koordpy-image-") as tmp:
        layout = Path(tmp) / "layout"
        image = f"{layout}:{tag}"
        host.run("umoci", "init", "--layout", str(layout))
        host.run("umoci", "new", "--image", image)
        host.run("umoci", "insert", "--image", image, str(rootfs), "/")
        host.run(*_entrypoint_args(image, entrypoint))
        host.run("umoci", "gc", "--layout", str(layout))  # the manifests each step above replaced
        partial = archive.with_suffix(".tmp")
        with tarfile.open(partial, "w") as tar:
            for entry in sorted(layout.iterdir()):
                tar.add(entry, arcname=entry.name)
        partial.replace(archive)
    return archive


def _entrypoint_args(image: str, entrypoint: list[str]) -> list[str]:
    args = [
        "umoci",
        "config",
        "--image",
        image,
        "--os",
        "linux",
        "--architecture",
        "amd64",
        "--clear=config.cmd",
    ]
    for arg in entrypoint:
        args += ["--config.entrypoint", arg]
    return args


def ctr(config: RealNodeConfig, *args: str, timeout: float = 120.0) -> str:
    """Run ``ctr`` against the node's containerd in the CRI namespace; return its stdout."""
    proc = host.run(
        str(config.binary("ctr")),
        "--address",
        str(config.containerd_socket),
        "--namespace",
        CRI_NAMESPACE,
        *args,
        timeout=timeout,
    )
    return proc.stdout


def image_names(config: RealNodeConfig) -> set[str]:
    return set(ctr(config, "images", "ls", "-q").split())


def import_image(config: RealNodeConfig, archive: Path, name: str, *, pinned: bool = False) -> None:
    """Import the OCI archive ``archive`` into the real node's containerd as ``name``
    (``repository:tag``, e.g. ``localhost/koordinator-py:0.1.0``), unpacked for the overlayfs
    snapshotter so that a pod with ``imagePullPolicy: IfNotPresent``/``Never`` starts without a pull.

    ``ctr images import --base-name REPO`` names each manifest of the archive's index from its
    ``org.opencontainers.image.ref.name`` annotation: a bare tag becomes ``REPO:tag``, a full
    reference is kept when it starts with REPO. An archive that names its image otherwise (or not
    at all) is tagged ``name`` when it held exactly one image. ``pinned``: kubelet's image GC
    leaves it alone (the sandbox image is always pinned).
    """
    repo, _ = _split(name)
    before = image_names(config)
    args = ["images", "import", "--base-name", repo]
    if pinned:
        args += ["--label", PINNED_LABEL]
    ctr(config, *args, str(archive), timeout=600.0)
    after = image_names(config)
    if name in after:
        return
    new = sorted(n for n in after - before if "@" not in n)
    if len(new) != 1:
        raise RuntimeError(f"importing {archive} as {name}: the archive named {new or 'no image'}")
    ctr(config, "images", "tag", "--force", new[0], name)
    if pinned:
        ctr(config, "images", "label", name, PINNED_LABEL)


def pause_image(config: RealNodeConfig) -> Path:
    """The sandbox image's archive (``PAUSE_IMAGE``): the ``pause`` program built by
    ``e2e/toolchain/build.sh real-node``, alone in its image."""
    archive = config.images_dir / "pause.oci.tar"
    pause = config.binary("pause").resolve()
    stamp = config.images_dir / "pause.source"
    if archive.exists() and stamp.exists() and stamp.read_text() == str(pause):
        return archive
    with tempfile.TemporaryDirectory(prefix="koordpy-pause-") as tmp:
        rootfs = Path(tmp)
        shutil.copy2(pause, rootfs / "pause")
        build_image(PAUSE_IMAGE, rootfs, ["/pause"], archive)
    stamp.write_text(str(pause))
    return archive


BUSYBOX_IMAGE = "localhost/busybox:static"
"""A shell for the real node's test pods: Debian's static busybox (busybox-static), alone in its image."""


def busybox_image(config: RealNodeConfig, busybox: Path = Path("/usr/bin/busybox")) -> Path:
    archive = config.images_dir / "busybox.oci.tar"
    if archive.exists():
        return archive
    with tempfile.TemporaryDirectory(prefix="koordpy-busybox-") as tmp:
        rootfs = Path(tmp)
        (rootfs / "bin").mkdir()
        (rootfs / "tmp").mkdir()
        shutil.copy2(busybox, rootfs / "bin" / "busybox")
        for applet in ("sh", "cat", "ls", "sleep", "wget", "echo", "test", "grep", "head", "id", "env"):
            (rootfs / "bin" / applet).symlink_to("busybox")
        build_image(BUSYBOX_IMAGE, rootfs, ["/bin/sh"], archive)
    return archive
