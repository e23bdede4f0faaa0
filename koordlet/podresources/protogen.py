"""Regenerates ``koordlet/podresources/api/`` from the kubelet's ``api.proto`` (``make protos``).

``api.proto`` is ``pkg/apis/podresources/v1/api.proto`` of kubernetes/kubelet v0.35.4 (commit
e387a1db, the kubelet the real node runs), copied verbatim. ``grpc_tools.protoc`` writes the
messages (``api_pb2.py``), the gRPC stub and servicer (``api_pb2_grpc.py``), and mypy-protobuf their
typed stubs (``api_pb2.pyi``, ``api_pb2_grpc.pyi``). The proto's path below the repository root
becomes the generated imports' package, so the modules import each other as
``koordlet.podresources.api``. ``--check`` fails when the committed files differ from what the
installed tools generate (a unit test runs it).

grpcio-tools and mypy-protobuf are dev tools: nothing at run time imports this module.
"""

from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["GENERATED", "PROTO", "generate", "main"]

ROOT = Path(__file__).resolve().parents[2]
PROTO = Path("koordlet/podresources/api/api.proto")
GENERATED = ("api_pb2.py", "api_pb2.pyi", "api_pb2_grpc.py", "api_pb2_grpc.pyi")


def generate(out: Path) -> list[Path]:
    """Write the generated modules below ``out`` (as below the repository root); their paths."""
    plugins = Path(sys.executable).parent
    # A process of its own: grpc_tools' protoc segfaults when loaded beside protobuf's upb module.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{ROOT}",
            f"--python_out={out}",
            f"--grpc_python_out={out}",
            f"--plugin=protoc-gen-mypy={plugins / 'protoc-gen-mypy'}",
            f"--plugin=protoc-gen-mypy_grpc={plugins / 'protoc-gen-mypy_grpc'}",
            f"--mypy_out={out}",
            f"--mypy_grpc_out={out}",
            str(ROOT / PROTO),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return [out / PROTO.parent / name for name in GENERATED]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m koordlet.podresources.protogen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if the committed modules are stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        stale = []
        for made in generate(Path(tmp)):
            committed = ROOT / PROTO.parent / made.name
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
