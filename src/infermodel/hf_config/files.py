"""Reading a model's configuration files from disk within a size bound: the
``config.json`` itself and ModelOpt's ``hf_quant_config.json`` beside it (where an export
keeps its formats), each error naming its file (:mod:`.reader` maps what they hold).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .layers import HFConfigError

__all__ = ["MAX_CONFIG_BYTES", "QUANT_FILE", "has_quantization", "load_json", "quant_file"]

#: Largest config.json accepted, in bytes (real ones are a few kilobytes).
MAX_CONFIG_BYTES = 1_000_000


def load_json(file: Path, expected: str) -> Any:
    """A JSON file's value, read within :data:`MAX_CONFIG_BYTES` (the errors name the file)."""
    from ..output import note_read

    try:
        size = file.stat().st_size
    except FileNotFoundError:
        raise HFConfigError("file not found", path=file, expected=expected) from None
    except OSError as exc:
        raise HFConfigError(f"cannot read the file ({exc.strerror or exc})", path=file) from None
    note_read(file)
    if not file.is_file():
        raise HFConfigError("not a regular file", path=file, expected=expected)
    if size > MAX_CONFIG_BYTES:
        raise HFConfigError(f"file is {size:,} bytes, larger than the {MAX_CONFIG_BYTES:,}-byte limit",
                            path=file, expected="a configuration file (a few kilobytes), not a weights file")
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise HFConfigError(f"cannot read the file ({exc.strerror or exc})", path=file) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise HFConfigError(f"file is larger than the {MAX_CONFIG_BYTES:,}-byte limit", path=file)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise HFConfigError("file is not UTF-8 text", path=file, expected=expected) from None
    try:
        # Infinity and NaN as Python reads them (Nemotron-H: "time_step_limit": [0.0, Infinity]).
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise HFConfigError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                            path=file, expected=expected) from None
    except (ValueError, RecursionError) as exc:
        raise HFConfigError(f"invalid JSON: {exc}", path=file, expected=expected) from None


#: What ModelOpt's quantisation file holds (the checkpoint's formats, beside config.json).
QUANT_FILE = "a ModelOpt hf_quant_config.json ({\"quantization\": {\"quant_algo\": ...}})"


def quant_file(file: Path) -> dict[str, Any] | None:
    """ModelOpt's quantisation file beside a configuration, if there is one: a checkpoint
    exported by ModelOpt keeps its formats and exclusions in ``hf_quant_config.json``
    (``<name>_hf_quant_config.json`` beside ``<name>_config.json``), not in config.json.
    """
    name = file.name
    if name == "config.json":
        sibling = file.with_name("hf_quant_config.json")
    elif name.endswith("_config.json"):
        sibling = file.with_name(name[: -len("config.json")] + "hf_quant_config.json")
    else:
        return None
    if not sibling.exists():
        return None
    data = load_json(sibling, QUANT_FILE)
    quantization = data.get("quantization") if isinstance(data, Mapping) else None
    if not isinstance(quantization, Mapping):
        raise HFConfigError("no \"quantization\" object", path=sibling, key="quantization",
                            expected=QUANT_FILE)
    return _modelopt_config(quantization, sibling)


def has_quantization(config: Any) -> bool:
    """Whether a configuration states its formats itself: a quantization_config that names
    a method or an algorithm (ModelOpt writes a stub without either beside some exports,
    or null; the file beside it holds the formats then).
    """
    if not isinstance(config, Mapping):
        return False
    text = config.get("text_config")
    for where in (config, text if isinstance(text, Mapping) else {}):
        qc = where.get("quantization_config")
        if isinstance(qc, Mapping) and ("quant_method" in qc or "quant_algo" in qc):
            return True
    return False


def _modelopt_config(quantization: Mapping[str, Any], source: Path) -> dict[str, Any]:
    """ModelOpt's ``quantization`` object as the quantization_config it stands for (its
    file named for the notes on it).
    """
    return {**quantization, "quant_method": "modelopt", "source_file": str(source)}
