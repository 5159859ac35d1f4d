"""The experts' selection where a MoE table's rows leave it out (not a plugin: the kernel
plan adds it beside the grouped MoE kernel).

An engine selects each token's experts after the router's GEMM (the scoring function, a
correction bias, the top-k) in a kernel of its own. Whether a measured MoE row holds it
depends on how the tables' collector timed the experts (:data:`SELECTION_SOURCE`): on
expert ids computed before the timed call, or on router logits through the engine's MoE
module, which selects the experts itself. Where the rows leave it out the selection is
charged beside them, as an elementwise kernel, times the share of the point's measured
configurations read from such rows (:class:`SelectionLeftOut`).
"""

from __future__ import annotations

import re
import weakref

import numpy as np

from infermodel.plugin import S

from .unevaluated import Max

#: How each collector timed the experts (NVIDIA aiconfigurator, collector/<engine>/).
SELECTION_SOURCE = (
    "NVIDIA aiconfigurator collectors: vLLM's collect_moe.py before its rewrite for the 0.24 "
    "tables (commit d5bad971c) called fused_experts, or FlashInfer's routed FP4 kernel, on "
    "topk_weights and topk_ids computed before the timed call, its MXFP4 path the FusedMoE "
    "module on router logits; from the 0.24 tables every format goes through FusedMoE; "
    "collect_moe_xpu.py (Intel XPU) calls the XPU fused MoE on precomputed ids in every "
    "version; TensorRT-LLM's collector passes the router logits to its MoE module; "
    "SGLang's tables are read as timing the selection (its collector calls select_experts "
    "inside the timed op on its Triton path up to 0.5.9; later ones compute the ids ahead "
    "in some cases, which is not charged)")
#: The engines whose CUDA tables left the selection out before a release, and the
#: formats their collector timed through the engine's MoE module even then.
BEFORE = {"vllm": (0, 24)}
TIMED_FORMATS = ("w4a16_mxfp4",)
#: Kernel sources of rows collected on precomputed ids in every release (the XPU
#: collector's).
ALWAYS = ("vllm_xpu_moe",)
_RELEASE = re.compile(r"/(\d+)\.(\d+)[^/]*/[^/]+$")


class SelectionLeftOut:
    """The share of a MoE point's measured rows that leave the experts' selection out: 1
    where every configuration behind the point was read from such rows, 0 where none
    was, their blend weights between. Called on numpy arrays like the lookup it reads
    (one share per distinct configuration, kept).
    """

    def __init__(self, lookup, engine: str) -> None:
        self._lookup = weakref.ref(lookup)
        self.before = BEFORE.get(engine)
        self.always = any(source.startswith(ALWAYS) for source in lookup.kernel_sources)
        self.timed_format = lookup.categories.get("moe_dtype") in TIMED_FORMATS
        self._config_at = [lookup.arguments.index(n) for n in lookup.config_names]
        self._shares: dict[tuple[float, ...], float] = {}

    @property
    def lookup(self):
        found = self._lookup()
        if found is None:
            raise RuntimeError("the MoE lookup behind a selection share is gone")
        return found

    def untimed(self, table: str) -> bool:
        """Whether the rows of ``table`` (a lookup's label of a table folder) leave the
        selection out.
        """
        if self.before is None:
            return False
        if self.always:
            return True
        found = _RELEASE.search(table)
        return (not self.timed_format and found is not None
                and (int(found.group(1)), int(found.group(2))) < self.before)

    def any(self) -> bool:
        """Whether some configuration of the lookup leaves it out."""
        lookup = self.lookup
        return any(self.untimed(t) for t in (lookup.table, *lookup.inherited.values()))

    def share(self, config) -> float:
        key = tuple(float(v) for v in config)
        found = self._shares.get(key)
        if found is None:
            found = self._shares[key] = float(sum(
                w for table, w in self.lookup.read_from(key) if self.untimed(table)))
        return found

    def __call__(self, *args):
        arrays = [np.asarray(a, dtype=float) for a in args]
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        config = [arrays[i] for i in self._config_at]
        if all(c.size == 1 or (c == c.flat[0]).all() for c in config):
            share = self.share([c.flat[0] for c in config])
            return share if not shape else np.full(shape, share)
        stacked = np.stack([np.broadcast_to(c, shape).ravel() for c in config], axis=1)
        unique, inverse = np.unique(stacked, axis=0, return_inverse=True)
        shares = np.array([self.share(row) for row in unique.tolist()])
        return shares[np.asarray(inverse).ravel()].reshape(shape)

    def explain(self, *values: float) -> list[str]:
        config = [values[i] for i in self._config_at]
        tables = "; ".join(f"{t}: {'leaves it out' if self.untimed(t) else 'holds it'}, "
                           f"weight {w:.3g}" for t, w in self.lookup.read_from(config))
        return [f"share of the rows read that time the experts on ids chosen before the timed "
                f"call, so that the selection is charged beside them: {self.share(config):.3g} "
                f"({tables})"]


#: One reading of each lookup per engine, so that a name always means the same function
#: (kept while the lookup lives).
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def selection_left_out(lookup, engine: str) -> SelectionLeftOut | None:
    """The lookup's selection share under ``engine``, or None where every row holds it."""
    kept = _KEPT.setdefault(lookup, {})
    if engine not in kept:
        found = SelectionLeftOut(lookup, engine)
        kept[engine] = found if found.any() else None
    return kept[engine]


def selection_time(kernel, pipeline, phase: str):
    """One MoE layer's selection: an elementwise kernel that reads each token's E scores
    (32-bit) and writes its k expert ids and weights (4 bytes each), about four operations
    a score, at its roofline (the whole stage's tokens over one pipeline stage's cards, as
    the other elementwise kernels) plus the card's fixed time per launch.
    """
    tokens, experts, topk = (kernel.shape[a] for a in ("tokens", "experts", "topk"))
    rate = S[f"flops_effective_{phase}"]
    return (pipeline * Max(4 * tokens * experts / rate,
                           (4 * experts + 8 * topk) * tokens / S.bandwidth)
            + S.elementwise_kernel_latency)


__all__ = ["ALWAYS", "BEFORE", "SELECTION_SOURCE", "TIMED_FORMATS", "SelectionLeftOut",
           "selection_left_out", "selection_time"]
