"""Ledger rows at concurrency > 1: a closed loop of the row's clients in the serving
simulator (``infermodel.accuracy.row_simulation``), and its cross-check against the analytic
steady state the fit searches on (``infermodel.accuracy.closed_loop``).
"""

from __future__ import annotations

import math
from pathlib import Path

import attrs
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infermodel.accuracy.closed_loop import closed_loop, decode_running, prefill_pool_wait
from infermodel.accuracy.ledger import read_ledger
from infermodel.accuracy.row_simulation import MAX_TOKENS, ROUNDS, simulate_row, unsupported
from infermodel.simulator import CostModel

HEADER = ("id,source,engine,hardware,gpus,model,hf_config,weights,kv_cache,tensor,expert,"
          "isl,osl,concurrency,metric,statistic,value")


def _rows(tmp_path: Path, concurrency: int, *, isl=1024, osl=256, metrics=("ttft_ms", "itl_ms",
          "tpot_ms", "output_tokens_per_s"), statistic="mean", model="llama-3.1-8b"):
    lines = [HEADER] + [f"{m},https://example.org,vllm 0.10,h100-sxm,1,{model},,,,1,1,{isl},{osl},"
                        f"{concurrency},{m},{statistic},10" for m in metrics]
    path = tmp_path / "ledger.csv"
    path.write_text("\n".join(lines) + "\n")
    return read_ledger(path)


def test_one_client_in_the_simulator_is_one_prefill_then_decode_steps():
    # One client: every request runs alone, so its first token is one prefill iteration
    # and each later token one decode iteration over its growing context (Lab 3's cost).
    cost = CostModel.lab3(overhead=1e-3)
    figures = simulate_row(cost, "vllm", 100, 10, 1)
    assert figures.measured == ROUNDS - 2 and figures.warmup == 1
    ttft = cost.iteration_time([], [(100, 0)])
    gaps = [cost.iteration_time([100 + j], []) for j in range(9)]
    assert figures.value("ttft_ms", "mean") == pytest.approx(ttft * 1e3, rel=1e-12)
    assert figures.value("tpot_ms", "median") == pytest.approx(sum(gaps) / 9 * 1e3, rel=1e-12)
    assert figures.value("itl_ms", "mean") == pytest.approx(sum(gaps) / 9 * 1e3, rel=1e-12)
    assert figures.value("output_tokens_per_s", "mean") == pytest.approx(
        10 / (ttft + sum(gaps)), rel=1e-12)


def test_a_requests_way_through_the_server_adds_to_its_first_token_and_its_cycle():
    # Time outside the iterations (request_time): each first token comes that much later,
    # the iterations are the same, and the throughput is over the longer cycle.
    cost = CostModel.lab3(overhead=1e-3)
    base = simulate_row(cost, "vllm", 100, 10, 1)
    figures = simulate_row(cost, "vllm", 100, 10, 1, request_time=0.05)
    assert figures.value("ttft_ms", "mean") == pytest.approx(
        base.value("ttft_ms", "mean") + 50.0, rel=1e-12)
    assert figures.value("tpot_ms", "median") == pytest.approx(base.value("tpot_ms", "median"),
                                                               rel=1e-12)
    e2e = np.mean(figures.ttft) + np.mean(figures.tpot) * 9
    assert figures.output_tokens_per_s == pytest.approx(10 / e2e, rel=1e-9)
    # Several clients: every first token gains the same time, and Little's law holds over
    # the longer cycle.
    base = simulate_row(cost, "sglang", 2000, 200, 12)
    many = simulate_row(cost, "sglang", 2000, 200, 12, request_time=0.2)
    np.testing.assert_allclose(many.ttft, base.ttft + 0.2, rtol=1e-12)
    e2e = np.mean(many.ttft) + np.mean(many.tpot) * 199
    assert many.output_tokens_per_s == pytest.approx(12 * 200 / e2e, rel=1e-9)


