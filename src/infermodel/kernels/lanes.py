"""Which kernel an engine runs where a table measured several for one configuration.

An attention table holds one row per configuration and cell for each kernel it timed
(its ``kernel_source``: SGLang's ``trtllm_mha``, ``triton`` and ``flashinfer`` on B200,
vLLM's FlashInfer and Triton back-ends, ...). An engine runs one of them, not the
fastest of all: SGLang 0.5.14 runs Triton attention on SM 100 and 103 (B200, B300), and
Triton prefills an 8,192-token prompt of Qwen3.5's shape in 1.21 ms where the TRT-LLM
kernel the same table holds takes 0.25 ms. Taking the fastest row of each cell would
price the engine with a kernel it did not run.

The tables state the engine's default in ``attention_lane_defaults.yaml`` beside them:
the kernel per engine, release and SM version (``default`` names no kernel). The entry
read is that of the highest release listed at or below the table's own: the default of
the release whose rows are read (a scenario of an earlier engine release reads a later
release's tables where they are the oldest that hold the kernel, and that release's
default with them; the package's own estimator keys the entry on the release asked for
and names none below the first entry). Where the entry names a kernel the table timed,
a configuration reads:

1. that kernel's rows, where it measured the configuration;
2. else the rows of the kernel that measured the most configurations of the table
   (then the most rows, then by name), as the estimator ranks its other kernels;

and within the chosen kernel the fastest row of each cell (repeats of one measurement).
Where no entry names one (TensorRT-LLM; vLLM, whose entries say ``default``; releases
below the first entry) a table's cells keep their fastest row, as before: vLLM's B200
tables hold its FlashInfer back-end under two labels, one measuring single-token
prompts and the other longer ones, and choosing one of them would drop the other's
cells. Only the attention families read it (:data:`LANED`).

The file is read with line patterns (three levels of keys, no YAML library needed); a
file that is absent or that this reader does not understand names no default.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

import numpy as np

from .source import card, root, version_key

#: Families whose tables hold several kernels for one configuration, read by lane.
LANED = frozenset({"context_attention", "generation_attention"})
#: The file beside the tables naming each engine's default attention kernel.
DEFAULTS_FILE = "attention_lane_defaults.yaml"
#: A default that names no kernel.
NO_KERNEL = "default"

_ENGINE = re.compile(r"^[\"']?([A-Za-z0-9_.-]+)[\"']?:\s*(?:#.*)?$")
_RELEASE = re.compile(r"^\s+[\"']?([^\"':#]+)[\"']?:\s*(?:#.*)?$")
_ENTRY = re.compile(r"^\s+[\"']?(\d+)[\"']?:\s*[\"']?([A-Za-z0-9_.-]+)[\"']?\s*(?:#.*)?$")


@functools.cache
def defaults() -> Mapping[str, Mapping[str, Mapping[int, str]]]:
    """engine -> release -> SM version -> default kernel, as the tables' file states it
    (empty where the file is absent or says nothing this reader understands).
    """
    path = root() / DEFAULTS_FILE
    if not path.is_file():
        return {}
    return parse_defaults(path.read_text(encoding="utf-8", errors="replace"))


def parse_defaults(text: str) -> dict[str, dict[str, dict[int, str]]]:
    r"""engine -> release -> SM version -> kernel from the file's text (see :func:`defaults`).

    >>> parse_defaults('sglang:\n  "0.5.14":\n    100: triton  # SM 100\n')
    {'sglang': {'0.5.14': {100: 'triton'}}}
    """
    out: dict[str, dict[str, dict[int, str]]] = {}
    engine: str | None = None
    release: str | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            # A top-level key starts an engine; any other top-level line ends the last one,
            # so that nothing after it is read into that engine.
            top = _ENGINE.match(line)
            engine = top.group(1) if top else None
            release = None
            if engine is not None:
                out.setdefault(engine, {})
            continue
        entry = _ENTRY.match(line)
        if entry and engine is not None and release is not None:
            out[engine][release][int(entry.group(1))] = entry.group(2)
            continue
        named = _RELEASE.match(line)
        if named and engine is not None:
            release = named.group(1).strip()
            out[engine].setdefault(release, {})
        elif engine is not None:
            release = None   # a line this reader does not understand: no entries under it
    return out


def default_kernel(system: str, engine: str, version: str) -> tuple[str | None, str]:
    """The kernel the tables name as ``engine``'s default on ``system``'s SM version at
    table release ``version`` (None: none named), and the entry that says so.
    """
    sm = card(system).get("sm_version")
    releases = defaults().get(engine, {})
    held = [r for r in releases if version_key(r) <= version_key(version)]
    if sm is None or not held:
        return None, ""
    release = max(held, key=version_key)
    kernel = releases[release].get(int(sm))
    if kernel is None or kernel == NO_KERNEL:
        return None, ""
    return kernel, f"{engine} {release} on SM {int(sm)}"


def choose(configs: np.ndarray, sources: np.ndarray, default: str | None
           ) -> tuple[np.ndarray, dict[tuple[float, ...], str], tuple[str, ...]]:
    """Per configuration (a row of ``configs``) the kernel it reads, by the module's
    rules: (which rows to keep, configuration -> its kernel, the kernels in precedence).
    """
    sources = np.asarray(sources).astype(str)
    rows = len(sources)
    if rows == 0:
        return np.ones(0, dtype=bool), {}, ()
    keys = configs if configs.shape[1] else np.zeros((rows, 1))
    _, config_id = np.unique(keys, axis=0, return_inverse=True)
    config_id = config_id.reshape(-1)
    lanes = sorted(set(sources.tolist()))
    density = {lane: (-len(np.unique(config_id[sources == lane])), -int((sources == lane).sum()), lane)
               for lane in lanes}
    order = sorted(lanes, key=density.__getitem__)
    if default in density:
        order.remove(default)
        order.insert(0, default)
    chosen = np.full(int(config_id.max()) + 1, -1)
    for rank, lane in enumerate(order):
        has = np.unique(config_id[sources == lane])
        free = has[chosen[has] < 0]
        chosen[free] = rank
    lane_of_row = np.array([order.index(s) for s in sources.tolist()])
    keep = lane_of_row == chosen[config_id]
    picked: dict[tuple[float, ...], str] = {}
    for config, rank in zip(configs[keep].tolist(), lane_of_row[keep].tolist()):
        picked.setdefault(tuple(float(v) for v in config), order[rank])
    return keep, picked, tuple(order)


__all__ = ["DEFAULTS_FILE", "LANED", "NO_KERNEL", "choose", "default_kernel", "defaults",
           "parse_defaults"]
