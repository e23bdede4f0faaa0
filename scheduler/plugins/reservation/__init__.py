"""Reservation: reserve pods, owners and restored room (see plugin.py)."""

from scheduler.framework.registry import PluginSpec
from scheduler.plugins.reservation.args import ReservationArgs
from scheduler.plugins.reservation.plugin import NAME, RBAC, ReservationPlugin, new

__all__ = ["NAME", "PLUGIN", "RBAC", "ReservationArgs", "ReservationPlugin", "new"]

PLUGIN = PluginSpec(NAME, new, ReservationArgs, RBAC)
