"""What a serving engine computes, reads and keeps back, and the documents' conventions.

Defaults follow vLLM, SGLang and TensorRT-LLM: prefill scores the output head for each
sequence's last prompt position, a step reads the input-embedding rows it uses, and an
engine keeps memory back for CUDA graphs, NCCL buffers, the allocator and activations.
The documents' simplifications (every prompt position scored, the whole table read every
step, a stated reserve) stay available as conventions their scenarios state.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import infermodel
from conftest import SCENARIOS

# meta-llama/Meta-Llama-3-8B config.json: 32 layers, hidden 4,096, 32 heads, 8 KV heads
# of 128, SwiGLU 14,336, vocabulary 128,256, untied embeddings.
L, D, H, KVH, HD, FF, V = 32, 4096, 32, 8, 128, 14336, 128256
ATTENTION_PARAMS = L * (2 * D * H * HD + 2 * D * KVH * HD)
FFN_PARAMS = L * 3 * D * FF
NORM_PARAMS = (2 * L + 1) * D
HEAD = V * D
N_MATMUL = ATTENTION_PARAMS + FFN_PARAMS + NORM_PARAMS + HEAD  # the untied input table is a lookup


def llama(write_scenario, efficiency: str = "", batch: int = 1, extra: str = "") -> object:
    return write_scenario(
        '[model]\npreset = "llama-3-8b"\n[hardware]\npreset = "h100-sxm"\n'
        f"[workload]\nbatch = {batch}\nprompt_tokens = 1024\noutput_tokens = 256\n"
        f"[efficiency]\n{efficiency}\n{extra}")


def test_llama_3_8b_prefill_scores_one_position_per_sequence_by_default(write_scenario):
    n, batch = 1024, 2
    attention = 2 * L * H * HD * n**2  # causal: half of 4·layers·d_q·n²
    r = infermodel.evaluate(llama(write_scenario, batch=batch))
    assert N_MATMUL == 7_504_924_672 and r["params_matmul"] == N_MATMUL
    assert r["prefill_logit_positions"] == 1
    last = batch * (2 * (N_MATMUL - HEAD) * n + 2 * HEAD * 1 + attention)
    assert r["prefill_flops"] == last


def test_all_positions_convention_scores_every_prompt_position(write_scenario):
    n, batch = 1024, 2
    attention = 2 * L * H * HD * n**2
    r = infermodel.evaluate(llama(write_scenario, 'prefill_logits = "all"', batch=batch))
    assert r["prefill_logit_positions"] == n
    assert r["prefill_flops"] == batch * (2 * N_MATMUL * n + attention)
    default = infermodel.evaluate(llama(write_scenario, batch=batch))
    # The difference is exactly the head for the other n − 1 positions of each sequence.
    assert r["prefill_flops"] - default["prefill_flops"] == batch * 2 * HEAD * (n - 1)


def test_a_small_model_with_a_big_vocabulary_gains_most(write_scenario):
    # Qwen2.5-0.5B (tied, vocabulary 151,936, width 896): the head is a large share.
    def ttft(convention):
        path = write_scenario('[model]\npreset = "qwen2.5-0.5b"\n[hardware]\npreset = "h100-sxm"\n'
                              "[workload]\nprompt_tokens = 1024\noutput_tokens = 128\n"
                              f'[efficiency]\nprefill_logits = "{convention}"\nmodel = "fixed"\n')
        return infermodel.evaluate(path)["ttft"]  # the ideal roofline: FLOPs alone decide
    # Scoring every prompt position inflates TTFT by about a quarter (26 %).
    assert 0.25 < 1 - ttft("last") / ttft("all") < 0.28


def test_decode_reads_the_embedding_rows_it_uses(write_scenario):
    batch = 4
    # The ideal roofline, so that the bytes alone set the step.
    rows = infermodel.evaluate(llama(write_scenario, 'model = "fixed"', batch=batch))
    table = infermodel.evaluate(llama(write_scenario, 'embedding_reads = "table"\nmodel = "fixed"',
                                      batch=batch))
    assert table["weight_bytes_per_step"] == table["weight_bytes"]
    # bf16: the table is V·d·2 bytes; a step reads one row per sequence.
    assert rows["embedding_table_bytes"] == V * D * 2
    assert rows["weight_bytes_per_step"] == rows["weight_bytes"] - (V - batch) * D * 2
    assert rows["tpot"] < table["tpot"]
    assert 0.05 < 1 - rows["tpot"] / table["tpot"] < 0.08  # the 1 GB table of a 16 GB artifact
    # Prefill reads one row per prompt token.
    n = 1024
    assert rows["prefill_bytes"] == pytest.approx(
        table["prefill_bytes"] - (V - batch * n) * D * 2, rel=1e-12)


def test_tied_embeddings_are_read_once_as_the_head(write_scenario):
    path = write_scenario('[model]\npreset = "qwen2.5-0.5b"\n[hardware]\npreset = "h100-sxm"\n'
                          "[workload]\nprompt_tokens = 1024\noutput_tokens = 128\n")
    r = infermodel.evaluate(path)
    assert r["embedding_bytes_unread"] == 0
    assert r["weight_bytes_per_step"] == r["weight_bytes"]


def test_quantised_table_bytes_follow_the_embedding_class_format():
    r = infermodel.evaluate(SCENARIOS / "module10-case-artifact.toml",
                            {"efficiency.embedding_reads": "rows"})
    # Module 10 §1 "Why the simple byte estimate is useful": the 8-bit input table of the
    # case's mixed-precision file is about 0.623 GB.
    assert r["embedding_table_bytes"] == pytest.approx(152064 * 4096 * 1, rel=1e-3)
    assert round(r["embedding_table_bytes"] / 1e9, 3) == 0.623


@pytest.mark.parametrize("name", ["case-study-24gb", "inference-lab-roofline", "module10-lab1-48gb",
                                  "moe-module10-example", "planner-70b-32-users"])
def test_document_scenarios_state_their_conventions(name):
    s = infermodel.load_scenario(SCENARIOS / f"{name}.toml")
    assert s.value("efficiency.prefill_logits") == "all"
    assert s.value("efficiency.embedding_reads") == "table"
    assert s.value("hardware.reserve") is not None


# ---------------------------------------------------------------- memory not weights or cache


def test_engine_reserve_and_activation_workspace_by_default(write_scenario):
    r = infermodel.evaluate(llama(write_scenario))
    memory = 81559 * 2**20  # H100 80 GB as nvidia-smi reports it
    assert r["memory_bytes"] == memory
    # vLLM: gpu_memory_utilization = 0.9, activations profiled at 8,192 batched tokens.
    per_token = 2 * (2 * D + H * HD + 2 * KVH * HD + 2 * FF)
    workspace = 8192 * per_token + 1 * V * 4
    assert r["activation_workspace_bytes"] == workspace
    assert r["memory_reserved"] == pytest.approx(0.1 * memory + workspace, rel=1e-12)
    assert r["kv_budget_bytes"] == pytest.approx(0.9 * memory - workspace - r["weight_bytes"], rel=1e-12)
    assert not [w for w in r.warnings if w.quantity == "memory_reserved"]


@pytest.mark.parametrize("engine", ["sglang", "tensorrt-llm"])
def test_other_engines_keep_their_own_reserve(write_scenario, engine):
    r = infermodel.evaluate(llama(write_scenario, f'engine = "{engine}"'))
    m, w, a = r["memory_bytes"], r["weight_bytes"], r["activation_workspace_bytes"]
    if engine == "sglang":
        # SGLang's server (python/sglang/srt/server_args.py, _handle_gpu_memory_settings,
        # 0.5.3 on) on an H100 of 81,559 MiB at tensor-parallel size 1: below 90 GiB,
        # chunked_prefill_size 8,192 and cuda_graph_max_bs 256, so it reserves
        # 512 + 8,192·1.5 + 256·2 + 1/8·1,024 = 13,440 MiB (above its 10 GiB floor) and
        # mem_fraction_static = round((81,559 − 13,440) / 81,559, 3) = 0.835; activations
        # live in the other 16.5 %.
        assert r["prefill_chunk_tokens"] == 8192
        assert r["engine_kept_fraction"] == pytest.approx(0.165, abs=1e-12)
        assert r["memory_reserved"] == pytest.approx(max(0.165 * m, a), rel=1e-9)
    else:  # free_gpu_memory_fraction = 0.9 of what weights and activations leave
        assert r["kv_budget_bytes"] == pytest.approx(0.9 * (m - w - a), rel=1e-12)


@pytest.mark.parametrize("engine, on_demand, mixed, chunked", [
    ("vllm", 1, 1, 1), ("vllm-v0", 1, 0, 0), ("sglang", 1, 0, 1), ("tensorrt-llm", 0, 1, 0),
    ("none", 0, 0, 0)])
def test_each_engine_states_how_it_admits_and_batches_a_prompt(write_scenario, engine, on_demand,
                                                               mixed, chunked):
    # vLLM and SGLang page a request's cache in on demand; TensorRT-LLM's default
    # GUARANTEED_NO_EVICT policy admits only what fits at full length. vLLM V1 and
    # TensorRT-LLM's in-flight batching run a prompt beside the decodes; SGLang (without
    # --enable-mixed-chunk) and vLLM V0 (without chunked prefill) prefill apart.
    # TensorRT-LLM chunks a context only with enable_chunked_prefill, off by default.
    r = infermodel.evaluate(llama(write_scenario, f'engine = "{engine}"'))
    assert (r["engine_admits_on_demand"], r["engine_mixed_batches"]) == (on_demand, mixed)
    assert r["engine_chunked_prefill"] == chunked
    stated = infermodel.evaluate(llama(write_scenario, f'engine = "{engine}"\n'
                                       f'admission = "{"reserve" if on_demand else "paged"}"\n'
                                       f'mixed_batches = {"false" if mixed else "true"}'))
    assert (stated["engine_admits_on_demand"], stated["engine_mixed_batches"]) == (
        1 - on_demand, 1 - mixed)
    # The documents' budget is the same whatever the admission.
    assert stated["max_sequences"] == r["max_sequences"]
    if engine == "vllm-v0":  # V0 runs prompt chunks beside the decodes once it chunks
        chunking = infermodel.evaluate(llama(write_scenario, 'engine = "vllm-v0"\n'
                                             'chunked_prefill = true'))
        assert chunking["engine_mixed_batches"] == 1


def test_sglang_memory_follows_the_card_and_its_release(write_scenario):
    """SGLang's share by card and tensor degree (its server's heuristic since 0.5.3), the
    fixed shares of earlier releases, and a stated ``mem_fraction_static``.
    """
    from infermodel_builtins.engines import MIB, sglang_memory

    # B200 (180 GiB = 184,320 MiB) at tensor degree 8: above 160 GiB, chunks of 16,384
    # and graphs to 512; 512 + 16,384·1.5 + 512·2 + 8/8·1,024 = 27,136 MiB reserved,
    # (184,320 − 27,136) / 184,320 = 0.8528 → 0.853.
    b200 = sglang_memory(180 * 1024 * MIB, tensor=8)
    assert (b200.chunk_tokens, b200.graph_max_batch, b200.reserved_mib, b200.fraction) == (
        16384, 512, 27136.0, 0.853)
    # Eight data-parallel attention ranks of one card each (SGLang's tp_size 8, dp_size 8)
    # on an H200: 14,848 MiB as at tensor degree 8, plus 512·8·3 and, above 300 captured
    # sequences, 512·8·1.5 MiB more: 33,280 MiB.
    assert sglang_memory(143_771 * MIB, tensor=1, attention_data=8).reserved_mib == 33280.0
    # A small card: an L4 (23,034 MiB, between 20 and 35 GiB: 24 graphs below tensor
    # degree 4) keeps 512 + 2,048·1.5 + 24·2 + 128 = 3,760 MiB, no 10 GiB floor below 60 GiB.
    assert sglang_memory(23_034 * MIB).reserved_mib == 3760.0
    old = infermodel.evaluate(llama(write_scenario, 'engine = "sglang"\nengine_version = "v0.4.3"'))
    assert old["engine_kept_fraction"] == pytest.approx(0.12, abs=1e-12)
    # A chunk the server is given enters its reserve before the share is reckoned: an H200
    # at tensor degree 1 with chunks of 32,768 reserves 512 + 32,768·1.5 + 256·2 + 128 =
    # 50,304 MiB, (143,771 − 50,304) / 143,771 = 0.650.
    from infermodel_builtins.engines import scheduler_defaults

    assert scheduler_defaults("sglang", 143_771 * MIB, "h200", chunk_tokens=32768).kept_fraction == (
        pytest.approx(0.35, abs=1e-9))
    # Before 0.5.3 the fixed share went by SGLang's tp_size, every rank with data-parallel
    # attention: eight ranks of one card each kept 0.19, as tensor degree 8 did.
    assert scheduler_defaults("sglang", 141e9, "h200", tensor=1, attention_data=8,
                              version="0.4.3").kept_fraction == pytest.approx(0.19, abs=1e-9)
    stated = infermodel.evaluate(llama(write_scenario, 'engine = "sglang"\nmemory_fraction = 0.95'))
    assert stated["engine_kept_fraction"] == pytest.approx(0.05, abs=1e-12)
    assert stated["memory_reserved"] == pytest.approx(
        max(0.05 * stated["memory_bytes"], stated["activation_workspace_bytes"]), rel=1e-9)


def test_a_prefill_chunk_sizes_the_workspace(write_scenario):
    small = infermodel.evaluate(llama(write_scenario, "prefill_chunk = 2048"))
    big = infermodel.evaluate(llama(write_scenario))
    per_token = small["activation_bytes_per_token"]
    assert big["activation_workspace_bytes"] - small["activation_workspace_bytes"] == 6144 * per_token


def test_no_reserve_is_never_silent(write_scenario):
    none = infermodel.evaluate(llama(write_scenario, 'engine = "none"'))
    assert none["memory_reserved"] == 0
    assert any("no memory is kept back" in w and w.quantity == "memory_reserved"
               for w in none.warnings)
    zero = infermodel.evaluate(write_scenario(
        '[model]\npreset = "llama-3-8b"\n[hardware]\npreset = "h100-sxm"\nreserve = 0\n'
        "[workload]\nprompt_tokens = 1024\noutput_tokens = 256\n"))
    # A stated zero is the scenario's own choice, shown in the derivation, not a warning.
    assert zero["memory_reserved"] == 0
    assert not [w for w in zero.warnings if w.quantity == "memory_reserved"]
    assert "warnings" in none.to_dict() and none.to_dict()["warnings"]


def test_a_stated_reserve_is_the_whole_allowance():
    # Module 10 Lab 1: 2.5 GB kept back on the 24 GB card, activations included.
    r = infermodel.evaluate(SCENARIOS / "case-study-24gb.toml")
    assert r["memory_reserved"] == 2.5e9 and "activation_workspace_bytes" not in r


def test_runtime_memory_raises_capacity_over_decimal(write_scenario):
    decimal = infermodel.evaluate(llama(write_scenario), {"hardware.memory": 80e9})
    runtime = infermodel.evaluate(llama(write_scenario))
    assert runtime["max_sequences"] > decimal["max_sequences"]


@settings(max_examples=30, deadline=None)
@given(batch=st.integers(1, 512), prompt=st.integers(1, 8192))
def test_rows_never_read_more_than_the_table(batch, prompt):
    r = infermodel.evaluate(SCENARIOS / "quant-bf16.toml",
                            {"workload.batch": batch, "workload.prompt_tokens": prompt})
    assert 0 <= r["embedding_bytes_unread"] <= r["embedding_table_bytes"]
    assert 0 <= r["embedding_bytes_unread_prefill"] <= r["embedding_table_bytes"]
    assert r["weight_bytes_per_step"] <= r["weight_bytes"]


def test_a_chunk_scores_at_most_its_last_position():
    # Module 10 Lab 3's hybrid iteration (512-token chunk beside 17 decodes) counts the head
    # for every position; engines score the decodes and at most the chunk's last position.
    chunked = SCENARIOS / "module10-chunked-prefill.toml"
    documents = infermodel.evaluate(chunked)
    engine = infermodel.evaluate(chunked, {"efficiency.prefill_logits": "last"})
    assert documents["hybrid_iteration_time"] == pytest.approx(116.04e-3, abs=5e-6)
    assert documents["hybrid_flops"] - engine["hybrid_flops"] == 2 * 152064 * 4096 * (512 - 1)


def test_a_cached_prefix_saves_no_head_it_never_scored():
    # Module 10's case with a 3,000-token shared prefix: under the documents' convention the
    # prefix's positions were scored by the head too; engines score only the last position.
    prefix = SCENARIOS / "prefix-module10-case.toml"
    documents = infermodel.evaluate(prefix)
    engine = infermodel.evaluate(prefix, {"efficiency.prefill_logits": "last"})
    r = documents["prefix_reused_tokens"]
    assert documents["prefix_saved_prefill_flops"] - engine["prefix_saved_prefill_flops"] == (
        2 * 152064 * 4096 * r)
    assert engine["prefix_ttft_warm"] < engine["prefix_ttft_cold"] < documents["prefix_ttft_cold"]


@given(fraction=st.floats(0.05, 1.0), engine=st.sampled_from(["vllm", "sglang", "tensorrt-llm"]))
@settings(max_examples=8, deadline=None)
def test_a_stated_memory_fraction_is_what_every_engine_keeps_back(tmp_path_factory, fraction, engine):
    """``efficiency.memory_fraction`` is the engine's own flag: 1 − it is kept back, by the
    engine's rule (SGLang: the activations inside that share).
    """
    path = tmp_path_factory.mktemp("fraction") / "s.toml"
    path.write_text('[model]\npreset = "llama-3-8b"\n[hardware]\npreset = "h100-sxm"\n'
                    "[workload]\nprompt_tokens = 1024\noutput_tokens = 256\n"
                    f'[efficiency]\nengine = "{engine}"\nmemory_fraction = {fraction!r}\n')
    r = infermodel.evaluate(path)
    kept = 1 - fraction
    assert r["engine_kept_fraction"] == pytest.approx(kept, abs=1e-9)
    m, a = r["memory_bytes"], r["activation_workspace_bytes"]
    if engine == "sglang":
        assert r["memory_reserved"] == pytest.approx(max(kept * m, a), rel=1e-9, abs=1.0)


@pytest.mark.parametrize("extra, phrase", [
    ('[hardware]\npreset = "h100-sxm"\nreserve = "5 GB"\n[efficiency]\nmemory_fraction = 0.8\n',
     "hardware.reserve states what is kept back itself"),
    ('[hardware]\npreset = "h100-sxm"\n[efficiency]\nengine = "none"\nmemory_fraction = 0.8\n',
     'engine = "none" keeps nothing back'),
])
def test_a_memory_fraction_the_engine_cannot_apply_is_one_clear_error(tmp_path, capsys, extra, phrase):
    from infermodel.cli import main

    path = tmp_path / "s.toml"
    path.write_text('[model]\npreset = "llama-3-8b"\n[workload]\nprompt_tokens = 1024\n'
                    f"output_tokens = 256\n{extra}")
    before = path.read_text()
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "efficiency.memory_fraction" in err and phrase in err and "Traceback" not in err
    assert path.read_text() == before
