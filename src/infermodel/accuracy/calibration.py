"""Measure this machine as Module 10 Lab 1 does, and write a hardware preset from it.

Lab 1 ("Measure the CPU, rather than guessing from its clock speed") times float32
products of a ``d × d`` matrix with a ``d × B`` block for growing ``B``, each repeated
after a warm-up call, and keeps the median. For each product it reports

* FLOPs ``2 d² B`` and moved bytes ``4 (d² + 2 d B)`` (one read of each input and one
  write of the output: a traffic model, not a hardware counter);
* achieved GFLOP/s, effective GB/s and the arithmetic intensity FLOP/byte, which is
  arithmetic only (:func:`intensity`).

The machine model is the effective bandwidth at ``B = 1``, the largest achieved
FLOP/s, and their ratio, the ridge. We add the fixed per-call time ``t0``: the
intercept of time against bytes for matrix-vector products of growing size, each the
fastest of 200 calls (a microsecond call is dwarfed by one descheduling, so its median
on a busy machine measures the machine's load, not the call).

The module uses numpy only (the products run in whatever BLAS numpy was built with,
with its default threads), so it runs wherever infermodel does.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from functools import partial

import attrs
import numpy as np

__all__ = ["LAB1_BATCHES", "LAB1_WIDTH", "Calibration", "Product", "intensity", "measure",
           "preset_toml"]

#: Module 10 Lab 1's matrix width and column counts.
LAB1_WIDTH = 8192
LAB1_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
LAB1_REPEATS = 5
#: ``--quick``: a 2,048-wide matrix (16 MiB) and fewer columns: a few seconds.
QUICK_WIDTH = 2048
QUICK_BATCHES = (1, 2, 8, 32, 128, 512)
QUICK_REPEATS = 3
#: Matrix-vector widths whose times give the per-call intercept t0.
T0_WIDTHS = (128, 256, 512, 1024, 2048)
BYTES_PER_VALUE = 4  # float32


def flops(width: int, batch: int) -> int:
    """FLOPs of a ``width × width`` by ``width × batch`` product: ``2 d² B``."""
    return 2 * width * width * batch


def moved_bytes(width: int, batch: int) -> int:
    """Bytes of Lab 1's traffic model: ``4 (d² + 2 d B)`` (matrix, input, output)."""
    return BYTES_PER_VALUE * (width * width + 2 * width * batch)


def intensity(width: int, batch: int) -> float:
    """Arithmetic intensity of the product, FLOP per byte.

    >>> round(intensity(8192, 1), 2), round(intensity(8192, 512), 2)
    (0.5, 227.56)
    """
    return flops(width, batch) / moved_bytes(width, batch)


@attrs.frozen
class Product:
    """One timed product."""

    width: int
    batch: int
    seconds: float

    @property
    def gflops(self) -> float:
        return flops(self.width, self.batch) / self.seconds / 1e9

    @property
    def gbytes_per_s(self) -> float:
        return moved_bytes(self.width, self.batch) / self.seconds / 1e9

    @property
    def intensity(self) -> float:
        return intensity(self.width, self.batch)


@attrs.frozen
class Calibration:
    """The measured products and the machine model they give."""

    products: tuple[Product, ...]
    t0_products: tuple[Product, ...]
    repeats: int
    quick: bool
    memory_bytes: int | None
    when: str

    @property
    def bandwidth(self) -> float:
        """Effective bytes per second of the ``B = 1`` product (Lab 1's bandwidth)."""
        return self.products[0].gbytes_per_s * 1e9

    @property
    def flops(self) -> float:
        """The largest achieved FLOP/s among the products."""
        return max(p.gflops for p in self.products) * 1e9

    @property
    def ridge(self) -> float:
        return self.flops / self.bandwidth

    @property
    def t0(self) -> float:
        """Intercept of matrix-vector time against bytes (least squares, at least 0)."""
        x = np.array([moved_bytes(p.width, 1) for p in self.t0_products], dtype=float)
        y = np.array([p.seconds for p in self.t0_products])
        _slope, intercept = np.polyfit(x, y, 1)
        return max(float(intercept), 0.0)

    def table(self) -> str:
        lines = [f"float32 products of a {self.products[0].width}-square matrix, median of "
                 f"{self.repeats} after a warm-up call",
                 "  B        ms   GFLOP/s  effective GB/s  FLOP/byte"]
        for p in self.products:
            lines.append(f"{p.batch:>3} {p.seconds * 1e3:>9.3f} {p.gflops:>9.1f} "
                         f"{p.gbytes_per_s:>15.2f} {p.intensity:>10.2f}")
        lines += ["",
                  f"bandwidth (B = 1)  {self.bandwidth / 1e9:.2f} GB/s",
                  f"peak (largest)     {self.flops / 1e9:.1f} GFLOP/s",
                  f"ridge              {self.ridge:.2f} FLOP/byte",
                  f"t0 (per call)      {self.t0 * 1e6:.1f} us  (intercept over matrix-vector "
                  f"widths {', '.join(str(p.width) for p in self.t0_products)})"]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"products": [{"width": p.width, "batch": p.batch, "seconds": p.seconds,
                              "gflops": p.gflops, "effective_gbytes_per_s": p.gbytes_per_s,
                              "flop_per_byte": p.intensity} for p in self.products],
                "bandwidth": self.bandwidth, "flops": self.flops, "ridge": self.ridge,
                "t0": self.t0, "repeats": self.repeats, "quick": self.quick,
                "memory_bytes": self.memory_bytes, "when": self.when}


