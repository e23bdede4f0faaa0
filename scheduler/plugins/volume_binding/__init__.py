"""VolumeBinding (kube-scheduler's): see ``plugin``; ``matching`` finds the volumes per node."""

from scheduler.framework.registry import PluginSpec
from scheduler.plugins.volume_binding.plugin import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_PV_NOT_EXIST,
    ERR_UNBOUND_IMMEDIATE,
    NAME,
    RBAC,
    VolumeBinding,
    VolumeBindingArgs,
    new,
)

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_UNBOUND_IMMEDIATE",
    "NAME",
    "PLUGIN",
    "RBAC",
    "VolumeBinding",
    "VolumeBindingArgs",
    "new",
]

PLUGIN = PluginSpec(NAME, new, VolumeBindingArgs, RBAC)
