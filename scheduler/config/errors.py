"""ConfigError, and pydantic's validation errors rewritten as ``field.path: what is wrong``."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

__all__ = ["ConfigError", "field_path", "pydantic_problems"]


class ConfigError(ValueError):
    """The configuration is invalid; ``problems`` lists each one as ``field.path: what is wrong``."""

    def __init__(self, problems: Sequence[str], source: str = "") -> None:
        self.problems = list(problems)
        where = f" in {source}" if source else ""
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid KubeSchedulerConfiguration{where}:\n{lines}")


def field_path(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def pydantic_problems(exc: ValidationError) -> list[str]:
    problems = []
    for err in exc.errors():
        where = field_path(err["loc"])
        if err["type"] == "extra_forbidden":
            problems.append(f'unknown field "{where}"')
        elif err["type"] == "missing":
            problems.append(f"{where}: required field is missing")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {msg} (got {err.get('input')!r})")
    return problems