def _times(call: Callable[[], object], repeats: int) -> list[float]:
    call()  # warm-up: first-touch pages, kernel selection, thread start
    times = []
    for _ in range(repeats):
        begin = time.perf_counter()
        call()
        times.append(time.perf_counter() - begin)
    return times


def _median_time(call: Callable[[], object], repeats: int) -> float:
    return statistics.median(_times(call, repeats))


def _memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def measure(*, width: int | None = None, batches: Sequence[int] | None = None,
            repeats: int | None = None, quick: bool = False, seed: int = 0,
            progress=None) -> Calibration:
    """Time the products: Lab 1's shapes (``LAB1_*``), or with ``quick`` the smaller ones
    (``QUICK_*``), each unless given.
    """
    if width is None:
        width = QUICK_WIDTH if quick else LAB1_WIDTH
    if batches is None:
        batches = QUICK_BATCHES if quick else LAB1_BATCHES
    if repeats is None:
        repeats = QUICK_REPEATS if quick else LAB1_REPEATS
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((width, width), dtype=np.float32)
    products = []
    for batch in batches:
        block = rng.standard_normal((width, batch), dtype=np.float32)
        if batch == 1:
            block = block[:, 0]  # the matrix-vector kernel, as Lab 1's B = 1 selects it
        products.append(Product(width, batch, _median_time(partial(np.matmul, matrix, block), repeats)))
        if progress is not None:
            progress.update()
    t0_products = []
    for small in T0_WIDTHS:
        m = rng.standard_normal((small, small), dtype=np.float32)
        v = rng.standard_normal(small, dtype=np.float32)
        # These calls take microseconds, so one descheduling dwarfs them: take the fastest
        # of many (the overhead a call cannot avoid), not the median.
        t0_products.append(Product(small, 1, min(_times(partial(np.matmul, m, v), 200))))
        if progress is not None:
            progress.update()
    return Calibration(tuple(products), tuple(t0_products), repeats, quick, _memory_bytes(),
                       datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"))


def hardware_overrides(result: Calibration) -> dict[str, str]:
    """The ``[hardware]`` values a calibration measured, as scenario overrides."""
    return {"hardware.memory": f"{(result.memory_bytes or 16e9) / 1e9:g} GB",
            "hardware.bandwidth": f"{result.bandwidth / 1e9:g} GB/s",
            "hardware.flops": f"{result.flops / 1e9:g} GFLOP/s"}


def preset_toml(result: Calibration, name: str) -> str:
    """A hardware preset (the ``[hardware]`` table of one card) from a calibration.

    A scenario loads it with ``[hardware] preset = "path/to/file.toml"`` (relative to the
    scenario); ``[preset] t0`` is the measured per-call time, which
    ``infermodel validate SCENARIO --calibrated`` uses as the efficiency ``t0``.
    """
    machine = platform.machine() or "unknown machine"
    width = result.products[0].width
    memory = (f'"{result.memory_bytes / 1e9:.3f} GB"' if result.memory_bytes
              else '"16 GB"  # the memory size could not be read; set it')
    return "\n".join([
        f'# Hardware preset "{name}": this machine as `infermodel calibrate` measured it',
        "# (Module 10 Lab 1's method: float32 matrix products of growing width, median of "
        "repeats after warm-up).",
        f"# Bandwidth is the effective B = 1 rate; flops the largest achieved rate; ridge "
        f"{result.ridge:.2f} FLOP/byte.",
        "# These are achieved rates: price a scenario on them with [efficiency] model = "
        '"fixed" (every share 1),',
        "# as validate does, or an engine's sustained shares are applied a second time.",
        "",
        "[preset]",
        f'description = "This machine ({machine}, {os.cpu_count()} CPUs), measured {result.when}"',
        f'source = "infermodel calibrate{" --quick" if result.quick else ""}: float32 products '
        f'of a {width}-square matrix, median of {result.repeats} after warm-up"',
        f'ridge = {result.ridge:.4g}',
        f't0 = "{result.t0 * 1e6:.4g} us"',
        "",
        "[hardware]",
        f"memory = {memory}",
        f'bandwidth = "{result.bandwidth / 1e9:.4g} GB/s"',
        f'flops = "{result.flops / 1e9:.4g} GFLOP/s"',
        "",
    ])


def plot_calibration(result: Calibration):
    """The measured products on the machine's roofline (log-log, FLOP/byte against
    GFLOP/s), as Lab 1 draws them; returns a matplotlib figure.
    """
    from ..analyses.figures import new_figure

    figure, (ax,) = new_figure()
    x = np.logspace(np.log10(0.1), np.log10(max(p.intensity for p in result.products) * 4), 200)
    roof = np.minimum(result.flops / 1e9, x * result.bandwidth / 1e9)
    ax.loglog(x, roof, color="#1f77b4",
              label=f"estimated roof: {result.bandwidth / 1e9:.1f} GB/s, "
                    f"{result.flops / 1e9:.0f} GFLOP/s")
    ax.axvline(result.ridge, color="#7f7f7f", linestyle=":",
               label=f"ridge {result.ridge:.1f} FLOP/byte")
    ax.scatter([p.intensity for p in result.products], [p.gflops for p in result.products],
               color="#d62728", zorder=3, label="measured products")
    for p in result.products:
        ax.annotate(f"B={p.batch}", (p.intensity, p.gflops), textcoords="offset points",
                    xytext=(4, -10), fontsize=7)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title("This machine, measured (float32 matrix products)")
    ax.legend(loc="lower right", fontsize=8)
    return figure


__all__ += ["hardware_overrides", "plot_calibration"]
