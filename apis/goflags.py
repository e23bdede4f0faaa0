"""Koordinator's command lines, taken as its Go binaries take them (docs/flags.md).

Every binary builds a :class:`GoFlagParser`, an ``argparse`` parser that first rewrites Go's flag
syntax into what ``argparse`` reads:

* a single-dash long flag is a long flag: ``-cgroup-root-dir=/x`` is ``--cgroup-root-dir=/x``
  (single letters stay short options: ``-v 4``, ``-s 3``);
* ``_`` and ``-`` are the same in a flag's name (klog spells ``--log_dir``, component-base's
  normaliser makes that ``--log-dir``);
* a Go bool flag alone is ``true``, and takes its value only after ``=`` (``--flag=false``):
  ``--flag false`` leaves ``false`` as a stray argument, an error, as Go's ``flag`` does;
* other flags take ``--flag=value``, ``--flag value`` and ``-flag value``.

Abbreviations are refused (Go has none), and an unknown flag stays an error: argparse's exit 2
with ``unrecognized arguments: --the-flag``.

:meth:`GoFlagParser.add_klog_flags` registers klog's and component-base's logging flags, which
every Koordinator binary takes. ``-v``/``--v=N`` is honoured: :func:`level_for_verbosity` maps
klog's verbosity to a Python logging level (0 and 1: INFO, 2 and 3: the ``V(2)``/``V(3)`` levels
15 and 12 between INFO and DEBUG, 4 and above: DEBUG). The others, and each binary's flags for
machinery this project does not have (pprof, TSDB paths, runtime-hook sockets...), are accepted
through :meth:`GoFlagParser.add_accepted`: the value is checked as Go would (a bool, an int, a
duration is parsed by its owner) and otherwise unused, and the parsed namespace's ``flag_notes``
holds one warning per such flag, naming it, which the binary logs once its logging is set up
(:func:`log_flag_notes`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from apis.errors import InvalidValue

__all__ = [
    "NOTES",
    "SERVING_BOOL_FLAGS",
    "SERVING_FLAGS",
    "GoFlagParser",
    "go_bool",
    "level_for_verbosity",
    "log_flag_notes",
    "normalize_argv",
]

NOTES = "flag_notes"
"""The namespace attribute holding the warnings about accepted-but-unused flags."""

_V_LEVELS = {0: logging.INFO, 1: logging.INFO, 2: 15, 3: 12}
"""klog verbosity -> Python level; 4 and above are DEBUG."""


_KLOG_BOOLS = (
    "add-dir-header",
    "skip-headers",
    "skip-log-headers",
    "one-output",
    "log-json-split-stream",
    "log-text-split-stream",
)
_KLOG_VALUES = (
    "log-dir",
    "log-file",
    "log-file-max-size",
    "stderrthreshold",
    "vmodule",
    "log-backtrace-at",
    "log-flush-frequency",
    "log-json-info-buffer-size",
    "log-text-info-buffer-size",
)
"""klog's flags (spelled with ``_`` by klog: ``--log_dir``) and component-base's logging flags."""


SERVING_FLAGS = (
    "secure-port",
    "cert-dir",
    "tls-cert-file",
    "tls-private-key-file",
    "tls-cipher-suites",
    "tls-min-version",
    "tls-sni-cert-key",
    "http2-max-streams-per-connection",
    "authentication-kubeconfig",
    "authentication-token-webhook-cache-ttl",
    "client-ca-file",
    "requestheader-allowed-names",
    "requestheader-client-ca-file",
    "requestheader-extra-headers-prefix",
    "requestheader-group-headers",
    "requestheader-username-headers",
    "requestheader-uid-headers",
    "authorization-kubeconfig",
    "authorization-always-allow-paths",
    "authorization-webhook-cache-authorized-ttl",
    "authorization-webhook-cache-unauthorized-ttl",
)
"""component-base's secure serving, delegated authentication and authorization flags (kube-scheduler's,
Koordinator's koord-scheduler and koord-descheduler's), value flags."""
SERVING_BOOL_FLAGS = (
    "authentication-skip-lookup",
    "authentication-tolerate-lookup-failure",
    "permit-port-sharing",
    "permit-address-sharing",
)
"""The bool flags of the same options."""


def level_for_verbosity(v: int) -> int:
    """The Python logging level that shows klog's ``V(v)`` messages and everything more important."""
    if v < 0:
        raise ValueError(f"verbosity must be >= 0, got {v}")
    return _V_LEVELS.get(v, logging.DEBUG)


