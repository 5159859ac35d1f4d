"""The speculative lever's typical setting, which ``infermodel rank`` applies.

Four draft tokens per iteration, each accepted with probability 0.7 (the Inference lab's
'Guess ahead, check in one pass': acceptance of 0.6 to 0.8 is common on easy text), from
a draft whose step costs a tenth of the target's; the verification cost comes from the
roofline at the scenario's batch, as the lever computes it, so the gain shrinks as the
batch grows.
"""

from __future__ import annotations

from infermodel.plugin import hookimpl

from . import LAB, M10

GUESS = f"{LAB}, 'Guess ahead, check in one pass' ('In practice': acceptance 0.6 to 0.8)"
SPEED = f"{M10}, 'Derive the speed-up rather than naming an acceptance rate'"
TYPICAL = {"k": 4, "acceptance": 0.7, "draft_cost": 0.1}


@hookimpl
def infermodel_register_typical_settings(register):
    def setting(result):
        if result.scenario.lever("speculative") is not None:
            return None
        return {f"levers.speculative.{key}": value for key, value in TYPICAL.items()}

    register("speculative decoding", setting, lever="speculative",
             description=f"a draft proposes {TYPICAL['k']} tokens, each accepted with "
                         f"probability {TYPICAL['acceptance']:g}, at {TYPICAL['draft_cost']:g} of "
                         "a target step each; verification from the roofline at the batch",
             reference=f"{GUESS}; {SPEED}")


__all__ = ["TYPICAL"]
