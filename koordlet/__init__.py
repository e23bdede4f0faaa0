"""koordlet: the node agent (node metrics with psutil and cgroups, devices with pynvml). Not built yet."""
