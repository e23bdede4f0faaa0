"""Regenerates koordlet's protobuf modules (``make protos``); ``--check`` fails when the committed
files differ from what the installed tools generate (a unit test runs it).

- ``koordlet/podresources/api/``: the kubelet's PodResources API. ``api.proto`` is
  ``pkg/apis/podresources/v1/api.proto`` of kubernetes/kubelet v0.35.4 (commit e387a1db, the
  kubelet the real node runs), copied verbatim. protoc writes the messages (``api_pb2.py``), the
  gRPC stub and servicer (``api_pb2_grpc.py``), and mypy-protobuf their typed stubs. The proto's
  path below the repository root becomes the generated imports' package, so the modules import
  each other as ``koordlet.podresources.api``.
- ``koordlet/nri/proto/``: NRI's ``api.proto`` (v0.11.0, unchanged) and ttrpc's envelopes
  (``ttrpc.proto``), messages and protoc's own ``.pyi`` stubs. NRI's ``enum Field`` has a value
  named ``None``, which protoc writes into the stub as ``None: ...``, invalid Python: that line is
  dropped (the value stays reachable as ``Field.Value("None")``).

grpcio-tools and mypy-protobuf are dev tools: nothing at run time imports this module.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SETS", "ProtoSet", "main"]

ROOT = Path(__file__).resolve().parents[1]
_PLUGINS = Path(sys.executable).parent


@dataclass(frozen=True)
class ProtoSet:
    directory: Path
    """Where the protos and the committed modules are, below the repository root."""
    generated: tuple[str, ...]
    command: Callable[[Path], list[str]]
    """protoc's arguments for an output directory; the modules land in ``out/<directory>``."""
    fix: Callable[[Path], None] = lambda _: None
    """Applied to each generated file before it is compared or copied."""


def _podresources(out: Path) -> list[str]:
    plugins = [f"--plugin=protoc-gen-mypy={_PLUGINS / 'protoc-gen-mypy'}"]
    plugins += [f"--plugin=protoc-gen-mypy_grpc={_PLUGINS / 'protoc-gen-mypy_grpc'}"]
    outputs = [f"--{kind}_out={out}" for kind in ("python", "grpc_python", "mypy", "mypy_grpc")]
    return [f"-I{ROOT}", *plugins, *outputs, str(ROOT / "koordlet/podresources/api/api.proto")]


def _nri(out: Path) -> list[str]:
    here = ROOT / "koordlet/nri/proto"
    (out / "koordlet/nri/proto").mkdir(parents=True, exist_ok=True)
    target = out / "koordlet/nri/proto"
    return [
        f"-I{here}",
        f"--python_out={target}",
        f"--pyi_out={target}",
        str(here / "api.proto"),
        str(here / "ttrpc.proto"),
    ]


def _drop_none_members(path: Path) -> None:
    if path.suffix == ".pyi":
        path.write_text(re.sub(r"(?m)^\s*None: .*\n", "", path.read_text()))


SETS = (
    ProtoSet(
        Path("koordlet/podresources/api"),
        ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py", "api_pb2_grpc.pyi"),
        _podresources,
    ),
    ProtoSet(
        Path("koordlet/nri/proto"),
        ("api_pb2.py", "api_pb2.pyi", "ttrpc_pb2.py", "ttrpc_pb2.pyi"),
        _nri,
        _drop_none_members,
    ),
)


def generate(proto_set: ProtoSet, out: Path) -> list[Path]:
    """Write the set's modules below ``out`` (as below the repository root); their paths."""
    # A process of its own: grpc_tools' protoc segfaults when loaded beside protobuf's upb module.
    argv = [sys.executable, "-m", "grpc_tools.protoc", *proto_set.command(out)]
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    made = [out / proto_set.directory / name for name in proto_set.generated]
    for path in made:
        proto_set.fix(path)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m koordlet.protogen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed modules are stale")
    args = parser.parse_args(argv)
    stale = []
    for proto_set in SETS:
        with tempfile.TemporaryDirectory() as tmp:
            for made in generate(proto_set, Path(tmp)):
                committed = ROOT / proto_set.directory / made.name
                if not committed.is_file() or not filecmp.cmp(made, committed, shallow=False):
                    stale.append(committed)
                    if not args.check:
                        shutil.copyfile(made, committed)
    if args.check and stale:
        names = ", ".join(str(path.relative_to(ROOT)) for path in stale)
        print(f"stale generated code: {names} (run `make protos`)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
