"""Each product surface's policy ([surfaces.NAME] in citegate.toml): its stakes, support sample rate, template, owner
and citation marker."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from citegate_assets.lib.core.config_fields import (
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
    """[surfaces.NAME]: the policy of one product surface; [surfaces.default] applies to every surface not listed."""

    name: str
    stakes: str = checked_field(
        "low",
        check_choice(STAKES),
        "the support gate's policy: high judges every citation, low a deterministic sample, off none",
    )
    sample_rate: float = checked_field(
        0.1, check_number(0, 1), "the share of provenance-passing citations judged when stakes = low"
    )
    template: str = checked_field(
        "auto",
        check_string(),
        "the template profile that rendered the prompts: auto, a built-in or a [templates.NAME] profile",
    )
    owner: str = checked_field("unassigned", check_string(non_empty=True), "who owns the surface's queue entries")
    citation_marker: str = checked_field(
        "",
        check_marker_pattern,
        'the surface\'s own inline citation marker, replacing the built-in styles ([1], 【1】, (Source 2), ...); "" = '
        "the built-in styles (docs/log-format.md)",
    )


class SurfacePolicies(Protocol):
    """What a stage needs of the configuration to gate a surface (Config is one): its policy, [surfaces.default] for
    a surface not listed."""

    def surface(self, name: str) -> SurfacePolicy: ...
