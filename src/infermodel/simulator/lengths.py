"""Length laws of a request stream's prompts and outputs: fixed, uniform, clipped
log-normal and empirical (:func:`length_law` reads one from a scenario's table), with the
order statistics static batching needs (:func:`expected_max`, :func:`static_slot_use`).
"""

from __future__ import annotations

import csv
import math
import os
import random
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from .errors import SimulationError

__all__ = [
    "MAX_LENGTH",
    "AnyLaw",
    "EmpiricalLength",
    "FixedLength",
    "LengthLaw",
    "LogNormalLength",
    "UniformLength",
    "check_float",
    "check_int",
    "expected_max",
    "length_law",
    "static_slot_use",
]

MAX_LENGTH = 10**8  # far above any context window; keeps counts exact in float64


def check_int(value: Any, what: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise SimulationError(f"{what} must be a whole number, got {value!r}")
    value = int(value)
    if value < minimum or value > MAX_LENGTH:
        raise SimulationError(f"{what} must be between {minimum} and {MAX_LENGTH}, got {value}")
    return value


def check_float(value: Any, what: str, positive: bool = False) -> float:
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

    value: int = attrs.field(converter=lambda v: check_int(v, "fixed length"))

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

    low: int = attrs.field(converter=lambda v: check_int(v, "uniform law: low"))
    high: int = attrs.field(converter=lambda v: check_int(v, "uniform law: high"))

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

    mu: float = attrs.field(converter=lambda v: check_float(v, "log-normal law: mu"))
    sigma: float = attrs.field(converter=lambda v: check_float(v, "log-normal law: sigma", True))
    minimum: int = attrs.field(converter=lambda v: check_int(v, "log-normal law: min"))
    maximum: int = attrs.field(converter=lambda v: check_int(v, "log-normal law: max"))

    def __attrs_post_init__(self) -> None:
        if self.maximum < self.minimum:
            raise SimulationError(
                f"log-normal law: max ({self.maximum}) is below min ({self.minimum})"
            )

    @classmethod
    def from_median(cls, median: float, sigma: float, minimum: int, maximum: int) -> LogNormalLength:
        """The law whose unclipped median is ``median`` (mu = log(median))."""
        median = check_float(median, "log-normal law: median", positive=True)
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
        converter=lambda vs: tuple(check_int(v, "empirical law: value") for v in vs)
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
    batch = check_int(batch, "batch size")
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
