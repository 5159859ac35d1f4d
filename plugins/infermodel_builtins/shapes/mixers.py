"""Fixed-state and projection mixers: one layer's weights, state and recurrence FLOPs.

Each function returns a :class:`StateLayer` of sympy expressions over the model's
quantities, for one layer of its kind. The recurrence costs are counted per state value
and token, as stated in each docstring (the projections are matrix products, counted
in ``params_matmul`` like every other weight).

* **Lightning attention** (MiniMax-01, arXiv:2501.08313 §2.2; the MiniMax-Text-01
  config.json and modelling code): h heads of width d_h, every head its own key and
  value (no grouping). Weights: the joint q/k/v projection 3·d·h·d_h, the output gate
  d·h·d_h and the output projection h·d_h·d; one norm of h·d_h. State per sequence:
  h·d_h² (one d_h×d_h matrix per head, decayed and updated by kᵀv each token). About 5
  FLOPs per state value and token: decay, rank-one update (multiply-add), read-out
  (multiply-add).
* **Mamba-1** (Mamba, arXiv:2312.00752 §3; Jamba, arXiv:2403.19887 §2): inner width
  d_i = expand·d, state size n, Δ rank r, convolution width k. Weights: in_proj
  d·2·d_i, the depthwise convolution d_i·k (+ d_i biases), x_proj d_i·(r + 2·n), dt_proj
  r·d_i + d_i, A d_i·n, D d_i and out_proj d_i·d (+ biases of both projections with
  ``mamba_proj_bias``); Jamba adds norms of Δ, B and C (r + 2·n). State: d_i·n
  recurrent values plus (k − 1)·d_i convolution values (the last k − 1 inputs, as vLLM
  keeps them). About 7 FLOPs per state value (discretisation, decay, input, read-out)
  and 2·k per convolution channel.
* **Mamba-2** (Transformers are SSMs, arXiv:2405.21060 §7; Nemotron-H, arXiv:2504.03624):
  h heads of width p (d_i = h·p), g groups of B and C of size n. Weights: in_proj
  d·(2·d_i + 2·g·n + h) (z, x, B, C, Δ), the convolution over the d_i + 2·g·n channels of
  x, B and C, per-head Δ bias, A and D (3·h), a gated norm of d_i and out_proj d_i·d.
  State: h·p·n plus (k − 1)·(d_i + 2·g·n). About 5 FLOPs per state value (the decay is
  one scalar per head) and 2·k per convolution channel.
* **Projection** (DeciLM's ``replace_with_linear``): one d×d matrix in place of
  attention (or of a feed-forward block); no cache, no state.
"""

from __future__ import annotations

from typing import Any

import attrs
from sympy import ceiling

from infermodel.plugin import S

LIGHTNING = ("MiniMax-01 (arXiv:2501.08313) §2.2 'lightning attention'; MiniMax-Text-01 "
             "config.json (attn_type_list)")
MAMBA = ("Mamba (arXiv:2312.00752) §3; Jamba (arXiv:2403.19887) §2; Jamba config.json "
         "(mamba_d_state, mamba_d_conv, mamba_expand, mamba_dt_rank)")
MAMBA2 = ("Transformers are SSMs / Mamba-2 (arXiv:2405.21060) §7; Nemotron-H (arXiv:2504.03624); "
          "Nemotron-H config.json (mamba_num_heads, mamba_head_dim, n_groups, ssm_state_size)")
PROJECTION = "DeciLM block_configs (replace_with_linear): Llama-Nemotron (arXiv:2505.00949)"


@attrs.frozen
class StateLayer:
    """One layer of a fixed-state or projection mixer."""

    params: Any                  # weights (its inner norms apart)
    norms: Any                   # norm weights inside the mixer
    state_values: Any            # values of state one sequence keeps (0: none)
    flops_per_token: Any         # recurrence FLOPs per token (0: none)
    what: str                    # how params is made up
    reference: str


def lightning_layer() -> StateLayer:
    d, width = S.d_model, S.heads * S.head_dim
    return StateLayer(params=3 * d * width + d * width + width * d, norms=width,
                      state_values=S.heads * S.head_dim**2,
                      flops_per_token=5 * S.heads * S.head_dim**2,
                      what="joint q/k/v projection, output gate, output projection",
                      reference=LIGHTNING)


def mamba_inner_width():
    """d_i = expand·d (Mamba-1)."""
    return S.mamba_expand * S.d_model


def mamba_layer(scenario) -> StateLayer:
    value = scenario.value
    d, di, n, r, k = S.d_model, S.mamba_inner, S.mamba_d_state, S.mamba_dt_rank, S.mamba_d_conv
    params = d * 2 * di + di * k + di * (r + 2 * n) + r * di + di + di * n + di + di * d
    if value("model.mamba_conv_bias"):
        params += di
    if value("model.mamba_proj_bias"):
        params += 2 * di + d
    norms = r + 2 * n if value("model.mamba_inner_norms") else 0
    return StateLayer(params=params, norms=norms, state_values=di * n + (k - 1) * di,
                      flops_per_token=7 * di * n + 2 * k * di,
                      what="in-projection, convolution, x/dt projections, A and D, out-projection",
                      reference=MAMBA)


def mamba_default_dt_rank():
    """Δ rank when the config says "auto": ⌈d/16⌉ (Mamba's default)."""
    return ceiling(S.d_model / 16)


def mamba2_layer(scenario) -> StateLayer:
    value = scenario.value
    d, h, p, g, n, k = (S.d_model, S.mamba_heads, S.mamba_head_dim, S.mamba_groups,
                        S.mamba_d_state, S.mamba_d_conv)
    di = h * p
    conv = di + 2 * g * n
    projection = 2 * di + 2 * g * n + h
    params = d * projection + conv * k + 3 * h + di * d
    if value("model.mamba_conv_bias"):
        params += conv
    if value("model.mamba_proj_bias"):
        params += projection + d
    return StateLayer(params=params, norms=di, state_values=h * p * n + (k - 1) * conv,
                      flops_per_token=5 * h * p * n + 2 * k * conv,
                      what="in-projection (z, x, B, C, Δ), convolution, Δ bias, A, D, "
                           "out-projection", reference=MAMBA2)


def projection_layer() -> StateLayer:
    return StateLayer(params=S.d_model**2, norms=0, state_values=0, flops_per_token=0,
                      what="one d×d linear in place of attention", reference=PROJECTION)


#: The layer function of each fixed-state or projection mixer, and its quantity prefix.
STATE_MIXERS = {"lightning": "lightning", "mamba": "mamba", "mamba2": "mamba2",
                "projection": "projection"}


def state_layer(scenario, mixer: str) -> StateLayer:
    """The :class:`StateLayer` of ``mixer`` (lightning, mamba, mamba2, projection)."""
    if mixer == "lightning":
        return lightning_layer()
    if mixer == "mamba":
        return mamba_layer(scenario)
    if mixer == "mamba2":
        return mamba2_layer(scenario)
    return projection_layer()


__all__ = ["LIGHTNING", "MAMBA", "MAMBA2", "PROJECTION", "STATE_MIXERS", "StateLayer",
           "lightning_layer", "mamba2_layer", "mamba_default_dt_rank", "mamba_inner_width",
           "mamba_layer", "projection_layer", "state_layer"]
