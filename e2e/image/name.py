"""The one name of the koordinator-py image: `make image` tags what it builds with it, and the
chart's default (values.yaml `<component>.image.repository`, tag empty -> appVersion) must render
it (tests/test_image_name.py, e2e/scenarios/test_helm_chart.py).

    python -m e2e.image.name                 localhost/koordinator-py:0.1.0
    python -m e2e.image.name repository      localhost/koordinator-py
    python -m e2e.image.name tag             0.1.0
    python -m e2e.image.name dir             ~/.cache/koordinator-py/images
"""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# `localhost/`: nothing can be pulled from a registry here, and no registry holds this image; a
# node gets it from `ctr -n k8s.io images import` of the archive `make image` writes.
REPOSITORY = "localhost/koordinator-py"
# The four components of the chart that run this one image, each with its own entry point.
CHART_COMPONENTS = ("scheduler", "manager", "descheduler", "koordlet")


def version() -> str:
    """The project's version (pyproject.toml), which is the image tag and the chart's appVersion."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def reference() -> str:
    return f"{REPOSITORY}:{version()}"


def images_dir() -> Path:
    """Where `make image` keeps what it built: in the tool cache beside the Go tools, so that a fresh
    clone of the same sources (CI's) finds the image built and does not build it again."""
    cache = os.environ.get("KOORD_PY_CACHE") or str(Path.home() / ".cache" / "koordinator-py")
    return Path(cache) / "images"


def archive(arch: str = "amd64") -> Path:
    """The OCI archive of the image for ``arch`` (``ctr -n k8s.io images import`` takes it)."""
    return images_dir() / f"koordinator-py-{version()}-{arch}.oci.tar"


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "reference"
    values = {"reference": reference(), "repository": REPOSITORY, "tag": version(), "dir": str(images_dir())}
    if what not in values or len(argv) > 1:
        print(f"usage: python -m e2e.image.name [{'|'.join(values)}]", file=sys.stderr)
        return 2
    print(values[what])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
