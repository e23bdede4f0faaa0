"""koordlet's node QoS: cgroup and resctrl writers and the behaviours NodeSLO drives."""
