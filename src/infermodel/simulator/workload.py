"""Seeded request streams: Poisson (or gamma) arrivals and prompt/output lengths drawn from
the laws of :mod:`.lengths`.

A :class:`WorkloadSpec` names the number of requests and the two length laws; its
:meth:`~WorkloadSpec.generate` draws one :class:`Workload` for a nominal arrival rate and
a seed.  The same seed gives the same lengths at every rate and for every policy, so a
policy comparison isolates scheduling (Module 10: Inference and serving, Lab 3).

Two samplers are available:

``"lab"`` (the default, *lab-compatible*)
    Python's :class:`random.Random` seeded with ``seed``; for each request in turn it
    draws the gap ``expovariate(rate)``, then the prompt length, then the output length.
    A uniform law draws ``randint(low, high)``, a clipped log-normal
    ``min(max, max(min, int(lognormvariate(mu, sigma))))``, an empirical law
    ``values[randrange(len(values))]`` and a fixed law draws nothing.  With
    :meth:`WorkloadSpec.lab3` and seed 0 this is exactly the sequence of Module 10's
    Lab 3, so its printed table can be matched cell by cell.
``"numpy"``
    :func:`numpy.random.default_rng` with independent child streams for gaps, prompts
    and outputs, drawn in bulk (faster for very long workloads).

The realised rate of a finite sample is ``count / last arrival``; at nominal 0.2/s
Lab 3's 300 requests realise about 0.224/s.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import numpy.typing as npt

from infermodel.errors import close_match

from .errors import SimulationError
from .lengths import (
    MAX_LENGTH,
    AnyLaw,
    EmpiricalLength,
    FixedLength,
    LengthLaw,
    LogNormalLength,
    UniformLength,
    check_float,
    check_int,
    expected_max,
    length_law,
    static_slot_use,
)
from .window import refuse_window, within_window

__all__ = [
    "SAMPLERS",
    "EmpiricalLength",
    "FixedLength",
    "LengthLaw",
    "LogNormalLength",
    "UniformLength",
    "Workload",
    "WorkloadSpec",
    "check_rate",
    "expected_max",
    "length_law",
    "static_slot_use",
]

SAMPLERS = ("lab", "numpy")
#: Arrival laws: Poisson (exponential gaps) or gamma gaps with coefficient of
#: variation ``cv`` (cv > 1: bursty; cv = 1: Poisson; cv < 1: smoother).
ARRIVAL_LAWS = ("poisson", "gamma")
@attrs.frozen(eq=False)
class Workload:
    """One drawn request stream: arrival times (s, non-decreasing), prompt and output
    lengths (tokens), the nominal rate and seed it came from, and the longest output
    the length law allows (used by full-length reservations).
    """

    arrivals: np.ndarray
    prompts: np.ndarray
    outputs: np.ndarray
    rate: float
    seed: int | None
    max_output: int
    clients: int | None = None
    think_time: float = 0.0
    prefixes: tuple[str, ...] | None = None  # shared-prefix id per request ("" for none)
    session_starts: np.ndarray | None = None  # multi-turn: each session's first arrival
    turns: int = 1
    reuse_history: bool = True
    prefix_tokens: np.ndarray | None = None  # per request: tokens its named prefix holds

    def with_prefixes(self, prefixes: Iterable[str],
                      tokens: int | Sequence[int] | np.ndarray | None = None) -> Workload:
        """The same workload with a shared-prefix identifier per request ("" for none)
        and, with ``tokens`` (one length, or one per request), the prefix's length:
        requests with the same identifier start with the same ``tokens`` prompt tokens,
        which a server's prefix cache can share (:mod:`infermodel.simulator.prefixes`).
        Without lengths the identifiers only steer the ``prefix_affinity`` router.

        >>> w = Workload.from_arrays([0.0, 1.0], [100, 120], [3, 4]).with_prefixes(["a", "a"], 64)
        >>> w.prefix_tokens.tolist()
        [64, 64]
        """
        prefixes = tuple(str(p) for p in prefixes)
        if len(prefixes) != self.count:
            raise SimulationError("one prefix identifier per request is needed")
        lengths = None
        if tokens is not None:
            lengths = np.broadcast_to(np.asarray(tokens), (self.count,))
            if lengths.dtype.kind not in "iu" or np.any(lengths < 0):
                raise SimulationError("prefix lengths must be whole numbers of tokens >= 0")
            # a prefix is part of the prompt, whose last token is always computed
            lengths = np.minimum(lengths.astype(np.int64), self.prompts)
            lengths = np.where([bool(p) for p in prefixes], lengths, 0)
        return attrs.evolve(self, prefixes=prefixes, prefix_tokens=lengths)

    def scaled(self, rate: float) -> Workload:
        """The same requests with every gap divided by ``rate`` / the recorded rate."""
        rate = check_rate(rate)
        if rate == self.rate:
            return self
        return attrs.evolve(self, arrivals=self.arrivals * (self.rate / rate), rate=rate)

    @classmethod
    def from_arrays(cls, arrivals: npt.ArrayLike, prompts: npt.ArrayLike, outputs: npt.ArrayLike,
                    *, rate: float | None = None,
                    seed: int | None = None, max_output: int | None = None) -> Workload:
        """A workload from explicit arrays (a recorded trace, or a test's hand-made stream).

        >>> w = Workload.from_arrays([0.0, 1.0], [10, 20], [3, 4])
        >>> w.count, w.max_output
        (2, 4)
        """
        arrivals = np.array(arrivals, dtype=np.float64).reshape(-1)
        prompts = np.array(prompts).reshape(-1)
        outputs = np.array(outputs).reshape(-1)
        if arrivals.size == 0:
            raise SimulationError("the workload is empty: at least one request is needed")
        if not (arrivals.size == prompts.size == outputs.size):
            raise SimulationError("arrivals, prompts and outputs must have the same length")
        if not np.all(np.isfinite(arrivals)) or np.any(arrivals < 0) or np.any(np.diff(arrivals) < 0):
            raise SimulationError("arrival times must be finite, non-negative and non-decreasing")
        for name, lengths in (("prompt", prompts), ("output", outputs)):
            if lengths.dtype.kind not in "iu" and not (
                lengths.dtype.kind == "f" and np.all(np.isfinite(lengths)) and np.all(lengths == np.floor(lengths))
            ):
                raise SimulationError(f"{name} lengths must be whole numbers")
            if np.any(lengths < 1) or np.any(lengths > MAX_LENGTH):
                raise SimulationError(f"{name} lengths must be between 1 and {MAX_LENGTH}")
        prompts = prompts.astype(np.int64)
        outputs = outputs.astype(np.int64)
        if max_output is None:
            max_output = int(outputs.max())
        if rate is None:
            with np.errstate(over="ignore"):
                rate = arrivals.size / arrivals[-1] if arrivals[-1] > 0 else math.inf
        return cls(arrivals, prompts, outputs, float(rate), seed, int(max_output))

    @property
    def count(self) -> int:
        return int(self.arrivals.size)

    @property
    def realised_rate(self) -> float:
        """count / last arrival time (requests/s); infinite when all arrive at 0."""
        last = float(self.arrivals[-1])
        return self.count / last if last > 0 else math.inf

    @property
    def mean_output(self) -> float:
        return float(np.mean(self.outputs))

    @property
    def mean_prompt(self) -> float:
        return float(np.mean(self.prompts))


def read_trace(path: str | os.PathLike) -> Workload:
    """The :class:`Workload` a trace file records (see :mod:`infermodel.simulator.trace`):
    arrival, prompt and output per row, pairing kept, prefix ids if named.
    """
    from .trace import read_rows

    arrivals, prompts, outputs, prefixes, lengths = read_rows(path)
    workload = Workload.from_arrays(arrivals, prompts, outputs)
    return workload.with_prefixes(prefixes, lengths) if prefixes is not None else workload


def check_rate(rate: Any) -> float:
    if isinstance(rate, bool) or not isinstance(rate, (int, float, np.number)):
        raise SimulationError(f"arrival rate must be a number of requests/s, got {rate!r}")
    rate = float(rate)
    if not math.isfinite(rate) or rate <= 0:
        raise SimulationError(f"arrival rate must be a positive finite number of requests/s, got {rate!r}")
    return rate


@attrs.frozen
class WorkloadSpec:
    """How to draw a workload: request count, prompt and output length laws, sampler.

    The defaults are Module 10 Lab 3's workload: 300 requests, prompts uniform on
    2,000–6,000 tokens, outputs a log-normal of median 1,500 and sigma 0.6 clipped to
    16–4,000, drawn by the lab-compatible sampler.

    >>> w = WorkloadSpec.lab3().generate(0.2, seed=0)
    >>> round(w.mean_output, 1), round(w.realised_rate, 3)
    (1737.4, 0.224)
    """

    prompt: AnyLaw = attrs.field(
        default=UniformLength(2000, 6000), converter=lambda v: length_law(v, what="prompt law")
    )
    output: AnyLaw = attrs.field(
        default=LogNormalLength(math.log(1500), 0.6, 16, 4000),
        converter=lambda v: length_law(v, what="output law"),
    )
    count: int = attrs.field(default=300)
    sampler: str = attrs.field(default="lab")
    arrivals: str = attrs.field(default="poisson")
    cv: float = attrs.field(default=1.0)
    trace: Workload | None = attrs.field(default=None, eq=False)
    prefix_tokens: int = attrs.field(default=0)
    prefix_hit_rate: float = attrs.field(default=1.0)
    #: Arrivals stop after this many seconds or ``count`` requests, whichever comes first
    #: (the Inference lab's "60 seconds or 400 requests"); None: ``count`` alone.
    window: float | None = attrs.field(default=None, converter=lambda v: v if v is None else
                                       check_float(v, "the arrival window (s)", positive=True))

    @prefix_tokens.validator
    def _prefix(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise SimulationError(f"shared prefix tokens must be a whole number >= 0, got {value!r}")

    @prefix_hit_rate.validator
    def _hits(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise SimulationError(f"prefix hit rate must be in [0, 1], got {value!r}")

    def _with_prefix(self, drawn: Workload, seed: int) -> Workload:
        """Give the shared prefix to its share of requests: ``prefix_hit_rate`` of them,
        by a seeded draw of its own (so the lengths and arrivals are those drawn without
        a prefix), start with the same ``prefix_tokens`` tokens (named ``"shared"``).  A
        trace naming its own prefixes keeps them; ``prefix_tokens`` is then their length
        where the trace gives none.
        """
        if not self.prefix_tokens:
            return drawn
        if drawn.prefixes is not None:
            if drawn.prefix_tokens is not None:
                return drawn
            return drawn.with_prefixes(drawn.prefixes, self.prefix_tokens)
        carries = np.random.default_rng([int(seed) & 0xFFFFFFFF, 0x5EED]).random(drawn.count) \
            < self.prefix_hit_rate
        return drawn.with_prefixes(np.where(carries, "shared", ""), self.prefix_tokens)

    @arrivals.validator
    def _arrivals(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in ARRIVAL_LAWS:
            raise SimulationError(f"arrivals must be one of {', '.join(ARRIVAL_LAWS)}, got {value!r}")

    @cv.validator
    def _cv(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 100:
            raise SimulationError(f"arrival cv (coefficient of variation of the gaps) must be "
                                  f"in (0, 100), got {value!r}")

    @count.validator
    def _count(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise SimulationError(f"request count must be a whole number, got {value!r}")
        if value < 1:
            raise SimulationError(f"the workload is empty: request count must be at least 1, got {value}")

    @sampler.validator
    def _sampler(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in SAMPLERS:
            raise SimulationError(f"sampler must be one of {', '.join(SAMPLERS)}, got {value!r}")

    @classmethod
    def lab3(cls, count: int = 300) -> WorkloadSpec:
        """Module 10 Lab 3's workload (see the class docstring)."""
        return cls(UniformLength(2000, 6000), LogNormalLength.from_median(1500, 0.6, 16, 4000), count, "lab")

    @classmethod
    def from_mapping(
        cls, table: Mapping[str, Any], base_dir: str | os.PathLike | None = None
    ) -> WorkloadSpec:
        """A spec from a table such as a scenario's ``[simulation.workload]``: keys
        ``count``, ``prompt`` and ``output`` (length laws, see :func:`length_law`) and
        ``sampler``; missing keys keep Lab 3's values.

        >>> WorkloadSpec.from_mapping({"count": 50, "output": {"law": "fixed", "value": 64}}).output
        FixedLength(value=64)
        """
        if not isinstance(table, Mapping):
            raise SimulationError(f"workload: expected a table, got {table!r}")
        known = ("count", "prompt", "output", "sampler", "arrivals", "cv", "trace", "prefix_tokens",
                 "prefix_hit_rate", "window")
        extra = sorted(set(table) - set(known))
        if extra:
            guess = close_match(extra[0], known)
            raise SimulationError(
                f"workload: unknown keys {', '.join(extra)} (expected {', '.join(known)})"
                + (f"; did you mean {guess!r}?" if guess else "")
            )
        lab = cls.lab3()
        if "trace" in table:
            path = os.fspath(table["trace"])
            if base_dir is not None and not os.path.isabs(path):
                path = os.path.join(base_dir, path)
            recorded = read_trace(path)
            return cls(EmpiricalLength(tuple(recorded.prompts.tolist())),
                       EmpiricalLength(tuple(recorded.outputs.tolist())), recorded.count,
                       trace=recorded, prefix_tokens=table.get("prefix_tokens", 0),
                       prefix_hit_rate=table.get("prefix_hit_rate", 1.0),
                       window=table.get("window"))
        return cls(
            length_law(table.get("prompt", lab.prompt), what="prompt law", base_dir=base_dir),
            length_law(table.get("output", lab.output), what="output law", base_dir=base_dir),
            table.get("count", lab.count),
            table.get("sampler", lab.sampler),
            table.get("arrivals", "poisson"),
            table.get("cv", 1.0),
            prefix_tokens=table.get("prefix_tokens", 0),
            prefix_hit_rate=table.get("prefix_hit_rate", 1.0),
            window=table.get("window"),
        )

    def sessions(self, rate: float, turns: int, think_time: float = 0.0, seed: int = 0,
                 reuse_history: bool = True) -> Workload:
        """Multi-turn sessions starting at ``rate`` sessions/s: ``count`` requests in
        ``count // turns`` sessions of ``turns`` turns; each turn's prompt is the
        session's history plus a new message of the prompt law's length, sent
        ``think_time`` after the previous turn's last token.

        >>> w = WorkloadSpec.lab3(12).sessions(0.1, turns=3)
        >>> w.turns, len(w.session_starts), w.count
        (3, 4, 12)
        """
        turns = check_int(turns, "turns per session")
        if self.count % turns:
            raise SimulationError(f"request count {self.count} is not a whole number of sessions "
                                  f"of {turns} turns")
        if isinstance(think_time, bool) or not isinstance(think_time, (int, float)) or not (
                math.isfinite(think_time) and think_time >= 0):
            raise SimulationError(f"think time must be a non-negative number of seconds, got {think_time!r}")
        refuse_window(self.window, "multi-turn sessions are drawn whole")
        drawn = self.generate(rate, seed)
        starts = drawn.arrivals[: self.count // turns]  # Poisson session starts at `rate`/s
        return attrs.evolve(drawn, arrivals=np.zeros(drawn.count), session_starts=starts,
                            turns=turns, think_time=float(think_time),
                            reuse_history=bool(reuse_history))

    def closed_loop(self, clients: int, think_time: float = 0.0, seed: int = 0) -> Workload:
        """Draw the lengths for a closed loop of ``clients`` users, each sending its next
        request ``think_time`` seconds after its previous one ends.  The lengths are
        those an open stream with the same seed draws; arrival times are set during
        the run.

        >>> w = WorkloadSpec.lab3(10).closed_loop(4, 0.5)
        >>> w.clients, w.think_time, w.count
        (4, 0.5, 10)
        """
        clients = check_int(clients, "concurrency (clients)")
        if isinstance(think_time, bool) or not isinstance(think_time, (int, float)) or not (
                math.isfinite(think_time) and think_time >= 0):
            raise SimulationError(f"think time must be a non-negative number of seconds, got {think_time!r}")
        refuse_window(self.window, "a closed loop sends every request")
        drawn = attrs.evolve(self, arrivals="poisson").generate(1.0, seed)
        return attrs.evolve(drawn, arrivals=np.zeros(drawn.count), rate=math.nan,
                            clients=clients, think_time=float(think_time))

    def generate(self, rate: float, seed: int = 0) -> Workload:
        """Draw the workload at nominal ``rate`` requests/s with ``seed``."""
        rate = check_rate(rate)
        if self.trace is not None:
            return self._with_prefix(within_window(self.trace.scaled(rate), self.window), seed)
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise SimulationError(f"seed must be a whole number, got {seed!r}")
        seed = int(seed)
        count = int(self.count)
        if self.sampler == "lab":
            rng = random.Random(seed)
            arrivals = np.empty(count, dtype=np.float64)
            prompts = np.empty(count, dtype=np.int64)
            outputs = np.empty(count, dtype=np.int64)
            now = 0.0
            draw_prompt, draw_output = self.prompt.sample_python, self.output.sample_python
            gap: Callable[[float], float] = rng.expovariate
            if self.arrivals == "gamma":
                shape = 1.0 / (self.cv * self.cv)

                def gamma_gap(rate: float, shape: float = shape) -> float:
                    return rng.gammavariate(shape, 1.0 / (rate * shape))

                gap = gamma_gap
            for index in range(count):
                now += gap(rate)
                arrivals[index] = now
                prompts[index] = draw_prompt(rng)
                outputs[index] = draw_output(rng)
        else:
            if seed < 0:
                raise SimulationError(f"the numpy sampler needs a non-negative seed, got {seed}")
            gaps, prompt_stream, output_stream = (
                np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(3)
            )
            if self.arrivals == "gamma":
                shape = 1.0 / (self.cv * self.cv)
                arrivals = np.cumsum(gaps.gamma(shape, 1.0 / (rate * shape), count))
            else:
                arrivals = np.cumsum(gaps.standard_exponential(count) / rate)
            prompts = self.prompt.sample_numpy(prompt_stream, count)
            outputs = self.output.sample_numpy(output_stream, count)
        return self._with_prefix(within_window(
            Workload(arrivals, prompts, outputs, rate, seed, int(self.output.maximum)), self.window), seed)
