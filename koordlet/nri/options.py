"""koordlet's NRI settings: Koordinator's ``-runtime-hooks-nri-*`` flags, with its defaults."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["NRIOptions"]


class NRIOptions(BaseModel):
    """Koordinator's ``-runtime-hooks-nri-*`` settings, with its defaults."""

    model_config = ConfigDict(frozen=True)

    socket_path: Path = Path("/var/run/nri/nri.sock")
    """The runtime's NRI socket (``-var-run-root-dir`` joined with ``-runtime-hooks-nri-socket-path``)."""
    plugin_name: str = "koordlet_nri"
    plugin_index: str = Field(default="00", pattern=r"^[0-9]{2}$")
    """Two digits: plugins are called in ascending index order."""
    connect_timeout_seconds: float = Field(default=6.0, gt=0)
    """Dialling and registering must finish in this time (a little over containerd's 5 s
    registration timeout)."""
    backoff_seconds: float = Field(default=1.0, gt=0)
    backoff_cap_seconds: float = Field(default=float(1 << 62) / 1e9, gt=0)
    backoff_steps: int = Field(default=2**31 - 1, ge=1)
    """After this many failed dials the delay starts again from ``backoff_seconds``."""
    backoff_factor: float = Field(default=2.0, ge=1)
