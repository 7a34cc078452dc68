"""Each product surface's policy ([surfaces.NAME] in citegate.toml): its stakes, support sample rate, template, owner
and citation marker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .config_fields import (
    check_choice,
    check_marker_pattern,
    check_number,
    check_string,
    checked_field,
)

STAKES = ("high", "low", "off")
DEFAULT_SURFACE = "default"


@dataclass(frozen=True)
class SurfacePolicy:
    name: str
    stakes: str = checked_field("low", check_choice(STAKES))
    sample_rate: float = checked_field(0.1, check_number(0, 1))
    template: str = checked_field("auto", check_string())  # must also name a built-in or [templates.NAME] profile
    owner: str = checked_field("unassigned", check_string(non_empty=True))
    # the surface's own inline citation marker (README "Citations"): a regex with a named group `ref`; "" = the
    # built-in styles ([1], [1, 3], [1-3], 【1】, [^1], (Source 2), [chunk-id])
    citation_marker: str = checked_field("", check_marker_pattern)


class SurfacePolicies(Protocol):
    """What a stage needs of the configuration to gate a surface (Config is one): its policy, [surfaces.default] for
    a surface not listed."""

    def surface(self, name: str) -> SurfacePolicy: ...
