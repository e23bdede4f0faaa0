"""koordlet: the node agent. Collects node, pod and container usage (psutil, cgroups v1 and v2) into a
bounded metric cache and reports it into the node's NodeMetric status; ``--simulate`` reports for many
KWOK nodes from a load file instead (docs/koordlet.md)."""
