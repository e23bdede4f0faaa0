"""The load file of ``koordlet --simulate``: what each node and its pods use, optionally changing over time.

Documented with an example in docs/koordlet.md; ``docs/examples/koordlet-load.yaml`` is one.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from apis.quantity import Quantity
from apis.yamltext import load_yaml
from koordlet.simulate.topology_spec import NodeTopologySpec

__all__ = ["LoadFile", "LoadStep", "NodeLoad", "PodLoad", "Usage", "load_file"]


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class Usage(_Model):
    cpu: Quantity | None = None
    """CPU in use (``"2"``, ``"1500m"``)."""
    memory: Quantity | None = None
    """Memory in use (``"4Gi"``)."""

    @property
    def cpu_cores(self) -> float:
        return float(self.cpu.as_fraction()) if self.cpu is not None else 0.0

    @property
    def memory_bytes(self) -> float:
        return float(self.memory.as_fraction()) if self.memory is not None else 0.0


class PodLoad(_Model):
    name: str
    namespace: str = "default"
    usage: Usage = Field(default_factory=Usage)
    priority: str | None = None
    """Koordinator priority class reported for the pod; taken from the pod itself when left out."""
    qos: str | None = None
    """Koordinator QoS class reported for the pod; taken from the pod itself when left out."""


class LoadStep(_Model):
    at_seconds: float = Field(ge=0)
    """Seconds after koordlet started from which this step holds (until the next step)."""
    usage: Usage | None = None
    """The node's usage from then on; a resource left out keeps its value."""
    pods: list[PodLoad] | None = None
    """The pods' usage from then on (replaces the whole list); unchanged when left out."""


class NodeLoad(_Model):
    name: str | None = None
    """The node (its NodeMetric) this entry is for."""
    names: list[str] | None = None
    """Several nodes with the same load, instead of ``name``."""
    usage: Usage | None = None
    """The node's total usage, pods included; the sum of its pods' usage when left out."""
    pods: list[PodLoad] = Field(default_factory=list)
    steps: list[LoadStep] = Field(default_factory=list)
    stop_reporting_after_seconds: float | None = Field(default=None, ge=0)
    """Stop writing this node's NodeMetric that many seconds after start, so that it expires."""
    topology: NodeTopologySpec | None = None
    """The node's CPUs, NUMA nodes and kubelet policy: koordlet writes its NodeResourceTopology."""

    @model_validator(mode="after")
    def _steps_in_order(self) -> NodeLoad:
        times = [step.at_seconds for step in self.steps]
        if times != sorted(times):
            raise ValueError("steps must be in increasing atSeconds")
        return self


class LoadFile(_Model):
    nodes: list[NodeLoad] = Field(default_factory=list)
    default: NodeLoad | None = None
    """The load of every node with a NodeMetric that no entry of ``nodes`` names; such nodes are
    not reported when left out."""
    report_interval_seconds: float | None = Field(default=None, gt=0)
    """Report this often instead of each NodeMetric's ``reportIntervalSeconds`` (the command-line
    flag wins over this)."""
    sample_interval_seconds: float = Field(default=1.0, gt=0)
    """Spacing of the simulated samples the aggregates are computed over (koordlet collects every 1 s)."""
    history_seconds: float | None = Field(default=None, ge=0)
    """How long before start the initial load is taken to have held already; unlimited when left out,
    so aggregated usages are reported from the first report on."""

    @model_validator(mode="after")
    def _names(self) -> LoadFile:
        if self.default is not None and self.default.topology is not None:
            raise ValueError("default.topology: give topology on the named nodes (nodes[].topology)")
        seen: set[str] = set()
        for index, node in enumerate(self.nodes):
            names = node.names or ([node.name] if node.name else [])
            if not names or (node.name and node.names):
                raise ValueError(f"nodes[{index}]: give exactly one of name or names")
            for name in names:
                if name in seen:
                    raise ValueError(f"nodes[{index}]: node {name!r} is described twice")
                seen.add(name)
        return self

    def topologies(self) -> dict[str, NodeTopologySpec]:
        """Node name -> its topology, for the named nodes that have one."""
        return {
            name: node.topology
            for node in self.nodes
            if node.topology is not None
            for name in (node.names or [node.name or ""])
        }

    def for_node(self, name: str) -> NodeLoad | None:
        for node in self.nodes:
            if node.name == name or (node.names and name in node.names):
                return node
        return self.default


def load_file(path: Path) -> LoadFile:
    """Raises OSError when the file cannot be read, ValueError when it is no load file."""
    return LoadFile.model_validate(load_yaml(path.read_text(), str(path)) or {})
