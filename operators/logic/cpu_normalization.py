"""A node's CPU normalization ratio (Koordinator's slo-controller cpunormalization plugin,
algorithms.md 10.4 steps 2-3).

1. Enabled: the node label ``node.koordinator.sh/cpu-normalization-enabled`` when present, else the
   node's strategy ``enable``, else false. Disabled: the ratio is ``"1.00"``.
2. Enabled: the NodeResourceTopology's ``cpu-basic-info`` gives the CPU model, hyper-threading and
   turbo; ``ratioModel[model]`` gives the ratio for that combination, ``defaultRatio`` when the
   model or that field is missing.
3. Only a ratio in [1.0, 5.0] is written, with two decimals.

Whatever cannot be decided (no NodeResourceTopology, no basic info, a model without a ratio, a
ratio out of range, a label that is no boolean) leaves the node's annotation as it is, with the
reason, which the handler posts on the node as a Warning event.

The annotation is rewritten only when it appears, disappears, or moves by 0.01 or more: the values
are compared as the exact decimals they are written as, so that ``2.00`` -> ``2.01`` is a change
(Koordinator compares float64 differences, and ``2.01 - 2.00 < 0.01`` there).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from apis.errors import InvalidValue
from apis.extension.amplification import format_ratio
from apis.extension.numa import CPUBasicInfo
from apis.extension.qosannotations import parse_cpu_normalization_enabled
from apis.gofloat import parse_go_float
from apis.slo.sloconfig.cpu_normalization import CPUNormalizationStrategy

__all__ = [
    "DISABLED_RATIO",
    "RATIO_EPSILON",
    "RATIO_MAX",
    "RATIO_MIN",
    "RatioDecision",
    "decide_ratio",
    "enabled",
    "needs_update",
    "ratio_from_model",
]

RATIO_MIN = 1.0
RATIO_MAX = 5.0
"""Koordinator accepts no ratio below 1 (it would shrink a node) and none above 5 (surely a typo)."""
DISABLED_RATIO = "1.00"
RATIO_EPSILON = Fraction(1, 100)


@dataclass(frozen=True)
class RatioDecision:
    value: str | None
    """The annotation value to have on the node; None: leave it as it is."""
    problem: str | None = None
    """Why no value could be decided (set exactly when ``value`` is None)."""


class RatioError(ValueError):
    """The strategy has no usable ratio for the node's CPU."""


def _field(info: CPUBasicInfo) -> str:
    if info.hyper_thread_enabled and info.turbo_enabled:
        return "hyperThreadTurboEnabledRatio"
    if info.hyper_thread_enabled:
        return "hyperThreadEnabledRatio"
    if info.turbo_enabled:
        return "turboEnabledRatio"
    return "baseRatio"


def ratio_from_model(strategy: CPUNormalizationStrategy, info: CPUBasicInfo) -> float:
    """The ratio for ``info``'s model, HT and turbo state, within [1.0, 5.0]; raises RatioError
    naming the model and field otherwise."""
    field = _field(info)
    model = (strategy.ratio_model or {}).get(info.cpu_model)
    if model is None:
        where, ratio = f"ratioModel has no CPU model {info.cpu_model!r}", None
    else:
        where = f"ratioModel[{info.cpu_model!r}].{field}"
        ratio = {
            "hyperThreadTurboEnabledRatio": model.hyper_thread_turbo_enabled_ratio,
            "hyperThreadEnabledRatio": model.hyper_thread_enabled_ratio,
            "turboEnabledRatio": model.turbo_enabled_ratio,
            "baseRatio": model.base_ratio,
        }[field]
        if ratio is None:
            where = f"{where} is not set"
    if ratio is None:
        if strategy.default_ratio is None:
            raise RatioError(f"{where} and there is no defaultRatio")
        where, ratio = f"defaultRatio (as {where})", strategy.default_ratio
    if not RATIO_MIN <= ratio <= RATIO_MAX:
        raise RatioError(f"{where} = {ratio:g} is outside [{RATIO_MIN}, {RATIO_MAX}]")
    return ratio


def enabled(strategy: CPUNormalizationStrategy, enabled_label: str | None) -> bool:
    """The node label when present (raises InvalidAnnotation when it is no boolean), else the
    strategy's ``enable``, else false."""
    if enabled_label is not None:
        return parse_cpu_normalization_enabled(enabled_label)
    return bool(strategy.enable)


def decide_ratio(
    strategy: CPUNormalizationStrategy,
    enabled_label: str | None,
    info: CPUBasicInfo | None,
    info_problem: str | None = None,
) -> RatioDecision:
    """The ratio of a node with label value ``enabled_label`` (None: no label) whose
    NodeResourceTopology gives ``info`` (None: ``info_problem`` says why there is none)."""
    try:
        on = enabled(strategy, enabled_label)
    except InvalidValue as exc:
        return RatioDecision(None, str(exc))
    if not on:
        return RatioDecision(DISABLED_RATIO)
    if info is None:
        return RatioDecision(None, info_problem or "the node's CPU basic info is unknown")
    try:
        return RatioDecision(format_ratio(ratio_from_model(strategy, info)))
    except RatioError as exc:
        return RatioDecision(None, f"cpu-normalization-config: {exc}")


def _exact(value: str) -> Fraction | None:
    try:
        return parse_go_float(value)
    except InvalidValue:
        return None


def needs_update(old: str | None, new: str | None) -> bool:
    """Whether the annotation ``old`` (None: absent) must become ``new`` (None: removed)."""
    if old is None or new is None:
        return old != new
    old_value, new_value = _exact(old), _exact(new)
    if old_value is None or new_value is None:
        return old != new  # an unparseable value on the node is always replaced
    return abs(old_value - new_value) >= RATIO_EPSILON
