"""Reservation: reserve pods, owners and restored room (see plugin.py)."""

from scheduler.plugins.reservation.args import ReservationArgs
from scheduler.plugins.reservation.plugin import NAME, RBAC, ReservationPlugin, new

__all__ = ["NAME", "RBAC", "ReservationArgs", "ReservationPlugin", "new"]
