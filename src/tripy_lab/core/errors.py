"""TripyException and the helpers that build tripy-style messages pointing at the user's line."""

from __future__ import annotations

from collections.abc import Sequence

from tripy_lab.core.source import SourceLocation, user_location


class TripyException(Exception):
    """Every error tripy-lab raises on purpose. ``.summary`` is the first line, ``.location`` the user's line."""

    def __init__(self, summary: str, details: Sequence[str] = (), location: SourceLocation | None = None,
                 op: str | None = None):
        self.summary = summary
        self.details = list(details)
        self.location = location
        self.op = op  # the failing trace op's name (e.g. "%t5") when an engine or the lowering knows it
        super().__init__(self._render())

    def _render(self) -> str:
        parts = [self.summary]
        parts += [f"    {d}" for d in self.details if d]
        if self.location is not None:
            parts.append("")
            parts.append(self.location.render())
        return "\n".join(parts)


def raise_error(summary: str, details: Sequence[str] = (), location: SourceLocation | None = None):
    """Raise a TripyException located at the user's frame (or at ``location``, e.g. where a tensor was made)."""
    raise TripyException(summary, details, location or user_location())


def expected(param: str, value, what: str) -> str:
    """One detail line naming the parameter, the value and what was expected."""
    return f"For parameter: '{param}', expected {what} but got: {value!r}."
