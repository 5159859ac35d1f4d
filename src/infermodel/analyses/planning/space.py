"""The space a plan searches, as data: layout degrees, serving engines, and candidates.

A **candidate** is one server's configuration — a card, an engine, a layout (a degree
for each entry of :data:`DEGREES`), and either one colocated server per replica or a
disaggregated unit of prefill and decode servers — whose replica count the plan then
finds.  Everything a candidate changes in the scenario is a ``--set`` override
(:meth:`Candidate.overrides`), so that ``infermodel simulate`` with those overrides and
``--replicas N`` reproduces exactly what the plan simulated.

**Adding a layout degree is data.**  :data:`DEGREES` lists each degree: the ``[plan]``
key that lists its values, its name in JSON, the scenario field it sets, whether it
multiplies the GPUs of a server, and each engine's launch flag for it.  The ``[plan]``
table's schema, the candidates, the overrides, the JSON and the launch lines are all
built from this list.  Expert parallelism and data-parallel attention become candidates
by adding their entries once a lever declares their fields.

**Engines are data too.**  :data:`ENGINES` gives each engine its efficiency preset (the
most specific one available: ``trtllm-h100-sxm`` before ``trtllm``), its memory rules
(``efficiency.engine``), its scheduler's defaults by card memory (the token budget of
an iteration and the most sequences running; a stand-in where a candidate's evaluated
engine settings give none), its launch command, and the card vendors
it runs on (a hardware preset's ``generation`` begins with its vendor).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

GIB = 1024**3

# ---------------------------------------------------------------------------------
# Layout degrees
# ---------------------------------------------------------------------------------


@attrs.frozen
class Degree:
    """One layout degree a plan can vary.

    :param key: the ``[plan]`` key listing its values (``tensor = [1, 2, 4, 8]``).
    :param json: its name in ``plan --format json`` (``tp``).
    :param setting: the lever setting it sets (``tensor`` of ``levers.parallelism``).
    :param multiplies_gpus: whether a server's GPUs are the product of this degree with
        the others' (tensor, attention-data and pipeline do; expert parallelism spreads
        the experts over the same cards).
    :param flags: each engine's launch flag that takes the degree as its value.
    :param switches: each engine's launch flag written alone when the degree exceeds 1
        (vLLM's ``--enable-expert-parallel``, whose size follows the other degrees).
    :param default: the values tried when ``[plan]`` lists none (None: the scenario's
        own setting only).
    """

    key: str
    json: str
    setting: str
    multiplies_gpus: bool
    flags: Mapping[str, str]
    default: tuple[int, ...] | None = None
    description: str = ""
    switches: Mapping[str, str] = attrs.field(factory=dict)
    lever: str = "parallelism"

    @property
    def field(self) -> str:
        """The scenario field this degree sets."""
        return f"levers.{self.lever}.{self.setting}"

    def engines(self) -> set[str]:
        """Engines that can launch this degree above 1."""
        return set(self.flags) | set(self.switches)


#: The degrees a plan varies.  Tensor parallel degrees are tried over powers of two up
#: to a server of eight cards unless listed; pipeline stages are 1 unless listed; expert
#: parallelism and data-parallel attention (the parallelism lever's layouts, for
#: mixture-of-experts models) keep the scenario's own unless listed.  A server's cards
#: are tensor × attention_data × pipeline; the expert degree divides them.
DEGREES: tuple[Degree, ...] = (
    Degree("tensor", "tp", "tensor", True,
           {"vllm": "--tensor-parallel-size", "sglang": "--tp-size", "trtllm": "--tp_size"},
           (1, 2, 4, 8), "tensor-parallel degrees (cards splitting every layer)"),
    Degree("pipeline", "pp", "pipeline", True,
           {"vllm": "--pipeline-parallel-size", "sglang": "--pp-size", "trtllm": "--pp_size"},
           (1,), "pipeline stages (cards each holding a run of layers)"),
    Degree("attention_data", "dp", "attention_data", True,
           {"vllm": "--data-parallel-size", "sglang": "--dp-size"}, None,
           "data-parallel attention ranks (each keeps the cache of its own sequences)",
           switches={"sglang": "--enable-dp-attention"}),
    Degree("expert", "ep", "expert", False,
           {"sglang": "--ep-size", "trtllm": "--ep_size"}, None,
           "expert-parallel ranks (the routed experts split over the cards)",
           switches={"vllm": "--enable-expert-parallel"}),
)

#: Degrees JSON always names, 1 when the plan does not vary them.
JSON_DEGREES = ("tp", "pp", "ep", "dp")


# ---------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------


@attrs.frozen
class Budget:
    """A scheduler default of an engine: from ``min_memory`` (GiB per card) up, cards
    not named in ``except_cards``, an iteration takes at most ``tokens`` tokens and
    ``running`` sequences.
    """

    min_memory: float
    tokens: int
    running: int
    except_cards: tuple[str, ...] = ()


@attrs.frozen
class EngineSpec:
    """A serving engine as a plan uses it.

    :param name: the name ``[plan] engines`` lists.
    :param memory: the ``efficiency.engine`` whose memory rules apply.
    :param presets: efficiency presets, most specific first; ``{hardware}`` is the card.
    :param budgets: scheduler defaults by card memory, first match wins.
    :param command: the launch command's words before the flags, ``{checkpoint}`` filled.
    :param version: the engine version whose flag names the launch line follows, and
        where they are documented.
    :param vendors: the card vendors it runs on, as the hardware presets' ``generation``
        begins (``nvidia`` of ``nvidia-hopper``); empty: any card.
    :param vendor_source: where the vendors are documented.
    """

    name: str
    memory: str
    presets: tuple[str, ...]
    budgets: tuple[Budget, ...]
    command: tuple[str, ...]
    version: str
    flags: Mapping[str, str]
    source: str
    vendors: tuple[str, ...] = ()
    vendor_source: str = ""

    def runs_on(self, generation: str | None) -> bool:
        """Whether it runs on a card of ``generation`` (a preset's ``generation``; one
        that states none is not ruled out).

        >>> ENGINES["trtllm"].runs_on("amd-cdna3"), ENGINES["trtllm"].runs_on("nvidia-hopper")
        (False, True)
        """
        return (not self.vendors or not generation
                or generation.split("-")[0] in self.vendors)

    def budget(self, card: str, card_memory: float) -> Budget:
        """The scheduler defaults on a card of ``card_memory`` bytes."""
        for budget in self.budgets:
            if card_memory >= budget.min_memory * GIB and not any(
                    card.startswith(name) for name in budget.except_cards):
                return budget
        return self.budgets[-1]

    def preset(self, card: str, available: Sequence[str]) -> str | None:
        """The most specific efficiency preset this engine has for ``card``."""
        for pattern in self.presets:
            name = pattern.format(hardware=card)
            if name in available:
                return name
        return None


ENGINES: dict[str, EngineSpec] = {
    "vllm": EngineSpec(
        "vllm", "vllm", ("vllm",),
        # vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults: the API server on
        # cards of 70 GiB or more (A100 excepted) batches 8,192 tokens and 1,024
        # sequences an iteration; smaller cards 2,048 and 256.
        (Budget(70, 8192, 1024, ("a100",)), Budget(0, 2048, 256)),
        ("vllm", "serve", "{checkpoint}"),
        "vLLM 0.8.5 engine arguments (docs.vllm.ai/en/v0.8.5/serving/engine_args.html)",
        {"tokens": "--max-num-batched-tokens", "running": "--max-num-seqs",
         "memory": "--gpu-memory-utilization", "quantization": "--quantization",
         "kv_cache": "--kv-cache-dtype"},
        "vLLM EngineArgs.get_batch_defaults (max_num_batched_tokens, max_num_seqs by card memory)",
        ("nvidia", "amd", "google", "intel", "cpu"),
        "vLLM installation guide: NVIDIA CUDA, AMD ROCm, Intel XPU and Gaudi, Google TPU, AWS "
        "Neuron and CPUs; on Apple silicon its CPU backend only, not the GPU an apple card "
        "preset describes"),
    "sglang": EngineSpec(
        "sglang", "sglang", ("sglang",),
        # sglang/srt/server_args.py since 0.5.3: chunked_prefill_size 2,048 below 35 GiB,
        # 4,096 below 60 GiB, 8,192 below 160 GiB (H100, H200), 16,384 above (MI300X,
        # B200); running requests bounded by the KV pool (the simulator's cache bounds them
        # here). A stand-in only: a candidate's evaluated engine settings come first.
        (Budget(160, 16384, 4096), Budget(60, 8192, 4096), Budget(35, 4096, 4096),
         Budget(0, 2048, 4096)),
        ("python", "-m", "sglang.launch_server", "--model-path", "{checkpoint}"),
        "SGLang server arguments (docs.sglang.io/advanced_features/server_arguments.html)",
        {"tokens": "--chunked-prefill-size", "running": "--max-running-requests",
         "memory": "--mem-fraction-static", "quantization": "--quantization",
         "kv_cache": "--kv-cache-dtype"},
        "SGLang ServerArgs (chunked_prefill_size by card memory)",
        ("nvidia", "amd", "google", "intel", "cpu"),
        "SGLang documentation, 'Hardware Platforms': NVIDIA and AMD GPUs, TPUs, Intel XPUs, CPU "
        "servers and Ascend NPUs; Intel Gaudi per Intel's Gaudi documentation"),
    "trtllm": EngineSpec(
        "trtllm", "tensorrt-llm", ("trtllm-{hardware}", "trtllm"),
        # TensorRT-LLM's build defaults: max_num_tokens 8,192, max_batch_size 2,048.
        (Budget(0, 8192, 2048),),
        ("trtllm-serve", "{checkpoint}"),
        "TensorRT-LLM 0.18 trtllm-serve options "
        "(nvidia.github.io/TensorRT-LLM/0.18.2/commands/trtllm-serve.html)",
        {"tokens": "--max_num_tokens", "running": "--max_batch_size",
         "memory": "--kv_cache_free_gpu_memory_fraction"},
        "TensorRT-LLM BuildConfig defaults (max_num_tokens 8192, max_batch_size 2048)",
        ("nvidia",),
        "TensorRT-LLM documentation, 'Supported Hardware': NVIDIA Blackwell, Hopper, Ada "
        "Lovelace and Ampere GPUs"),
}


# ---------------------------------------------------------------------------------
# Pools and candidates
# ---------------------------------------------------------------------------------


@attrs.frozen
class Pools:
    """Colocated servers (``prefill = decode = 0``), or a disaggregated unit of
    ``prefill`` prompt servers and ``decode`` generation servers (``"1P2D"``).
    """

    prefill: int = 0
    decode: int = 0

    @property
    def disaggregated(self) -> bool:
        return self.prefill > 0

    @property
    def servers(self) -> int:
        """Servers in one replica (one unit)."""
        return self.prefill + self.decode if self.disaggregated else 1

    @property
    def label(self) -> str:
        return f"{self.prefill}P{self.decode}D" if self.disaggregated else "aggregated"


@attrs.frozen
class Candidate:
    """One server configuration (or disaggregated unit) whose replicas a plan counts."""

    hardware: str
    engine: str
    degrees: Mapping[str, int] = attrs.field(converter=lambda d: dict(sorted(d.items())))
    pools: Pools = Pools()

    @property
    def gpus_per_server(self) -> int:
        return math.prod(self.degrees[d.key] for d in DEGREES if d.multiplies_gpus
                         and d.key in self.degrees)

    @property
    def gpus(self) -> int:
        """GPUs of one replica: its servers times their cards."""
        return self.gpus_per_server * self.pools.servers

    def json_degrees(self) -> dict[str, int]:
        """``{"tp": 4, "pp": 1, "ep": 1, "dp": 1}``: every degree JSON names."""
        out = dict.fromkeys(JSON_DEGREES, 1)
        for degree in DEGREES:
            if degree.key in self.degrees:
                out[degree.json] = self.degrees[degree.key]
        return out

    @property
    def layout(self) -> str:
        """``TP4`` / ``TP2 PP2`` / ``TP1 DP8 EP8`` / ``TP4 1P2D``: the layout in words."""
        shown = [f"{d.json.upper()}{self.degrees[d.key]}" for d in DEGREES
                 if d.key in self.degrees and (self.degrees[d.key] > 1 or d.key == "tensor")]
        if self.pools.disaggregated:
            shown.append(self.pools.label)
        return " ".join(shown)

    @property
    def label(self) -> str:
        return f"{self.hardware} {self.engine} {self.layout}"

    def layout_overrides(self) -> dict[str, Any]:
        """The fields a server of this candidate sets: card, count, degrees."""
        out: dict[str, Any] = {"hardware.preset": self.hardware,
                               "hardware.count": self.gpus_per_server}
        for degree in DEGREES:
            if degree.key in self.degrees:
                out[degree.field] = self.degrees[degree.key]
        return out


def parse_pools(text: str) -> Pools | None:
    """``"aggregated"`` or ``"xPyD"`` (``"1P2D"``) as :class:`Pools`; None otherwise.

    >>> parse_pools("1P2D"), parse_pools("aggregated").disaggregated
    (Pools(prefill=1, decode=2), False)
    """
    if text == "aggregated":
        return Pools()
    head, p, rest = text.upper().partition("P")
    count, d, tail = rest.partition("D")
    if not (p and d and not tail and head.isdigit() and count.isdigit()):
        return None
    prefill, decode = int(head), int(count)
    return Pools(prefill, decode) if prefill >= 1 and decode >= 1 else None


def candidates(hardware: Sequence[str], engines: Sequence[str], degrees: Mapping[str, Sequence[int]],
               pools: Sequence[Pools], max_gpus: int) -> list[Candidate]:
    """Every combination, in a fixed order, whose one replica fits within ``max_gpus``."""
    import itertools

    keys = [d.key for d in DEGREES if d.key in degrees]
    out = []
    for card, engine in itertools.product(hardware, engines):
        for values in itertools.product(*(degrees[k] for k in keys)):
            for pool in pools:
                candidate = Candidate(card, engine, dict(zip(keys, values)), pool)
                if candidate.gpus <= max_gpus:
                    out.append(candidate)
    return out


__all__ = ["DEGREES", "ENGINES", "JSON_DEGREES", "Budget", "Candidate", "Degree", "EngineSpec",
           "Pools", "candidates", "parse_pools"]