def test_a_prefill_server_that_batches_prompts_serves_them_at_its_batchs_pace():
    # A prefill server of 8 attention ranks prefills 8 prompts in one pass of 40 ms where
    # one prompt alone takes 10 ms. Alone, a prompt is served in 10 ms; saturated, the
    # server turns 8 prompts every 40 ms (200 a second), not 8 every 10 ms.
    assert prefill_pool_wait(0.010, 1, 1.0, servers=8, full=0.040) == pytest.approx(0.010)
    clients, think = 400, 1.0
    wait = prefill_pool_wait(0.010, clients, think, servers=8, full=0.040)
    assert clients / (wait + think) == pytest.approx(8 / 0.040, rel=0.01)
    independent = prefill_pool_wait(0.010, clients, think, servers=8)
    assert wait > 10 * independent
    # Where a full batch takes no longer than one prompt, the servers are independent.
    assert prefill_pool_wait(0.010, clients, think, servers=8, full=0.010) == independent


def test_a_prefill_pool_that_queues_keeps_the_decode_batch_to_its_share_of_the_cycle():
    # 1,000 clients, one prefill server of 0.5 s a prompt, 100 decode steps of 10 ms: the
    # prefill server turns 2 prompts a second, so by Little's law 2 clients a second spend
    # their 1 s in decode: the decode batch is 2, not the 1,000 clients.
    def cycle(running):
        tpot = 0.010
        return tpot, prefill_pool_wait(0.5, 1000, 100 * tpot)

    assert decode_running(1000, 1, 1000, 101, 0.0, cycle) == 2
    # A prefill pool that never queues leaves every client decoding (to the batch cap).
    assert decode_running(1000, 4, 64, 101, 0.0, lambda n: (0.010, 0.0)) == 64
    assert decode_running(100, 4, 64, 101, 0.0, lambda n: (0.010, 0.0)) == 25


def test_a_slowly_settling_decode_batch_is_the_largest_fixed_point():
    # A balanced pool, where each round of a plain iteration would shrink the batch by a
    # few per cent: the answer still satisfies Little's law exactly, and is the largest
    # batch that does (one more sequence gives fewer).
    def cycle(running):
        tpot = 0.002 + 4e-6 * running
        return tpot, prefill_pool_wait(0.004, 2048, 499 * tpot)

    def settled(n):
        tpot, first = cycle(n)
        return max(1, min(math.ceil(2048 * 499 * tpot / (499 * tpot + first)), 2048))

    running = decode_running(2048, 1, 2048, 500, 0.0, cycle)
    assert settled(running) == running
    assert all(settled(n) < n for n in range(running + 1, 2049, 97))


def test_simulated_pools_settle_the_decode_batch_with_the_prefill_servers_queue():
    # One prefill server for 400 clients of 1,000-token prompts and 500 output tokens
    # (Module 10 Lab 3's reference device on both pools): the decode server runs the
    # clients' share of the cycle spent decoding, read back from the simulated figures.
    from infermodel.accuracy.ledger import Pool, Pools
    from infermodel.accuracy.row_simulation import simulate_pools

    cost = CostModel.lab3()
    pools = Pools(Pool(workers=1, batch=8, tensor=1), Pool(workers=1, batch=512, tensor=1))
    figures = simulate_pools(cost, cost, pools, 1000, 500, 400)
    decoding = 499 * figures.tpot
    share = decoding / (decoding + float(np.mean(figures.ttft)))
    assert figures.decode_running < 400
    assert figures.decode_running == math.ceil(400 * share)


def test_a_sequential_hand_off_adds_the_decode_servers_way_to_the_first_token():
    # The decode server's own way (handoff_time, 80 ms) comes after the prefill server's
    # (request_time, 50 ms): at one client each first token is that much later, and the
    # client's cycle is too (the decode batch holds its share of the longer cycle).
    from infermodel.accuracy.ledger import Pool, Pools
    from infermodel.accuracy.row_simulation import simulate_pools

    cost = CostModel.lab3()
    pools = Pools(Pool(workers=1, batch=8, tensor=1), Pool(workers=1, batch=512, tensor=1),
                  handoff="sequential")
    alone = simulate_pools(cost, cost, pools, 1000, 500, 1, request_time=0.05)
    handed = simulate_pools(cost, cost, pools, 1000, 500, 1, request_time=0.05,
                            handoff_time=0.08)
    np.testing.assert_allclose(handed.ttft, alone.ttft + 0.08, rtol=1e-12)
    assert handed.tpot == pytest.approx(alone.tpot, rel=1e-12)
    # Twenty clients on a prefill server near its capacity: the longer cycle leaves fewer
    # of them decoding at once, and the decode batch still holds their share of it.
    plain = simulate_pools(cost, cost, pools, 1000, 500, 20, request_time=0.05)
    many = simulate_pools(cost, cost, pools, 1000, 500, 20, request_time=0.05,
                          handoff_time=0.4)
    assert many.decode_running < plain.decode_running
    assert float(np.mean(many.ttft)) > float(np.mean(plain.ttft)) + 0.3
    decoding = 499 * many.tpot
    share = decoding / (decoding + float(np.mean(many.ttft)))
    assert many.decode_running == math.ceil(20 * share)


