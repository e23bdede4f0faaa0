"""Device events: each node's cards and NICs, as its Device object lists them."""

from __future__ import annotations

from apis.client.backend import WatchEvent
from apis.scheduling.device import Device
from scheduler.plugins.device_share.store import DeviceStore

__all__ = ["DeviceHandler"]


class DeviceHandler:
    def __init__(self, store: DeviceStore) -> None:
        self.store = store

    def on_event(self, event: WatchEvent[Device]) -> None:
        event.dispatch(
            self.store.replace_devices,
            self.store.set_device,
            lambda d: self.store.remove_device(d.metadata.name or ""),
        )