def go_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``: 1, t, T, TRUE, true, True and their false counterparts."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _verbosity(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a klog level (an integer >= 0), got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a klog level (an integer >= 0), got {text!r}")
    return value


def _canonical(name: str) -> str:
    return name.replace("_", "-")


def normalize_argv(
    argv: Sequence[str], bool_flags: Iterable[str], short_bools: Mapping[str, str] | None = None
) -> list[str]:
    """Go's flag syntax rewritten for argparse (see the module's docstring); after a bare ``--``
    nothing is rewritten. ``short_bools`` maps a bool flag's one-letter shorthand to its name."""
    bools = frozenset(bool_flags)
    shorts = short_bools or {}
    out: list[str] = []
    rest = iter(argv)
    for arg in rest:
        if arg == "--":
            out.append(arg)
            out.extend(rest)
            break
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 1:
            name = arg[1:].partition("=")[0]
            if len(name) > 1 and not name[0].isdigit():
                arg = "-" + arg  # -flag[=value] -> --flag[=value]
            elif name in shorts:
                arg = f"--{shorts[name]}{arg[2:]}"  # -f[=value] -> --debug-filters[=value]
        if arg.startswith("--") and len(arg) > 2:
            name, sep, value = arg[2:].partition("=")
            name = _canonical(name)
            if name in bools and not sep:
                sep, value = "=", "true"
            arg = f"--{name}{sep}{value}"
        out.append(arg)
    return out


