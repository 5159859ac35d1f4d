"""What a kernel's table lookup reads (not a plugin: :mod:`.kernel_plan` asks): the
table dtypes a scenario's number formats map to (GEMM, MoE, cache), the number format of
each weight class a kernel names, the table families an engine's kernel is read from, in
the order to try them, and the categories to read each at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import infermodel.plugin as door

from .quantization import effective_lever, weight_formats

if TYPE_CHECKING:
    from .kernel_plan import Setup

__all__ = ["FOLLOW_LINEAR", "MXFP4_WEIGHT_ONLY", "WEIGHT_CLASSES", "categories", "families_of",
           "formats_of", "gemm_dtype", "moe_dtype", "weight_class_format"]

#: The MoE table's dtype of MXFP4 experts run weight-only (16-bit activations).
MXFP4_WEIGHT_ONLY = "w4a16_mxfp4"


def _fp8(fmt) -> bool:
    return fmt.bits == 8 and fmt.kind == "float"


def gemm_dtype(fmt, activations) -> str | None:
    """The GEMM table's dtype for weights in ``fmt`` (None: no table measures it).

    >>> from infermodel_builtins.formats import NAMED_FORMATS as F
    >>> [gemm_dtype(F[n], None) for n in ("bf16", "fp8-e4m3", "fp8-b128", "int4-g128", "nvfp4")]
    ['bfloat16', 'fp8', 'fp8_block', 'int4_wo', 'nvfp4']
    """
    return _table_dtype(fmt, fp4=None, int8="sq" if activations == "int8" else "int8_wo")


def moe_dtype(fmt, mxfp4: str = MXFP4_WEIGHT_ONLY) -> str | None:
    """The MoE table's dtype for experts in ``fmt`` (None: no table measures it); MXFP4
    experts read ``mxfp4`` (:attr:`Setup.mxfp4_experts`).

    >>> from infermodel_builtins.formats import NAMED_FORMATS as F
    >>> [moe_dtype(F[n]) for n in ("bf16", "fp8-b128", "nvfp4", "mxfp4")]
    ['bfloat16', 'fp8_block', 'nvfp4', 'w4a16_mxfp4']
    >>> moe_dtype(F["mxfp4"], "w4a8_mxfp4_mxfp8")
    'w4a8_mxfp4_mxfp8'
    """
    return _table_dtype(fmt, fp4=mxfp4, int8=None)


def _table_dtype(fmt, *, fp4: str | None, int8: str | None) -> str | None:
    """The GEMM and MoE tables' shared reading of a format: 16 bits and more, FP8 per
    tensor or in blocks, NVFP4, 4-bit integers weight-only; other 4-bit floats read
    ``fp4`` and 8-bit integers ``int8`` (None: no table measures them).
    """
    if fmt.bits >= 16:
        return "bfloat16"
    if _fp8(fmt):
        return "fp8_block" if (fmt.block_side or fmt.granularity == "group") else "fp8"
    if fmt.kind == "float" and fmt.bits == 4:
        return "nvfp4" if fmt.group_size == 16 else fp4
    if fmt.kind == "int" and fmt.bits == 8:
        return int8
    if fmt.kind == "int" and fmt.bits == 4:
        return "int4_wo"
    return None


def formats_of(scenario):
    """(weight class -> number format, activation format, cache format).

    Beside the lever's classes, the kernels' own: ``"attention"`` (an attention layer's
    projections), ``"latent"`` (latent attention's projections but its output, and the
    absorbed BMMs made of them) and ``"mixers"`` (the projections of the layers without
    attention) take the block linears' format, or 16 bits where the checkpoint keeps
    their group out of it (``model.unquantized``, when the block linears take the
    checkpoint's format: :func:`.quantization_classes.router_kept`).
    """
    from .formats import NAMED_FORMATS
    from .quantization_classes import kept_groups, router_kept

    lever = effective_lever(scenario)
    named = weight_formats(scenario, lever) if lever is not None else {}
    formats = {k: f for k, (f, _why) in named.items()}
    if "linear" in formats:
        kept = kept_groups(scenario) if router_kept(scenario, named) else set()
        for group in ("attention", "latent", "mixers"):
            formats[group] = NAMED_FORMATS["bf16"] if group in kept else formats["linear"]
    activations = getattr(lever, "activations", None)
    kv = getattr(lever, "kv_cache", None)
    return formats, activations, kv


#: Weight classes a kernel may name that take the block linears' format where the lever
#: gives them none of their own (experts sharing the linears' format, the groups of
#: :func:`formats_of`).
FOLLOW_LINEAR = ("experts", "down", "attention", "latent", "mixers")
#: Every weight class a kernel may name.
WEIGHT_CLASSES = ("linear", "embedding", "norm", *FOLLOW_LINEAR)


def weight_class_format(formats, name):
    """The number format of weight class ``name`` (16-bit for None), or why there is none
    (a name no class has: the kernel keeps its roofline, warned, rather than reading the
    16-bit tables in silence).
    """
    from .formats import NAMED_FORMATS

    bf16 = NAMED_FORMATS["bf16"]
    if name is None:
        return bf16
    if name in formats:
        return formats[name]
    if name in FOLLOW_LINEAR:
        return formats.get("linear", bf16)
    if name in WEIGHT_CLASSES:
        return bf16
    return f"unknown weight class {name!r} (known: {', '.join(WEIGHT_CLASSES)})"


def _cache(kv):
    if kv is None or kv.bits >= 16:
        return "bfloat16"
    return "fp8" if _fp8(kv) else None


def families_of(kernel, st: Setup, phase: str) -> tuple[str, ...]:
    """The table families to read a kernel from under the scenario's engine, in the order
    to try them: SGLang's expert all-to-all is DeepEP's own tables (low-latency in
    decode, normal in prefill), and behind it the routed experts run DeepEP's own MoE
    kernel (its masked grouped GEMMs, ``deepep_moe_*``: experts in a format those tables
    do not measure read their block-FP8 rows scaled by the roofline ratio,
    :func:`.kernel_plan.kernel_time`), the grouped MoE kernel only where no DeepEP row
    serves; TensorRT-LLM's all-to-all is its NVLink kernel.
    """
    decode = phase == "decode"
    if kernel.family in ("dispatch", "combine") and st.engine == "sglang":
        return (f"deepep_{kernel.family}_{'ll' if decode else 'normal'}",)
    if kernel.family == "moe" and st.engine == "sglang" and st.all_to_all:
        return (f"deepep_moe_{'generation' if decode else 'context'}", "moe")
    if kernel.family in ("dispatch", "combine", "prepare") and st.engine == "trtllm":
        # TensorRT-LLM's all-to-all is its own NVLink kernel over a rack's multi-node
        # NVLink (measured on GB200); its DeepEP path is opt-in (TRTLLM_CAN_USE_DEEP_EP),
        # so its DeepEP rows do not stand in for it.
        return (f"nvlink_{kernel.family}",)
    return (kernel.family,)


def categories(kernel, formats, activations, kv, st: Setup | None = None,
               phase: str = "decode", family: str | None = None) -> list[dict] | str:
    """The categories to read a kernel's table at (its ``family``'s; default the
    kernel's own), in the order to try them, or why no table measures it.
    """
    from .formats import NAMED_FORMATS

    bf16 = NAMED_FORMATS["bf16"]
    family = family or kernel.family
    # A stated MoE runner restricts the grouped-MoE tables; SGLang's DeepEP tables time
    # their own kernel (deepepmoe) and are read as they are.
    runner = st.moe_backend if family == "moe" and st is not None else ""
    fmt = weight_class_format(formats, kernel.weights)
    if isinstance(fmt, str):
        return fmt
    if family.startswith("nvlink_"):
        # By the experts' dtype (the activations go out quantised as the experts run
        # them: 8-bit for FP8 and MXFP8-activation experts, 16-bit for weight-only ones);
        # a dispatch's option says which kernel, the combine takes the one-sided kernel
        # where measured, else the two-sided one; a prepare step is the two-sided one's.
        experts = formats.get("experts", formats.get("linear", bf16))
        named = moe_dtype(experts, st.mxfp4_experts if st is not None else MXFP4_WEIGHT_ONLY)
        wire = ("fp8" if named and (named.startswith("fp8") or "mxfp8" in named)
                else "nvfp4" if named == "nvfp4" else "bfloat16")
        sources = {"one-sided": ("NVLinkOneSided",), "two-sided": ("NVLinkTwoSided",)}.get(
            kernel.option, ("NVLinkOneSided", "NVLinkTwoSided"))
        if family == "nvlink_prepare":
            sources = ("NVLinkTwoSided",)
        return [{"dtype": wire, "source": s} for s in sources]
    family = kernel.family
    if family == "gemm":
        dtype = gemm_dtype(fmt, activations)
        return [{"dtype": dtype}] if dtype else f"no measured GEMM for weights in {fmt.name or 'this format'}"
    if family in ("context_attention", "generation_attention", "mla_context", "mla_generation",
                  "latent_context", "latent_generation"):
        cache = _cache(kv)
        if cache is None:
            return f"no measured attention over a {kv.name or 'this'} cache"
        if family.startswith("latent"):
            output = formats.get("attention", fmt)
            if output != fmt:
                # The module is measured with every projection in one format.
                return (f"no measured latent attention module with {fmt.name} projections "
                        f"and a {output.name} output projection")
            dtype = gemm_dtype(fmt, activations)
            if dtype not in ("bfloat16", "fp8_block"):
                return (f"no measured latent attention module with {dtype or fmt.name} "
                        "projections (bf16 and block-scaled FP8 are measured)")
            return [{"kv_dtype": cache, "gemm": dtype}]
        return [{"kv_dtype": cache}]
    if family.startswith("mla_bmm"):
        return ([{"dtype": "fp8"}, {"dtype": "bfloat16"}] if _fp8(fmt) else [{"dtype": "bfloat16"}])
    if family == "moe":
        fmt = formats.get("experts", formats.get("linear", bf16))
        dtype = moe_dtype(fmt, st.mxfp4_experts if st is not None else MXFP4_WEIGHT_ONLY)
        if not dtype:
            return f"no measured MoE kernel for experts in {fmt.name or 'this format'}"
        backend = {"moe_backend": runner} if runner else {}
        return [{"dtype": dtype, "distribution": d, **backend}
                for d in door.kernels.MOE_DISTRIBUTIONS]
    if family.startswith("nccl_"):
        return [{"dtype": "half"}]
    if family in ("dispatch", "combine") and st is not None:
        # DeepEP: low-latency kernels in decode, high-throughput ones in prefill, at the
        # backend's default wire format (TensorRT-LLM's all-to-all: the NVLink families).
        mode = "ll" if phase == "decode" else "ht"
        return [{"backend": f"deepep_{mode}", "dtype": "default"}]
    return [{}]
