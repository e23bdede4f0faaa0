"""DeviceShare: GPUs allocated by card, whole or shared (see plugin.py)."""

from scheduler.framework.registry import PluginSpec
from scheduler.plugins.device_share.args import DeviceShareArgs
from scheduler.plugins.device_share.plugin import NAME, RBAC, DeviceShare, new

__all__ = ["NAME", "PLUGIN", "RBAC", "DeviceShare", "DeviceShareArgs", "new"]

PLUGIN = PluginSpec(NAME, new, DeviceShareArgs, RBAC)