class _Accepted(argparse.Action):
    """A flag accepted for compatibility: its value is checked, then a note names it."""

    def __init__(self, *args: Any, note: str, quiet_value: object = None, **kwargs: Any) -> None:
        self.note = note
        self.quiet_value = quiet_value
        super().__init__(*args, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        if self.quiet_value is not None and values == self.quiet_value:
            return
        notes: dict[str, str] = getattr(namespace, NOTES)
        flag = self.option_strings[0]
        notes.setdefault(
            flag, f"{flag} is accepted for compatibility with Koordinator and has no effect here: {self.note}"
        )


class GoFlagParser(argparse.ArgumentParser):
    """An ``argparse`` parser that reads Go's flag syntax (see the module's docstring)."""

    def __init__(self, prog: str, description: str | None = None) -> None:
        super().__init__(prog=prog, description=description, allow_abbrev=False)
        self._go_bools: set[str] = set()
        self._short_bools: dict[str, str] = {}

    def add_go_bool(
        self,
        name: str,
        *,
        dest: str | None = None,
        default: bool | None = None,
        negatable: bool = False,
        help: str,
    ) -> None:
        """A Go bool flag ``--name`` (alone: true; ``--name=false``); ``negatable`` also registers
        this project's ``--no-name``."""
        self._go_bools.add(name)
        action = self.add_argument(f"--{name}", dest=dest, type=go_bool, default=default, help=help)
        if negatable:
            self.add_argument(
                f"--no-{name}", dest=action.dest, action="store_const", const=False, help=f"--{name}=false"
            )

    def add_accepted(
        self,
        name: str,
        note: str,
        *,
        bool_flag: bool = False,
        type: Callable[[str], Any] = str,
        quiet_value: object = None,
        short: str | None = None,
    ) -> None:
        """A Koordinator flag that has no effect here: ``note`` says why; the warning is left out when
        the value is ``quiet_value`` (what this project does anyway)."""
        name = _canonical(name)
        if bool_flag:
            self._go_bools.add(name)
            type = go_bool
            if short:
                self._short_bools[short] = name
        self.add_argument(
            f"--{name}",
            *([f"-{short}"] if short else []),
            dest=f"accepted_{_canonical(name).replace('-', '_')}",
            type=type,
            action=_Accepted,
            note=note,
            quiet_value=quiet_value,
            help=f"accepted for compatibility with Koordinator, no effect: {note}",
        )

    def add_klog_flags(self, *, verbose_alias: bool = False) -> None:
        """klog's and component-base's logging flags; ``-v``/``--v`` sets ``verbosity``."""
        self.add_argument(
            "-v",
            "--v",
            dest="verbosity",
            type=_verbosity,
            default=0,
            help="klog verbosity: 0-1 INFO, 2-3 klog's V(2)/V(3) (levels 15, 12), 4 and above DEBUG",
        )
        if verbose_alias:
            self.add_argument(
                "--verbose", dest="verbosity", action="store_const", const=4, help="the same as --v=4 (DEBUG)"
            )
        ours = "this project logs JSON lines to stderr, at the level --v sets"
        self.add_accepted("logtostderr", ours, bool_flag=True, quiet_value=True)
        self.add_accepted("alsologtostderr", ours, bool_flag=True, quiet_value=False)
        for flag in _KLOG_BOOLS:
            self.add_accepted(flag, ours, bool_flag=True, quiet_value=False)
        for flag in _KLOG_VALUES:
            self.add_accepted(flag, ours)
        self.add_accepted("logging-format", ours, quiet_value="json")

    def add_feature_gates(
        self, parse: Callable[[str], Any], notes: Callable[[str], list[str]], *, dest: str = "feature_gates",
        default: Any = None, help: str,
    ) -> None:  # fmt: skip
        """``--feature-gates``: every occurrence is merged (as component-base's map flag does);
        ``parse`` raises :class:`InvalidValue` for an unknown gate or a bad value (exit 2), ``notes``
        names the gates that are Koordinator's but have no effect here."""

        class _Gates(argparse.Action):
            def __call__(
                self,
                parser: argparse.ArgumentParser,
                namespace: argparse.Namespace,
                values: Any,
                option_string: str | None = None,
            ) -> None:
                raw_attr = f"_{dest}_raw"
                text = ",".join(part for part in (getattr(namespace, raw_attr, ""), str(values)) if part)
                setattr(namespace, raw_attr, text)
                try:
                    setattr(namespace, dest, parse(text))
                    found = notes(text)
                except InvalidValue as exc:
                    parser.error(f"invalid argument {text!r} for {option_string}: {exc}")
                collected: dict[str, str] = getattr(namespace, NOTES)
                for note in found:
                    collected.setdefault(note, note)

        self.add_argument("--feature-gates", dest=dest, action=_Gates, default=default, help=help)

    def parse_go_args(self, argv: Sequence[str] | None = None) -> argparse.Namespace:
        """Parse ``argv`` (``sys.argv[1:]`` when None) in Go's syntax; ``flag_notes`` on the result
        holds one warning per accepted-but-unused flag, in order."""
        args = list(sys.argv[1:] if argv is None else argv)
        namespace = argparse.Namespace(**{NOTES: {}})
        parsed = self.parse_args(normalize_argv(args, self._go_bools, self._short_bools), namespace)
        notes: dict[str, str] = getattr(parsed, NOTES)
        setattr(parsed, NOTES, tuple(notes.values()))
        for key in [key for key in vars(parsed) if key.startswith("accepted_") or key.endswith("_raw")]:
            delattr(parsed, key)
        return parsed


def log_flag_notes(notes: Iterable[str], logger: logging.Logger) -> None:
    """One WARNING per accepted-but-unused flag (``flag_notes``)."""
    for note in notes:
        logger.warning(note)
