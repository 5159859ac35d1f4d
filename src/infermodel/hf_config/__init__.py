"""A model's shape read from a Hugging Face ``config.json`` (``[model] hf_config``).

Five modules, one job each: :mod:`.files` reads the files within a size bound
(``config.json`` and ModelOpt's ``hf_quant_config.json`` beside it); :mod:`.reader` maps
a configuration's keys to the fields of a scenario's ``[model]`` table
(:func:`read_hf_config`, :func:`map_hf_config`, the model types' defaults);
:mod:`.layers` reads which layer is which in hybrid, heterogeneous and state-space
families (Jamba, MiniMax, Nemotron-H, DeciLM) into the scenario's ``layer_pattern``, with
the errors and warnings all raise; :mod:`.quantization` reads the checkpoint's formats
from its ``quantization_config`` or the quantisation file; :mod:`.unmodelled` states,
with their size, what a configuration holds that the fields do not express. Nothing in a file is executed,
no weights are loaded and nothing is downloaded.
"""

from .layers import HFConfigError, HFConfigWarning
from .reader import MAX_CONFIG_BYTES, MODEL_TYPE_DEFAULTS, map_hf_config, read_hf_config

__all__ = ["MAX_CONFIG_BYTES", "MODEL_TYPE_DEFAULTS", "HFConfigError", "HFConfigWarning",
           "map_hf_config", "read_hf_config"]
