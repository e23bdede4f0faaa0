"""Koordinator's node resource controller as pure functions (algorithms.md 10.2, 10.3).

``inputs`` reads a node, its pods and its NodeMetric into integer units, ``batch`` and ``mid`` compute
the resources, ``damping`` decides whether a result is worth a write, and ``node_resources`` puts the
steps together the way the slo-controller's reconcile does.
"""
