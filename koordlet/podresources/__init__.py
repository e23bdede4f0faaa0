"""Koordinator's PodResources proxy: the kubelet's PodResources API with koord-scheduler's devices
added (``proxy.py``, docs/koordlet.md#podresources-proxy)."""
