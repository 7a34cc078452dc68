"""Which judges decide, in which order: the screen, the LLM judge, or the screen then the LLM (the cascade).

- no endpoint: the offline judge alone ([judge] offline; the screen by default), whatever [judge] mode says; what the
  screen leaves `undecided` is `unjudged` (never a pass);
- [judge] mode = "online" or "batch": the LLM judge alone, as configured;
- [judge] mode = "cascade": the screen first (always the screen: the three-way offline judges never leave a pair
  undecided), then the LLM judge, online, on what the screen left undecided or could not judge.

lib/support/cascade.py runs the tiers through the cache; this module only names them.
"""

from __future__ import annotations

from dataclasses import dataclass

from citegate_assets.lib.support.judge.base import UNDECIDED, Judge

TIERS = ("screen", "llm", "cascade")  # judge_calibration.tier; support_verdicts.decided_by is screen | llm
TO_LLM = (UNDECIDED, "error")  # the screen's answers a cascade sends on to the LLM judge


@dataclass(frozen=True)
class JudgeTiers:
    screen: Judge | None  # the offline tier: the screen, or with no endpoint the judge [judge] offline names
    llm: Judge | None  # the LLM judge; None: no endpoint configured
    mode: str  # offline | online | batch | cascade

    def __post_init__(self) -> None:
        if self.screen is None and self.llm is None:
            raise ValueError("a support gate needs a judge: the screen, the LLM judge or both")

    @property
    def model(self) -> str:
        """The judge as calibration and the gate status name it: one model, or "<screen> > <llm>" for the cascade."""
        if self.screen is not None and self.llm is not None:
            return cascade_model(self.screen.model, self.llm.model)
        judge = self.llm or self.screen
        assert judge is not None
        return judge.model

    @property
    def tier(self) -> str:
        """The tier whose verdicts are the gate's: cascade (both), llm or screen."""
        if self.screen is not None and self.llm is not None:
            return "cascade"
        return "llm" if self.llm is not None else "screen"

    def describe(self) -> str:
        """One line for logs and the run summary."""
        if self.tier == "cascade":
            assert self.screen is not None and self.llm is not None
            return f"cascade: {self.screen.model} first, {self.llm.model} on what it leaves undecided"
        if self.tier == "llm":
            assert self.llm is not None
            return f"{self.llm.model} ({self.mode})"
        assert self.screen is not None
        return f"{self.screen.model} alone (no LLM judge configured: what it leaves undecided is unjudged)"


def cascade_model(screen_model: str, llm_model: str) -> str:
    return f"{screen_model} > {llm_model}"