def test_the_decode_batch_settles_where_littles_law_holds():
    # A step that grows with the batch and a prefill station that queues: the result is a
    # fixed point, the decode share of the cycle (ceiled) giving back the same batch.
    for clients in (8, 64, 300, 1200):
        def cycle(running, clients=clients):
            tpot = 0.008 + 2e-5 * running
            return tpot, prefill_pool_wait(0.2, clients, 511 * tpot + 0.05, servers=4, full=0.5)

        running = decode_running(clients, 1, 512, 512, 0.05, cycle)
        tpot, first = cycle(running)
        share = 511 * tpot / (511 * tpot + first + 0.05)
        assert running == max(1, min(math.ceil(clients * share), 512))
        assert running <= clients


def test_statistics_and_littles_law():
    cost = CostModel.lab3()
    figures = simulate_row(cost, "sglang", 2000, 200, 12)
    assert figures.measured == (ROUNDS - 2) * 12
    ttft = figures.ttft * 1e3
    assert figures.value("ttft_ms", "mean") == pytest.approx(np.mean(ttft))
    assert figures.value("ttft_ms", "unspecified") == figures.value("ttft_ms", "mean")
    assert figures.value("ttft_ms", "median") == pytest.approx(np.median(ttft))
    assert figures.value("ttft_ms", "p99") == pytest.approx(np.quantile(ttft, 0.99))
    assert figures.value("itl_ms", "median") <= figures.value("itl_ms", "p99")
    # A closed loop with no think time keeps 12 requests in the system: throughput is
    # 12 · osl / E[e2e], and each request's e2e is its TTFT plus (osl − 1) gaps.
    e2e = np.mean(figures.ttft) + np.mean(figures.tpot) * 199
    assert figures.output_tokens_per_s == pytest.approx(12 * 200 / e2e, rel=1e-9)


def test_warm_up_is_excluded():
    # Every client starts at once, so the first round queues behind all prompts; the
    # measured rounds see the staggered steady state.
    cost = CostModel.lab3()
    figures = simulate_row(cost, "vllm", 4000, 300, 8)
    one_prefill = cost.iteration_time([], [(4000, 0)])
    assert np.mean(figures.ttft) < 3 * one_prefill


@pytest.mark.parametrize("concurrency", [4, 16, 64])
def test_simulator_and_analytic_steady_state_agree_below_capacity(tmp_path, host, concurrency):
    """The analytic stand-in the fit searches on is close to the simulation it scales:
    throughput within 10 % and ITL within 20 % on a deployment whose cache holds every
    client (the residual is the stand-in's approximations: an M/D/1 wait, a mean stall).
    """
    from infermodel.accuracy.predictions import cost_model as _cost_model
    from infermodel.accuracy.predictions import predict_arrays as _predict_arrays
    from infermodel.accuracy.predictions import (
        preset_efficiency,
    )
    from infermodel.accuracy.predictions import row_model as _row_model

    efficiency = preset_efficiency("vllm", host=host)
    for row in _rows(tmp_path, concurrency, metrics=("itl_ms", "output_tokens_per_s")):
        model = _row_model(row, host=host)
        assert not isinstance(model, str) and model.capacity > concurrency
        analytic = float(_predict_arrays(model, row, efficiency.candidates())[0])
        simulated = simulate_row(_cost_model(model, row, efficiency), "vllm", row.isl, row.osl,
                                 concurrency).value(row.metric, row.statistic)
        tolerance = 0.10 if row.metric == "output_tokens_per_s" else 0.20
        assert simulated == pytest.approx(analytic, rel=tolerance), row.metric


