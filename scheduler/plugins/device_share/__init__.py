"""DeviceShare: GPUs allocated by card, whole or shared (see plugin.py)."""

from scheduler.plugins.device_share.args import DeviceShareArgs
from scheduler.plugins.device_share.plugin import NAME, RBAC, DeviceShare, new

__all__ = ["NAME", "RBAC", "DeviceShare", "DeviceShareArgs", "new"]
