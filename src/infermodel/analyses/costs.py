"""One vocabulary for what a cost assumes.

Every price ``run``, ``simulate``, ``search`` and ``plan`` prints divides a rent by a
rate, and the rate is the assumption: the batch's decode rate with every paid hour busy
(``run``), the simulated rate of a deployment (``simulate --replicas``), the highest rate
that meets the latency objectives (``simulate --capacity``, ``plan``).  A
:class:`CostBasis` holds the rent, the rate and the words for it, and prints every figure
with its assumption, so that two prices per million tokens that differ tenfold say why.

A month is 30.4375 days (730.5 hours), the month of the pricing lever's
``always_on_cost_per_month``.

>>> basis = CostBasis(10.0, output_tokens_per_s=2000.0, input_tokens_per_s=8000.0,
...                   rate="at 4 requests/s, meeting the objectives")
>>> round(basis.per_month), round(basis.per_million_output, 3), round(basis.per_million_tokens, 3)
(7305, 1.389, 0.278)
"""

from __future__ import annotations

import math
from typing import Any

import attrs

#: Hours in the month every monthly cost uses: 30.4375 days, as the pricing lever's.
HOURS_PER_MONTH = 730.5


@attrs.frozen
class CostBasis:
    """A deployment's rent and the token rate it buys, with what that rate assumes.

    :param price_per_hour: USD per hour for every card of the deployment.
    :param output_tokens_per_s: output tokens per second at the assumed rate.
    :param input_tokens_per_s: prompt tokens per second at that rate (None: not known).
    :param rate: the assumption in words, e.g. "at the capacity rate meeting the
        objectives (0.244 requests/s)".
    :param utilisation: share of paid hours spent at that rate (1: always busy at it).
    """

    price_per_hour: float
    output_tokens_per_s: float
    input_tokens_per_s: float | None = None
    rate: str = "at the simulated rate"
    utilisation: float = 1.0

    @property
    def per_month(self) -> float:
        """Rent of the deployment for a month, always on (730.5 h)."""
        return self.price_per_hour * HOURS_PER_MONTH

    def _per_million(self, tokens_per_s: float | None) -> float:
        if tokens_per_s is None:
            return math.nan
        if tokens_per_s <= 0:
            return math.inf
        return self.price_per_hour * 1e6 / (3600 * tokens_per_s * self.utilisation)

    @property
    def per_million_output(self) -> float:
        """USD per million output tokens at the rate (output only)."""
        return self._per_million(self.output_tokens_per_s)

    @property
    def per_million_tokens(self) -> float:
        """USD per million tokens, prompt and output together, at the rate."""
        if self.input_tokens_per_s is None:
            return math.nan
        return self._per_million(self.output_tokens_per_s + self.input_tokens_per_s)

    @property
    def assumption(self) -> str:
        """What every figure assumes, in words."""
        busy = ("every paid hour busy" if self.utilisation == 1
                else f"{self.utilisation:.0%} of paid hours busy")
        return f"{self.rate}, {busy}; a month is {HOURS_PER_MONTH:g} h"

    def lines(self, indent: str = "  ") -> list[str]:
        """The figures, each labelled, then the assumption."""
        out = [f"{indent}USD {self.price_per_hour:,.2f}/h, USD {self.per_month:,.0f} per month"]
        if math.isfinite(self.per_million_tokens):
            out.append(f"{indent}USD {self.per_million_tokens:.4g} per 1M tokens in + out")
        out.append(f"{indent}USD {self.per_million_output:.4g} per 1M output tokens (output only)")
        out.append(f"{indent}assuming: {self.assumption}")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The figures in USD with their assumption (JSON-ready; infinities as "inf")."""
        from ..formatting import json_value

        return {"per_hour": self.price_per_hour, "per_month": self.per_month,
                "per_million_tokens": json_value(self.per_million_tokens),
                "per_million_output_tokens": json_value(self.per_million_output),
                "assumption": self.assumption, "utilisation": self.utilisation,
                "hours_per_month": HOURS_PER_MONTH}


__all__ = ["HOURS_PER_MONTH", "CostBasis"]