def test_calibrated_rows_above_one_client_are_the_simulation(tmp_path, host):
    from infermodel.accuracy.predictions import (
        Simulations,
        predict_rows,
        preset_efficiency,
    )
    from infermodel.accuracy.predictions import cost_model as _cost_model
    from infermodel.accuracy.predictions import row_model as _row_model

    rows = _rows(tmp_path, 8, statistic="median")
    points = predict_rows(rows, host=host, simulations=Simulations()).points
    efficiency = preset_efficiency("vllm", host=host)
    model = _row_model(rows[0], host=host)
    figures = simulate_row(_cost_model(model, rows[0], efficiency), "vllm", 1024, 256, 8)
    for point in points:
        assert point.predicted == pytest.approx(figures.value(point.row.metric, "median"),
                                                rel=1e-12)


def test_the_analytic_stand_in_at_one_client_is_the_roofline():
    state = closed_loop(0.2, 0.01, 1, 10, 50)
    assert float(state.ttft) == 0.2 and float(state.itl) == 0.01


def test_a_burst_decodes_after_the_prompts_behind_its_own():
    # 5 clients at once, T_p = 0.1 s, T_d = 0.02 s, 11 output tokens: the mean first
    # token waits (5 + 1)/2 prefills (0.3 s); each request's decoding is stalled by the
    # (5 − 1)/2 prefills behind it on average, over its 10 steps: 0.02 + 0.2/10 = 0.04 s.
    state = closed_loop(0.1, 0.02, 5, 10, 11, rounds=1)
    assert float(state.ttft) == pytest.approx(0.3) and float(state.itl) == pytest.approx(0.04)


@given(st.floats(1e-4, 1.0), st.floats(1e-4, 0.1), st.integers(1, 512), st.integers(2, 4096))
def test_every_request_of_a_burst_ends_with_the_last_prefill_and_the_decode_steps(
        prefill, step, clients, output):
    # Identity: all B prompts are prefilled before the batch decodes, so a request's mean
    # end-to-end time (first token, then its inter-token times) is B·T_p + (osl − 1)·T_d.
    state = closed_loop(prefill, step, clients, clients, output, rounds=1)
    mean_e2e = float(state.ttft) + (output - 1) * float(state.itl)
    assert mean_e2e == pytest.approx(clients * prefill + (output - 1) * step, rel=1e-9)
    assert float(state.e2e) == pytest.approx(mean_e2e, rel=1e-9)
    assert float(state.output_tokens_per_s) == pytest.approx(clients * output / mean_e2e, rel=1e-9)


def test_a_burst_of_one_token_requests_has_no_inter_token_stall():
    state = closed_loop(0.1, 0.02, 5, 10, 1, rounds=1)
    assert float(state.itl) == 0.02 and float(state.ttft) == pytest.approx(0.3)


def test_rows_beyond_the_simulation_bound_take_the_analytic_closed_loop(tmp_path, host):
    from infermodel.accuracy.predictions import (
        ANALYTIC,
        predict_arrays,
        predict_rows,
        preset_efficiency,
    )
    from infermodel.accuracy.predictions import row_model as _row_model

    (row,) = _rows(tmp_path, 40_000, isl=400, osl=400, metrics=("ttft_ms",),
                   model="smollm2-135m")
    assert ROUNDS * 40_000 * 800 > MAX_TOKENS
    assert "tokens" in unsupported(row)
    (point,) = predict_rows([row], host=host).points
    model = _row_model(row, host=host)
    expected = predict_arrays(model, row, preset_efficiency("vllm", host=host).candidates())[0]
    assert point.method == ANALYTIC and point.predicted == pytest.approx(expected, rel=1e-12)


