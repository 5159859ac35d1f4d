"""Seeded request streams: Poisson arrivals and prompt/output length laws.

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

import csv
import math
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import numpy.typing as npt

from infermodel.errors import close_match

from .errors import SimulationError
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
_MAX_LENGTH = 10**8  # far above any context window; keeps counts exact in float64


def _check_int(value: Any, what: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise SimulationError(f"{what} must be a whole number, got {value!r}")
    value = int(value)
    if value < minimum or value > _MAX_LENGTH:
        raise SimulationError(f"{what} must be between {minimum} and {_MAX_LENGTH}, got {value}")
    return value


def _check_float(value: Any, what: str, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise SimulationError(f"{what} must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value) or (positive and value <= 0):
        raise SimulationError(
            f"{what} must be a {'positive ' if positive else ''}finite number, got {value!r}"
        )
    return value


class LengthLaw(Protocol):
    """A law of token counts (positive integers)."""

    @property
    def minimum(self) -> int: ...

    @property
    def maximum(self) -> int: ...

    def sample_python(self, rng: random.Random) -> int: ...

    def sample_numpy(self, generator: np.random.Generator, count: int) -> np.ndarray: ...

    def pmf(self) -> tuple[np.ndarray, np.ndarray]: ...

    def mean(self) -> float: ...


def _pmf_mean(law: LengthLaw) -> float:
    values, probabilities = law.pmf()
    return float(np.dot(values.astype(np.float64), probabilities))


@attrs.frozen
class FixedLength:
    """Every request has ``value`` tokens.

    >>> FixedLength(128).mean()
    128.0
    """

    value: int = attrs.field(converter=lambda v: _check_int(v, "fixed length"))

    @property
    def minimum(self) -> int:
        return self.value

    @property
    def maximum(self) -> int:
        return self.value

    def sample_python(self, rng: random.Random) -> int:
        return self.value

    def sample_numpy(self, generator: np.random.Generator, count: int) -> np.ndarray:
        return np.full(count, self.value, dtype=np.int64)

    def pmf(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array([self.value], dtype=np.int64), np.array([1.0])

    def mean(self) -> float:
        return float(self.value)


@attrs.frozen
class UniformLength:
    """Uniform integer law on ``low..high`` inclusive (Lab 3's prompts: 2,000–6,000).

    >>> UniformLength(2000, 6000).mean()
    4000.0
    """

    low: int = attrs.field(converter=lambda v: _check_int(v, "uniform law: low"))
    high: int = attrs.field(converter=lambda v: _check_int(v, "uniform law: high"))

    def __attrs_post_init__(self) -> None:
        if self.high < self.low:
            raise SimulationError(f"uniform law: high ({self.high}) is below low ({self.low})")

    @property
    def minimum(self) -> int:
        return self.low

    @property
    def maximum(self) -> int:
        return self.high

    def sample_python(self, rng: random.Random) -> int:
        return rng.randint(self.low, self.high)

    def sample_numpy(self, generator: np.random.Generator, count: int) -> np.ndarray:
        return generator.integers(self.low, self.high + 1, size=count, dtype=np.int64)

    def pmf(self) -> tuple[np.ndarray, np.ndarray]:
        values = np.arange(self.low, self.high + 1, dtype=np.int64)
        return values, np.full(values.size, 1.0 / values.size)

    def mean(self) -> float:
        return (self.low + self.high) / 2.0


@attrs.frozen
class LogNormalLength:
    """Clipped, truncated log-normal: ``min(maximum, max(minimum, floor(exp(N(mu, sigma)))))``.

    Lab 3's outputs are ``LogNormalLength.from_median(1500, 0.6, 16, 4000)``.

    >>> law = LogNormalLength.from_median(1500, 0.6, 16, 4000)
    >>> round(law.mean(), 1)
    1729.5
    """

    mu: float = attrs.field(converter=lambda v: _check_float(v, "log-normal law: mu"))
    sigma: float = attrs.field(converter=lambda v: _check_float(v, "log-normal law: sigma", True))
    minimum: int = attrs.field(converter=lambda v: _check_int(v, "log-normal law: min"))
    maximum: int = attrs.field(converter=lambda v: _check_int(v, "log-normal law: max"))

    def __attrs_post_init__(self) -> None:
        if self.maximum < self.minimum:
            raise SimulationError(
                f"log-normal law: max ({self.maximum}) is below min ({self.minimum})"
            )

    @classmethod
    def from_median(cls, median: float, sigma: float, minimum: int, maximum: int) -> LogNormalLength:
        """The law whose unclipped median is ``median`` (mu = log(median))."""
        median = _check_float(median, "log-normal law: median", positive=True)
        return cls(math.log(median), sigma, minimum, maximum)

    def sample_python(self, rng: random.Random) -> int:
        return min(self.maximum, max(self.minimum, int(rng.lognormvariate(self.mu, self.sigma))))

    def sample_numpy(self, generator: np.random.Generator, count: int) -> np.ndarray:
        draws = generator.lognormal(self.mu, self.sigma, size=count)
        return np.clip(np.floor(np.minimum(draws, self.maximum)), self.minimum, self.maximum).astype(
            np.int64
        )

    def cdf(self, k: np.ndarray) -> np.ndarray:
        """P(length ≤ k) for integer ``k``: P(exp(N) < k + 1) between the clips."""
        k = np.asarray(k, dtype=np.float64)
        z = (np.log(np.maximum(k + 1.0, 1e-300)) - self.mu) / (self.sigma * math.sqrt(2.0))
        inner = 0.5 * (1.0 + _erf(z))
        return np.where(k < self.minimum, 0.0, np.where(k >= self.maximum, 1.0, inner))

    def pmf(self) -> tuple[np.ndarray, np.ndarray]:
        values = np.arange(self.minimum, self.maximum + 1, dtype=np.int64)
        cumulative = self.cdf(values)
        return values, np.diff(cumulative, prepend=0.0)

    def mean(self) -> float:
        return _pmf_mean(self)


_erf_vector = np.frompyfunc(math.erf, 1, 1)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.asarray(_erf_vector(x), dtype=np.float64)


@attrs.frozen
class EmpiricalLength:
    """Lengths drawn uniformly from a list of observed values (e.g. a CSV column).

    >>> EmpiricalLength((10, 20, 30)).mean()
    20.0
    """

    values: tuple[int, ...] = attrs.field(
        converter=lambda vs: tuple(_check_int(v, "empirical law: value") for v in vs)
    )

    def __attrs_post_init__(self) -> None:
        if not self.values:
            raise SimulationError("empirical law: needs at least one length")

    @classmethod
    def from_csv(cls, path: str | os.PathLike, column: str | int | None = None) -> EmpiricalLength:
        """Read lengths from a CSV file: one integer per row in ``column`` (a header
        name or a 0-based index; default the first column).  A first row that is not
        a number is taken as the header.
        """
        try:
            with open(path, newline="", encoding="utf-8") as handle:
                rows = [row for row in csv.reader(handle) if row and any(cell.strip() for cell in row)]
        except OSError as error:
            raise SimulationError(f"empirical law: cannot read {os.fspath(path)!r}: {error.strerror}") from None
        if not rows:
            raise SimulationError(f"empirical law: {os.fspath(path)!r} holds no lengths")
        header = None
        try:
            float(rows[0][0 if not isinstance(column, int) else column])
        except (ValueError, IndexError):
            header, rows = [cell.strip() for cell in rows[0]], rows[1:]
        if isinstance(column, str):
            if header is None or column not in header:
                raise SimulationError(
                    f"empirical law: {os.fspath(path)!r} has no column {column!r}"
                    + (f" (columns: {', '.join(header)})" if header else "")
                )
            index = header.index(column)
        else:
            index = 0 if column is None else column
        values = []
        for number, row in enumerate(rows, start=2 if header else 1):
            try:
                cell = row[index].strip()
                value = float(cell)
            except (IndexError, ValueError):
                raise SimulationError(
                    f"empirical law: {os.fspath(path)!r} row {number}: expected a length, got {row!r}"
                ) from None
            if not value.is_integer() or value < 1:
                raise SimulationError(
                    f"empirical law: {os.fspath(path)!r} row {number}: a length must be a positive "
                    f"whole number, got {cell!r}"
                )
            values.append(int(value))
        return cls(tuple(values))

    @property
    def minimum(self) -> int:
        return min(self.values)

    @property
    def maximum(self) -> int:
        return max(self.values)

    def sample_python(self, rng: random.Random) -> int:
        return self.values[rng.randrange(len(self.values))]

    def sample_numpy(self, generator: np.random.Generator, count: int) -> np.ndarray:
        table = np.asarray(self.values, dtype=np.int64)
        return table[generator.integers(0, table.size, size=count)]

    def pmf(self) -> tuple[np.ndarray, np.ndarray]:
        values, counts = np.unique(np.asarray(self.values, dtype=np.int64), return_counts=True)
        return values, counts / counts.sum()

    def mean(self) -> float:
        return float(np.mean(self.values))


AnyLaw = FixedLength | UniformLength | LogNormalLength | EmpiricalLength
_LAW_KEYS = {
    "fixed": {"value"},
    "uniform": {"low", "high"},
    "lognormal": {"median", "mu", "sigma", "min", "max"},
    "empirical": {"values", "file", "column"},
}


def length_law(spec: AnyLaw | Mapping[str, Any] | int, *, what: str = "length law",
               base_dir: str | os.PathLike | None = None) -> AnyLaw:
    """A length law from a mapping (as written in a scenario's ``[simulation]`` table),
    an integer (a fixed length) or an existing law.

    Mappings: ``{"law": "fixed", "value": 128}``, ``{"law": "uniform", "low": 2000,
    "high": 6000}``, ``{"law": "lognormal", "median": 1500 (or "mu"), "sigma": 0.6,
    "min": 16, "max": 4000}``, ``{"law": "empirical", "values": [...]}`` or
    ``{"law": "empirical", "file": "lengths.csv", "column": "output"}`` (a relative
    file is read from ``base_dir``).

    >>> length_law({"law": "uniform", "low": 2000, "high": 6000})
    UniformLength(low=2000, high=6000)
    >>> length_law({"law": "lognormal", "median": 1500, "sigma": 0, "min": 16, "max": 4000})
    Traceback (most recent call last):
    ...
    infermodel.simulator.errors.SimulationError: length law: log-normal law: sigma must be a positive finite number, got 0.0
    """
    if isinstance(spec, (FixedLength, UniformLength, LogNormalLength, EmpiricalLength)):
        return spec
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return FixedLength(spec)
    if not isinstance(spec, Mapping):
        raise SimulationError(f"{what}: expected a table with a 'law' key, got {spec!r}")
    kind = spec.get("law")
    if kind not in _LAW_KEYS:
        raise SimulationError(
            f"{what}: 'law' must be one of {', '.join(sorted(_LAW_KEYS))}, got {kind!r}"
        )
    extra = sorted(set(spec) - _LAW_KEYS[kind] - {"law"})
    if extra:
        raise SimulationError(f"{what}: unknown keys for a {kind} law: {', '.join(extra)}")

    def need(key: str) -> Any:
        if key not in spec:
            raise SimulationError(f"{what}: a {kind} law needs '{key}'")
        return spec[key]

    try:
        if kind == "fixed":
            return FixedLength(need("value"))
        if kind == "uniform":
            return UniformLength(need("low"), need("high"))
        if kind == "lognormal":
            if ("median" in spec) == ("mu" in spec):
                raise SimulationError(f"{what}: a lognormal law needs exactly one of 'median' or 'mu'")
            sigma, low, high = need("sigma"), need("min"), need("max")
            if "median" in spec:
                return LogNormalLength.from_median(spec["median"], sigma, low, high)
            return LogNormalLength(spec["mu"], sigma, low, high)
        if ("values" in spec) == ("file" in spec):
            raise SimulationError(f"{what}: an empirical law needs exactly one of 'values' or 'file'")
        if "values" in spec:
            values = spec["values"]
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise SimulationError(f"{what}: 'values' must be a list of lengths")
            return EmpiricalLength(values)
        path = os.fspath(spec["file"])
        if base_dir is not None and not os.path.isabs(path):
            path = os.path.join(base_dir, path)
        return EmpiricalLength.from_csv(path, spec.get("column"))
    except SimulationError as error:
        if str(error).startswith(what):
            raise
        raise SimulationError(f"{what}: {error}") from None


def expected_max(law: AnyLaw | tuple[Sequence[int], Sequence[float]], batch: int) -> float:
    """E[max of ``batch`` independent draws] = Σ_{k≥0} (1 − F(k)^B) for a law of
    non-negative integers (Inference lab, "Many requests, one pass").

    ``law`` is a length law or a ``(values, probabilities)`` pair.  With one draw it
    is the mean:

    >>> expected_max(([1, 2, 3], [0.25, 0.5, 0.25]), 1)
    2.0
    >>> expected_max(([1, 2, 3], [0.25, 0.5, 0.25]), 2)
    2.375
    """
    batch = _check_int(batch, "batch size")
    if isinstance(law, tuple):
        values = np.asarray(law[0], dtype=np.int64)
        probabilities = np.asarray(law[1], dtype=np.float64)
        if values.shape != probabilities.shape or values.size == 0:
            raise SimulationError("expected_max: values and probabilities must be equal, non-empty lists")
        if np.any(values < 0) or np.any(probabilities < 0):
            raise SimulationError("expected_max: values and probabilities must be non-negative")
        total = probabilities.sum()
        if not math.isclose(total, 1.0, rel_tol=1e-9, abs_tol=1e-12):
            raise SimulationError(f"expected_max: probabilities must sum to 1, got {total!r}")
        order = np.argsort(values, kind="stable")
        values, probabilities = values[order], probabilities[order]
        values, start = np.unique(values, return_index=True)
        probabilities = np.add.reduceat(probabilities, start)
    else:
        values, probabilities = law.pmf()
    cumulative = np.minimum(np.cumsum(probabilities), 1.0)
    cumulative[-1] = 1.0
    # F is a step function: 0 below the first value, then cumulative[i] on
    # [values[i], values[i+1]); each integer k contributes 1 − F(k)^B.
    widths = np.diff(values).astype(np.float64)
    return float(values[0]) + float(np.dot(widths, 1.0 - cumulative[:-1] ** batch))


def static_slot_use(law: AnyLaw, batch: int) -> float:
    """Expected share of useful decode slot-steps in full static batches:
    (E[o] − 1) / (E[max of B] − 1) (Inference lab, "Many requests, one pass").

    >>> round(static_slot_use(FixedLength(100), 16), 6)
    1.0
    """
    maximum = expected_max(law, batch)
    values, probabilities = law.pmf() if not isinstance(law, tuple) else law
    mean = float(np.dot(np.asarray(values, dtype=np.float64), probabilities))
    if maximum <= 1.0:
        return 1.0
    return (mean - 1.0) / (maximum - 1.0)


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
            if np.any(lengths < 1) or np.any(lengths > _MAX_LENGTH):
                raise SimulationError(f"{name} lengths must be between 1 and {_MAX_LENGTH}")
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
                                       _check_float(v, "the arrival window (s)", positive=True))

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
        turns = _check_int(turns, "turns per session")
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
        clients = _check_int(clients, "concurrency (clients)")
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
