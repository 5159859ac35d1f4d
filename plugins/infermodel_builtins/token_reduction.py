"""The token-reduction lever: shorter prompts and answers by a stated share.

``[levers.token_reduction]`` removes a share of each prompt and of each answer::

    [levers.token_reduction]
    prompt_share = 0.2           # a fifth of every prompt removed (instructions, retrieved text)
    output_share = 0.1           # answers a tenth shorter (a length limit, terser style)

``prompt_tokens`` becomes max(1, n·(1 − p)) and ``output_tokens`` max(1, m·(1 − o)), with
n and m as the workload writes them (``prompt_tokens_before_reduction``,
``output_tokens_before_reduction``). Everything that follows the lengths follows: the
mean decode context and the full sequence length (when the workload does not state them;
a stated ``context`` or ``sequence_length`` is scaled by the same shrinkage of
prompt + output/2 and prompt + output), prefill work, cache per sequence, capacity and
the bill per request. Module 10 prices the same requests at their token counts (§11,
'Price output at the utilisation actually purchased'): fewer tokens for the same
requests is the saving, so ``infermodel rank`` counts it per million tokens of the
requests as written. Whether the shorter prompt still gives an answer as good is not
modelled.
"""

from __future__ import annotations

import attrs
from sympy import Max

from infermodel.plugin import S, accepts, hookimpl

from . import M10

PRICE = f"{M10}, §11 'Price output at the utilisation actually purchased'"
LOADED = f"{M10}, §11 'Separate quiet-request latency from loaded throughput'"
#: The typical setting ``infermodel rank`` applies.
TYPICAL_SHARE = 0.2


@accepts("≥ 0 and < 1")
def _share(instance, attribute, value):
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{attribute.name} = {value!r} is not a share in [0, 1)")


@attrs.frozen
class TokenReduction:
    """Shares of prompt and output tokens removed."""

    prompt_share: float = attrs.field(default=0.0, validator=_share,
        metadata={"description": "share of each prompt's tokens removed (0 to below 1)"})
    output_share: float = attrs.field(default=0.0, validator=_share,
        metadata={"description": "share of each answer's tokens removed (0 to below 1)"})


@hookimpl
def infermodel_register_levers(register):
    register("token_reduction", TokenReduction,
             description="token reduction: shorter prompts and answers by a stated share",
             reference=PRICE)


@hookimpl
def infermodel_define_quantities(scenario, define):
    lever = scenario.lever("token_reduction")
    if lever is None:
        return
    define("token_reduction_prompt_share", lever.prompt_share, unit="1",
           description="share of each prompt's tokens removed", reference=PRICE)
    define("token_reduction_output_share", lever.output_share, unit="1",
           description="share of each answer's tokens removed", reference=PRICE)
    # Read from the fields (so a sweep of them rebuilds the graph): prompt_tokens and
    # output_tokens become the reduced lengths.
    define("prompt_tokens_before_reduction", scenario.value("workload.prompt_tokens"),
           unit="token", description="tokens in each prompt as the workload writes them",
           reference=PRICE)
    define("output_tokens_before_reduction", scenario.value("workload.output_tokens"),
           unit="token", description="tokens in each answer as the workload writes them",
           reference=PRICE)


def _shrink(half: bool):
    """Reduced over written length: prompt + output/2 (``half``) or prompt + output."""
    weight = 0.5 if half else 1
    return ((S.prompt_tokens + weight * S.output_tokens)
            / (S.prompt_tokens_before_reduction + weight * S.output_tokens_before_reduction))


@hookimpl
def infermodel_transform_quantities(scenario, transform):
    if scenario.lever("token_reduction") is None:
        return
    reason = "a share of each {} is removed (token_reduction)"
    transform.replace("prompt_tokens",
                      Max(1, S.prompt_tokens_before_reduction * (1 - S.token_reduction_prompt_share)),
                      reason=reason.format("prompt"), reference=PRICE,
                      description="tokens in each prompt after the reduction")
    transform.replace("output_tokens",
                      Max(1, S.output_tokens_before_reduction * (1 - S.token_reduction_output_share)),
                      reason=reason.format("answer"), reference=PRICE,
                      description="tokens generated for each request after the reduction")
    for field, half in (("context", True), ("sequence_length", False)):
        written = scenario.value(f"workload.{field}")
        if written is not None:
            transform.replace(field, written * _shrink(half), reason=(
                f"the stated {field} shrinks with the prompt and answer"), reference=LOADED)


@hookimpl
def infermodel_register_headlines(register):
    register("token reduction", "prompt_tokens_before_reduction", label="prompt as written")
    register("token reduction", "output_tokens_before_reduction", label="answer as written")


@hookimpl
def infermodel_register_typical_settings(register):
    def setting(result):
        if result.scenario.lever("token_reduction") is not None:
            return None
        return {"levers.token_reduction.prompt_share": TYPICAL_SHARE,
                "levers.token_reduction.output_share": TYPICAL_SHARE}

    register("shorter prompts and answers", setting, lever="token_reduction",
             description=f"{TYPICAL_SHARE:.0%} fewer prompt and output tokens (leaner instructions "
                         "and retrieved text, a length limit)", reference=PRICE)


__all__ = ["TokenReduction"]
