"""Resctrl QoS: class-level groups from the NodeSLO and pod-level groups from the pod annotation.

Class level (gate ``RdtResctrl``, Koordinator's ``qosmanager/plugins/resctrl``): groups ``LSR``,
``LS`` and ``BE`` (LSE pods go to LSR) get their class's L3 range and MBA percent every round (a
disabled class the "None" values, 0-100 % and 100 %); the tasks of pods are moved into their class's
group only for classes with ``resctrlQOS.enable``. Pod level (gate ``Resctrl``, Koordinator's
``runtimehooks/hooks/resctrl``): a pod with ``node.koordinator.sh/resctrl`` gets the group
``koordlet-<pod uid>`` with the annotation's ``llc.schemata.range`` and ``mb.schemata.percent``
(``schemataPerCache`` entries override single cache ids); the group is removed when the pod is gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from apis.extension.qosannotations import ResctrlConfig
from apis.slo.nodeslo import NodeSLOSpec
from koordlet.qos.resctrl import ResctrlInfo, l3_mask, mb_value, render_schemata
from koordlet.qos.slo import class_qos

__all__ = ["CLASS_GROUPS", "POD_GROUP_PREFIX", "class_group_of", "class_schemata", "pod_schemata"]

CLASS_GROUPS = ("LSR", "LS", "BE")
POD_GROUP_PREFIX = "koordlet-"


def class_group_of(qos: str) -> str | None:
    if qos in ("LSE", "LSR"):
        return "LSR"
    return qos if qos in ("LS", "BE") else None


@dataclass(frozen=True)
class ClassResctrl:
    enabled: bool
    schemata: str


def class_schemata(spec: NodeSLOSpec, info: ResctrlInfo, group: str) -> ClassResctrl:
    resctrl = class_qos(spec, group).resctrl_qos
    if resctrl is None:
        return ClassResctrl(False, render_schemata(info, 0, 100, 100))
    return ClassResctrl(
        bool(resctrl.enable),
        render_schemata(
            info,
            resctrl.cat_range_start_percent or 0,
            100 if resctrl.cat_range_end_percent is None else resctrl.cat_range_end_percent,
            100 if resctrl.mba_percent is None else resctrl.mba_percent,
        ),
    )


def pod_schemata(config: ResctrlConfig, info: ResctrlInfo) -> str:
    """The schemata of a pod's own group; raises ValueError naming the field for a bad range."""
    lines: list[str] = []
    if config.llc is not None and info.l3_ids and info.ways > 0:
        default = config.llc.schemata.range if config.llc.schemata else None
        per_cache = {str(c.cache_id): c.range for c in config.llc.schemata_per_cache or [] if c.range}
        masks = []
        for cache in info.l3_ids:
            span = per_cache.get(cache, default) or [0, 100]
            if len(span) != 2 or not 0 <= span[0] < span[1] <= 100:
                raise ValueError(f"llc range {span} must be [start, end] with 0 <= start < end <= 100")
            masks.append(f"{cache}={l3_mask(info.ways, span[0], span[1]):x}")
        lines.append("L3:" + ";".join(masks))
    if config.mb is not None and info.mb_ids:
        default_pct = config.mb.schemata.percent if config.mb.schemata else None
        per_cache_pct = {str(c.cache_id): c.percent for c in config.mb.schemata_per_cache or [] if c.percent}
        values = []
        for domain in info.mb_ids:
            pct = per_cache_pct.get(domain, default_pct)
            value = mb_value(info.vendor, pct if pct is not None else 100)
            if value is None:
                raise ValueError(f"mb percent {pct} must be within [1, 100]")
            values.append(f"{domain}={value}")
        lines.append("MB:" + ";".join(values))
    return "\n".join(lines) + ("\n" if lines else "")