@pytest.mark.slow
def test_shipped_ledger_prediction_is_quick(shipped_calibrated):
    """The whole shipped ledger (824 rows, a few hundred simulated runs) predicts within a
    bound with room for a shared machine, timed as ``validate --ledger builtin
    --calibrated --jobs 2`` runs it (two worker processes; the session's shared run):
    172 s at a load average of 10 on two cores with a fit running beside it; the bound
    grew with the ledger (564 rows: 120 s).
    """
    data, seconds = shipped_calibrated
    assert seconds < 180
    assert data["points"] and all(math.isfinite(p["predicted"]) for p in data["points"])


# ---------------------------------------------------------------------------------
# Per-card refinements of an engine family's preset
# ---------------------------------------------------------------------------------


def _cards_ledger(tmp_path, cards: dict[str, tuple[str, ...]]):
    """Single-request rows on each card from each of its sources (no simulation)."""
    lines = [HEADER]
    for card, sources in cards.items():
        for source in sources:
            for isl in (512, 4096):
                for metric, value in (("ttft_ms", isl / 20), ("itl_ms", 9.0)):
                    lines.append(f"{card}-{source}-{isl}-{metric},https://example.org/{source},"
                                 f"trtllm 1.0,{card},1,llama-3.1-8b,,,,1,1,{isl},128,1,{metric},"
                                 f"mean,{value}")
    path = tmp_path / "ledger.csv"
    path.write_text("\n".join(lines) + "\n")
    return read_ledger(path)


def test_refined_cards_need_two_independent_sources_and_a_second_card(tmp_path):
    from infermodel.accuracy.fits import REFINE_MIN_SOURCES, _refined_cards

    assert REFINE_MIN_SOURCES == 2
    rows = _cards_ledger(tmp_path, {"h100-sxm": ("a", "b"), "l40s": ("a",)})
    assert _refined_cards(rows) == ["h100-sxm"]
    # One card alone is the family itself: no refinement.
    assert _refined_cards([r for r in rows if r.hardware == "h100-sxm"]) == []


def test_a_refinements_held_out_points_come_from_its_cards_other_source(tmp_path, host):
    from infermodel.accuracy.fits import CARD_PARAMETERS, fit

    rows = _cards_ledger(tmp_path, {"h100-sxm": ("a", "b"), "l40s": ("a",)})
    result = fit(rows, host=host)
    assert set(result.efficiencies) == {"trtllm", "trtllm-h100-sxm"}
    inside, held = result.points["trtllm-h100-sxm"]
    assert {p.row.hardware for p in inside + held} == {"h100-sxm"}
    # A refinement refits the card's own shares only; the engine's times stay.
    refined = result.efficiencies["trtllm-h100-sxm"].as_dict()
    family = result.efficiencies["trtllm"].as_dict()
    assert {n for n in refined if refined[n] != family[n]} <= set(CARD_PARAMETERS)
    by_id = {p.row.id: p for p in result.held_out.points}
    assert all(by_id[p.row.id] == p for p in held)


def test_rows_on_a_refined_card_are_predicted_with_its_preset(tmp_path, host):
    from infermodel.accuracy.predictions import predict_rows, preset_efficiency, preset_name

    refined = sorted(p.stem for p in (Path(__file__).parents[1] / "plugins" / "infermodel_builtins"
                                      / "presets" / "efficiency").glob("*-*.toml"))
    if not refined:
        pytest.skip("no per-card refinement is shipped")
    family, _, card = refined[0].partition("-")
    engine = {"trtllm": "trtllm 1.0", "vllm": "vllm 0.10", "sglang": "sglang 0.4"}[family]
    # A 4,096-token prompt: a compute-bound prefill, so the card's own GEMM ceiling shows (a
    # short one is bound by the kernel launches, which a refinement leaves to the engine).
    lines = [HEADER] + [f"{c},https://example.org,{engine},{c},1,llama-2-7b,,,,1,1,4096,1,1,ttft_ms,"
                        f"unspecified,10" for c in (card, "rtx-4090")]
    path = tmp_path / "ledger.csv"
    path.write_text("\n".join(lines) + "\n")
    mine, other = read_ledger(path)
    assert preset_name(mine, host=host) == refined[0]
    assert preset_name(other, host=host) == family  # no refinement for that card
    (with_presets,) = predict_rows([mine], host=host).points
    forced = preset_efficiency(family, host=host)
    (with_family,) = predict_rows([mine], host=host, efficiencies={refined[0]: forced}).points
    assert preset_efficiency(refined[0], host=host) != forced
    assert with_presets.predicted != with_family.predicted


