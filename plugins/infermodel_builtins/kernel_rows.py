"""Which measured rows a kernel's lookup is read from, where they are not simply its own
table's at the release read: a later release's (noted), another format's scaled by the
roofline (DeepEP's MoE rows), or a card of the same architecture's re-collected the way
the engine serves (vLLM's latent attention module), or, where no card of its architecture
was, its own rows less what the two collections differ by on cards that hold both; or its
own rows grown beyond one node of a rack as a card of the same design measured it (a
collective over more GPUs than the rows reach). Not a plugin: :mod:`.kernel_plan` reads
through it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import infermodel.plugin as door

from .engines import ENGINES

if TYPE_CHECKING:
    from .kernel_plan import Setup

#: The experts' format SGLang's DeepEP MoE tables (``deepep_moe_*``, its masked grouped
#: GEMMs behind DeepEP) measure. Behind DeepEP the engine runs the experts in their own
#: format on the tokens each rank receives (NVFP4 experts through FlashInfer's masked
#: grouped GEMM); where the tables do not time that format, these rows are read, scaled
#: by the MoE roofline's ratio between the two formats (:class:`infermodel.kernels.
#: Rescaled`), rather than the grouped kernel's rows, which run every token of the stage
#: as a gathering layout does.
DEEPEP_MEASURED_FORMAT = "fp8_block"
#: What a table's ``collection_meta.yaml`` states where its rows ran the engine's own
#: fused norms (``norm_dispatch``). The package re-collected vLLM's latent attention module
#: rows on B200 so (its note: the earlier rows ran the norms as PyTorch's native chain,
#: which no serving engine runs, 34 % above an in-engine trace of one layer where the
#: re-collected rows are 9 % below it); its other cards' rows of those tables are still
#: the earlier collection. A card of the same architecture whose rows were re-collected
#: so stands in for them (:func:`served_norms`).
SERVED_NORMS = "norm_dispatch"
#: The tables whose native chain is taken off a card's own rows where no card of its
#: architecture was re-collected (:func:`native_chain_offset`): the decode module's, where
#: the chain is a time per call set by its extra launches more than by the card's
#: bandwidth (the median over B300, GB200 and GB300 less B200: 39 µs at one sequence,
#: 73 µs at 1,024), which carries from card to card. Not the prefill module's: there the
#: chain's time grows with the tokens (88 µs at one prompt,
#: 370–390 µs from eight to 128; quartiles 68 µs to 1.0 ms, cells from −11 to +12 ms),
#: work at the card's bandwidth that Blackwell's times do not carry to another card.
FIXED_CHAIN_FAMILIES = ("latent_generation",)

def later(found, st: Setup, notes: list[str] | None) -> None:
    """Note a lookup that a later release's table serves (``kernels.families``: no table
    of the stated release or an older one does); its kernels may be faster than the
    stated release's (on the silicon ledger, points of earlier releases ran slower than
    their prediction from later releases' tables).
    """
    if found.later_than and notes is not None:
        notes.append(f"take {st.engine} {found.version}'s tables, no table of the stated "
                     f"{found.later_than} or older serving them: the stated release's kernels "
                     "may be slower")
    elif (notes is not None and st.moe_backend and found.categories.get("moe_backend")
          and found.version != st.version):
        notes.append(f"time the {st.moe_backend} MoE kernels (efficiency.moe_backend) from "
                     f"{st.engine} {found.version}'s table, the newest at or below "
                     f"{st.version} that measured them")


def deepep_rescaled(st: Setup, family: str, spec, attempts: list[dict],
                     notes: list[str] | None):
    """(DeepEP's MoE rows in :data:`DEEPEP_MEASURED_FORMAT`, scaled to the experts' own
    format by the roofline ratio; the categories it is read at), or None where those rows
    do not serve either.
    """
    kernels = door.kernels
    for attempt in attempts:
        wanted = attempt.get("dtype")
        if not wanted or wanted == DEEPEP_MEASURED_FORMAT:
            continue
        measured = {**attempt, "dtype": DEEPEP_MEASURED_FORMAT}
        source = kernels.lookup(st.system, st.engine, st.version, family, **measured)
        if not isinstance(source, kernels.Lookup):
            continue
        found = ENGINES.get(st.engine or "")
        engine = found.label if found is not None else st.engine
        why = (f"{engine}'s DeepEP MoE kernel for {wanted} experts is in no table (its "
               f"wide-EP tables time {DEEPEP_MEASURED_FORMAT} experts only)")
        if notes is not None:
            notes.append(f"{why}: their {DEEPEP_MEASURED_FORMAT} rows stand in, scaled to "
                         f"{wanted} by the MoE roofline's ratio between the formats (the "
                         "measured kernel's share of its roofline kept)")
        # One object per source and format, kept with the source (kernels.lookup keeps
        # its lookups): a tabulated function's name must keep meaning the same table.
        kept = source.rescaled
        key = tuple(sorted(attempt.items()))
        if key not in kept:
            roofline, describe = spec.roofline(attempt, kernels.card(st.system))
            kept[key] = kernels.Rescaled(source, attempt, roofline, describe, why, measured)
        return kept[key], {**attempt, "from": DEEPEP_MEASURED_FORMAT}
    return None


def served_norms(st: Setup, family: str, spec, chosen: dict, found, notes: list[str] | None):
    """(the rows of a card of the same architecture re-collected with the engine's fused
    norms, scaled to this card by the family's roofline ratio; the categories they are read
    at), where this card's own rows of the table ran the native chain (:data:`SERVED_NORMS`)
    and such a card's do; else None. Where no such card's do, the own rows are read, noted.
    """
    kernels = door.kernels
    engine = st.engine or ""
    if kernels.collection_field(st.system, engine, found.version, family, SERVED_NORMS):
        return None
    arch = kernels.architecture(st.system)
    # Only rows of the very release read (a later release's own rows on this card may
    # already be collected so, unstated).
    served = [other for other in kernels.systems()
              if other != st.system and kernels.collection_field(
                  other, engine, found.version, family, SERVED_NORMS, exact=True)]
    if not served:
        return None
    label = ENGINES[engine].label if engine in ENGINES else engine
    why = (f"{label}'s {spec.table} rows on {st.system} ran the norms as PyTorch's native "
           f"chain, which the engine does not serve (the package re-collected "
           f"{', '.join(served)}'s with the engine's fused norms: the earlier rows read 34 % "
           "above an in-engine trace of one layer, the re-collected ones 9 % below it)")
    for other in served:
        if arch is None or kernels.architecture(other) != arch:
            continue
        source = kernels.lookup(other, engine, found.version, family, **chosen)
        if not isinstance(source, kernels.Lookup):
            continue
        if notes is not None:
            notes.append(f"{why}: {other}'s rows, a card of the same architecture, stand in, "
                         "scaled by the roofline's ratio between the two cards")
        # One object per card and categories, kept with the rows read (as the DeepEP rows'):
        # a tabulated function's name must keep meaning the same table.
        key = ("cards", st.system, tuple(sorted(chosen.items())))
        if key not in source.rescaled:
            roofline, describe = spec.roofline(chosen, kernels.card(st.system))
            source.rescaled[key] = kernels.Rescaled(source, {**chosen, "card": st.system},
                                                    roofline, describe, why,
                                                    {**chosen, "card": other})
        return source.rescaled[key], {**chosen, "rows": other}
    offset = native_chain_offset(st, family, spec, chosen, found, served, why, notes)
    if offset is not None:
        return offset
    if notes is not None:
        reason = ("and the chain's time in them grows with the tokens, at a card's bandwidth, "
                  "so the cards that hold them both ways do not measure it for this one"
                  if family not in FIXED_CHAIN_FAMILIES else
                  "and no card holds them both ways")
        notes.append(f"{why}: no card of its architecture holds re-collected rows of these "
                     f"kernels, {reason}: they are read as they are")
    return None


def native_chain_offset(st: Setup, family: str, spec, chosen: dict, found, served: list[str],
                        why: str, notes: list[str] | None):
    """(this card's own rows less the native chain's time, as cards of a re-collected
    card's architecture measured it at the same point: the median of their earlier rows
    of the same release less its re-collected ones; the categories they are read at),
    where no card of this card's architecture was re-collected (:func:`served_norms`) and
    the table is one of :data:`FIXED_CHAIN_FAMILIES`; else None.
    """
    if family not in FIXED_CHAIN_FAMILIES:
        return None
    kernels = door.kernels
    engine = st.engine or ""
    for other in served:
        arch = kernels.architecture(other)
        without = kernels.lookup(other, engine, found.version, family, **chosen)
        if arch is None or not isinstance(without, kernels.Lookup):
            continue
        earlier = {}
        for card in kernels.systems():
            if card in (other, st.system) or kernels.architecture(card) != arch:
                continue
            rows = kernels.lookup(card, engine, found.version, family, **chosen)
            if (isinstance(rows, kernels.Lookup) and rows.version == found.version
                    and not rows.later_than and not kernels.collection_field(
                        card, engine, found.version, family, SERVED_NORMS, exact=True)):
                earlier[card] = rows
        if not earlier:
            continue
        key = ("native chain", st.system, tuple(sorted(chosen.items())))
        offset = found.rescaled.get(key)
        if not isinstance(offset, kernels.Offset):
            roofline, describe = spec.roofline(chosen, kernels.card(st.system))
            offset = found.rescaled[key] = kernels.Offset(
                found, earlier, without, other, roofline, describe,
                f"{why}: the native chain's time taken off", {**chosen, "offset": f"less_{other}"})
        if notes is not None:
            notes.append(f"{why}: no card of its architecture holds re-collected rows, so "
                         "these rows are read less the native chain's time at each point as "
                         f"the compute-capability-{arch}.x cards measure it (the median of "
                         f"the rows of {offset.cards_named} of the same release "
                         f"less {other}'s re-collected ones: a time per call set by the "
                         "chain's launches, taken to cost this card the same; the derivation "
                         "gives it at the point)")
        return offset, {**chosen, "offset": f"less_{other}"}
    return None


def _rack(system: str) -> tuple[float, float] | None:
    """(GPUs per node, GPUs per rack) of a card whose rack is one NVLink domain: its
    datasheet states more GPUs a rack than a node and an inter-node bandwidth as high as
    the intra-node one (GB200's and GB300's NVL72: 4 and 72, 900 GB/s both); else None
    (a node reached over InfiniBand or PCIe, or a card that states no rack).
    """
    card = door.kernels.card(system)
    node, rack = card.get("num_gpus_per_node"), card.get("num_gpus_per_rack")
    inter, intra = card.get("inter_node_bw"), card.get("intra_node_bw")
    if node and rack and rack > node and inter and intra and inter >= intra:
        return node, rack
    return None


def beyond_node(st: Setup, family: str, spec, chosen: dict, found):
    """(this card's rows grown beyond their largest GPU count as a card of the same rack
    measured the growth; the categories they are read at), where the rows of a collective
    stop within one node of a rack that is one NVLink domain and a card of the same
    architecture and rack (the same GPUs a node and a rack) measured more GPUs in the same
    release of the same library, naming the kernels these rows name at their edge and,
    beyond it, one they never ran — the one the engine runs across nodes
    (:class:`infermodel.kernels.Extended`); else None.

    The roofline ratio a lookup extends its grid by carries the bytes and steps of the
    kernel it was measured with, not the one the engine runs across nodes: TensorRT-LLM
    1.3's all-reduce over eight GB300s of an NVL72 (two trays; its rows name the MNNVL
    kernel) measures 0.53–0.81× its time over four at 1–16 MiB messages, where the ratio
    gives 1.08–1.16×. Rows that name only how they were launched (SGLang 0.5.14's on GB300:
    its collection note says the kernel that ran across nodes was not recorded) do not say
    what a deployment runs there, and are not read so.
    """
    kernels = door.kernels
    if "gpus" not in spec.configs or not st.system:
        return None
    rack = _rack(st.system)
    edge = found.measured_values("gpus")[-1]
    if rack is None or edge > rack[0]:
        return None
    arch = kernels.architecture(st.system)
    engine = st.engine or ""
    reach: list[tuple[float, str, Any, list[str]]] = []
    for other in kernels.systems():
        if (other == st.system or arch is None or kernels.architecture(other) != arch
                or _rack(other) != rack):
            continue
        rows = kernels.lookup(other, engine, found.version, family, **chosen)
        if (not isinstance(rows, kernels.Lookup) or rows.version != found.version
                or rows.later_than or rows.measured_values("gpus")[-1] <= edge):
            continue
        # The same kernels at the edge, and beyond it one these rows never ran.
        theirs, ours = rows.kernels_along("gpus"), found.kernels_along("gpus")
        ran = set().union(*(k for n, k in theirs.items() if n > edge)) - ours[edge]
        if theirs.get(edge) == ours[edge] and ran:
            reach.append((-rows.measured_values("gpus")[-1], other, rows, sorted(ran)))
    if not reach:
        return None
    _, other, rows, ran = min(reach, key=lambda r: (r[0], r[1]))
    key = ("beyond the node", other)
    extended = found.rescaled.get(key)
    if not isinstance(extended, kernels.Extended):
        # NCCL's tables serve every engine at their own newest release.
        label = (spec.engine.upper() if spec.engine else
                 ENGINES[engine].label if engine in ENGINES else engine)
        why = (f"{label} {found.version}'s {spec.table} rows on {st.system} stop at "
               f"{edge:g} GPUs, within one node of a rack that is one NVLink domain; "
               f"{other}, a card of the same architecture and rack, measured more in the "
               f"same release with the kernel the engine runs across nodes "
               f"({', '.join(ran)}), and its growth from there stands in for the roofline "
               "ratio")
        extended = found.rescaled[key] = kernels.Extended(found, rows, other, "gpus", why)
    return extended, {**chosen, "beyond": other}


def rows_read(st: Setup, family: str, spec, chosen: dict, found, notes: list[str] | None):
    """(the rows a found lookup is read from, their categories): its own, noted where a
    later release's serve (:func:`later`), a same-architecture card's that time the
    engine's own norms (:func:`served_norms`), or its own grown beyond one node as a card
    of the same rack design measured it (:func:`beyond_node`; stated where a point lies
    beyond them, as the grid's edge is).
    """
    later(found, st, notes)
    if isinstance(found, door.kernels.Lookup):
        served = served_norms(st, family, spec, chosen, found, notes)
        if served is not None:
            return served
        wider = beyond_node(st, family, spec, chosen, found)
        if wider is not None:
            return wider
    return found, chosen


__all__ = ["DEEPEP_MEASURED_FORMAT", "FIXED_CHAIN_FAMILIES", "SERVED_NORMS", "beyond_node",
           "deepep_rescaled", "later", "native_chain_offset", "rows_read", "served_norms"]
