"""The kubelet's PodResources API v1, generated from ``api.proto`` by ``koordlet.protogen``."""