# ---------------------------------------------------------------------------------
# Offline and Poisson loads, and the rate metrics
# ---------------------------------------------------------------------------------


def test_an_offline_run_of_one_request_is_one_client_alone():
    cost = CostModel.lab3(overhead=1e-3)
    alone = simulate_row(cost, "vllm", 100, 10, 1, load="offline")
    assert alone.measured == 1 and alone.warmup == 0
    ttft = cost.iteration_time([], [(100, 0)])
    gaps = [cost.iteration_time([100 + j], []) for j in range(9)]
    assert alone.value("ttft_ms", "mean") == pytest.approx(ttft * 1e3, rel=1e-12)
    assert alone.value("output_tokens_per_s", "mean") == pytest.approx(
        10 / (ttft + sum(gaps)), rel=1e-12)


def test_an_offline_run_measures_every_request_over_its_whole_duration():
    cost = CostModel.lab3()
    figures = simulate_row(cost, "sglang", 2000, 200, 24, load="offline")
    assert figures.measured == 24 and figures.warmup == 0
    # Every request arrives at 0: the last one ends at the run's end, and the rate is all
    # the output tokens over that time.
    last = np.max(figures.ttft + figures.tpot * 199)
    assert figures.output_tokens_per_s == pytest.approx(24 * 200 / last, rel=1e-9)
    # All 24 prompts (48,000 tokens) queue for the 8,192-token budget: four fit the first
    # iteration, the last four wait for about six iterations of prefill.
    assert np.max(figures.ttft) > 4 * np.min(figures.ttft)


def test_a_slow_poisson_stream_sees_an_idle_server():
    cost = CostModel.lab3(overhead=1e-3)
    figures = simulate_row(cost, "vllm", 100, 10, 20, load="poisson", requests=20,
                           request_rate=1e-3)  # one request every ~1,000 s
    ttft = cost.iteration_time([], [(100, 0)])
    assert figures.measured == 20
    assert figures.value("ttft_ms", "median") == pytest.approx(ttft * 1e3, rel=1e-9)
    assert figures.value("ttft_ms", "p95") == pytest.approx(ttft * 1e3, rel=1e-9)


def test_rate_metrics_scale_the_systems_output_rate(tmp_path, host):
    from infermodel.accuracy.predictions import predict_rows

    lines = [HEADER + ",load"] + [
        f"{m},https://example.org,vllm 0.10,h100-sxm,2,llama-3.1-8b,,,,2,1,1000,250,16,{m},mean,"
        f"10,offline" for m in ("output_tokens_per_s", "output_tokens_per_s_per_gpu",
                                "total_tokens_per_s")]
    path = tmp_path / "ledger.csv"
    path.write_text("\n".join(lines) + "\n")
    points = {p.row.metric: p.predicted for p in predict_rows(read_ledger(path), host=host).points}
    system = points["output_tokens_per_s"]
    assert points["output_tokens_per_s_per_gpu"] == pytest.approx(system / 2, rel=1e-12)
    assert points["total_tokens_per_s"] == pytest.approx(system * 1250 / 250, rel=1e-12)


def test_loads_the_simulation_does_not_run_give_a_reason(tmp_path):
    lines = [HEADER + ",load,request_rate,requests",
             "capped,https://e.org,vllm 1,h100-sxm,1,llama-3.1-8b,,,,1,1,100,100,8,ttft_ms,mean,"
             "10,poisson,2,100",
             "big,https://e.org,vllm 1,h100-sxm,1,llama-3.1-8b,,,,1,1,40000,10000,1001,ttft_ms,"
             "mean,10,offline,,"]
    path = tmp_path / "ledger.csv"
    path.write_text("\n".join(lines) + "\n")
    capped, big = read_ledger(path)
    assert "capped at 8" in unsupported(capped)
    # An offline run is one round: 1,001 × 50,000 tokens is just over the bound.
    assert "offline run would simulate 50,050,000 tokens" in unsupported(big)
    assert unsupported(attrs.evolve(big, concurrency=1000)) is None
