"""The serving simulator reproduces Module 10: Inference and serving, Lab 3.

Every expected number below is printed in that lab ("Define the cost model and
workload", "Run static and iteration-level policies", "Find an operating point, then
price its measured throughput"); the simulator itself is written independently from
the rules the lab states.
"""

from __future__ import annotations

import math

import pytest

from infermodel.simulator import (
    SLO,
    CostModel,
    SimulationError,
    WorkloadSpec,
    capacity_search,
    run_policy,
    simulate,
)

RATES = [0.10, 0.20, 0.25, 0.30, 0.35, 0.40]
POLICIES = ["static", "reserve", "paged", "chunked"]

# Module 10, Lab 3, the printed policy table:
# policy nominal realised TTFT p50/p99 (s) ITL p50/p99/max (ms) tok/s preemptions
LAB3_TABLE = """
static  0.10 0.112  13.04/ 52.59   7.9/ 14.5/   16.6  193.3     0
static  0.20 0.224 247.48/423.15  17.0/ 24.4/   25.3  295.0     0
static  0.25 0.281 385.93/710.34  17.0/ 24.1/   25.7  290.5     0
static  0.30 0.337 455.14/792.05  17.1/ 24.1/   25.7  302.7     0
static  0.35 0.393 507.56/940.23  17.2/ 24.3/   25.3  301.2     0
static  0.40 0.449 551.91/1035.02  17.2/ 24.3/   25.3  301.3     0
reserve 0.10 0.112   1.01/  2.65   7.3/ 12.8/ 2337.9  193.6     0
reserve 0.20 0.224   1.10/  6.53  10.2/ 16.2/ 2338.2  384.2     0
reserve 0.25 0.281   1.29/ 21.52  14.2/ 16.8/ 3130.1  477.7     0
reserve 0.30 0.337  45.34/ 73.68  15.3/ 17.2/ 2194.9  548.4     0
reserve 0.35 0.393 114.24/170.96  15.3/ 17.2/ 2576.3  553.9     0
reserve 0.40 0.449 159.43/251.51  15.3/ 17.2/ 2576.3  556.9     0
paged   0.10 0.112   1.01/  2.65   7.3/ 12.8/ 2337.9  193.6     0
paged   0.20 0.224   1.08/  2.94  10.2/ 17.6/ 2338.2  384.2     0
paged   0.25 0.281   1.14/  3.52  13.8/ 21.4/ 3130.1  477.7     2
paged   0.30 0.337  20.56/ 46.29  21.0/ 21.5/15405.2  564.0    46
paged   0.35 0.393  86.34/136.90  21.1/ 21.5/10245.8  571.1    52
paged   0.40 0.449 142.72/234.65  21.1/ 21.5/15395.6  564.8    64
chunked 0.10 0.112   1.01/  2.20   7.3/ 58.0/   65.9  193.6     0
chunked 0.20 0.224   1.09/  2.89  10.1/ 61.6/   65.9  384.3     0
chunked 0.25 0.281   1.15/  3.07  12.9/ 62.6/   66.0  477.9     0
chunked 0.30 0.337   1.53/ 29.87  19.4/ 63.9/ 6433.1  570.3   280
chunked 0.35 0.393  74.71/116.71  21.2/ 64.3/10303.5  586.9  1966
chunked 0.40 0.449 122.92/201.47  21.3/ 64.3/10131.6  589.2  2694
"""


def _printed_rows() -> dict[tuple[str, float], list[str]]:
    rows = {}
    for line in LAB3_TABLE.strip().splitlines():
        cells = line.replace("/", " ").split()
        rows[(cells[0], float(cells[1]))] = cells[2:]
    return rows


PRINTED = _printed_rows()


@pytest.fixture(scope="module")
def table():
    """The 24 runs with the fast engine (the document's table, recomputed)."""
    return simulate(CostModel.lab3(), WorkloadSpec.lab3(), POLICIES, RATES, seed=0)


def _as_printed(metrics: dict[str, float]) -> list[str]:
    return [
        f"{metrics['realised_rate']:.3f}",
        f"{metrics['ttft_p50']:.2f}",
        f"{metrics['ttft_p99']:.2f}",
        f"{1000 * metrics['itl_p50']:.1f}",
        f"{1000 * metrics['itl_p99']:.1f}",
        f"{1000 * metrics['itl_max']:.1f}",
        f"{metrics['throughput_tokens_per_s']:.1f}",
        f"{metrics['preemptions']:.0f}",
    ]


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("rate", RATES)
def test_every_cell_of_the_lab3_policy_table(table, policy, rate):
    assert _as_printed(table.run(policy, rate).metrics) == PRINTED[(policy, rate)]


def test_table_text_matches_the_lab_layout(table):
    text = table.table()
    assert text.splitlines()[0].split()[:3] == ["policy", "nominal", "real"]
    assert len(text.splitlines()) == 25
    assert "chunked" in text.splitlines()[-1] and "2694" in text.splitlines()[-1]


def test_lab3_workload_mean_output_and_realised_rate():
    # Module 10 Lab 3: "Mean output 1737.4, nominal .200, realised 0.224 requests/s".
    workload = WorkloadSpec.lab3().generate(0.2, seed=0)
    assert workload.count == 300
    assert f"{workload.mean_output:.1f}" == "1737.4"
    assert f"{workload.realised_rate:.3f}" == "0.224"
    assert workload.prompts.min() >= 2000 and workload.prompts.max() <= 6000
    assert workload.outputs.min() >= 16 and workload.outputs.max() <= 4000


def test_lab_text_quotes_match(table):
    # Module 10, "Apply the latency objectives" and "Queueing rises sharply": chunked
    # p50/p99 TTFT about 1.09/2.89 s at 0.20, 1.15/3.07 at 0.25, 1.53/29.87 at 0.30;
    # at 0.30 p99 ITL near 64 ms but a maximum gap over six seconds.
    chunked = {rate: table.run("chunked", rate).metrics for rate in RATES}
    assert round(chunked[0.30]["itl_p99"] * 1000) == 64
    assert chunked[0.30]["itl_max"] > 6.0
    assert chunked[0.30]["ttft_p99"] > 3.0
    # "At a nominal 0.10 requests/s, its static policy has a median TTFT around 13 s,
    # while chunked continuous scheduling gives about 1.01 s."
    assert round(table.run("static", 0.10).metrics["ttft_p50"]) == 13
    assert round(chunked[0.10]["ttft_p50"], 2) == 1.01


PROFILES = [
    # name, cost model, printed: nominal, realised, tok/s, USD per million at its price,
    # price (USD/hour), goodput
    ("24GB-bf16", CostModel.lab3(), "0.244", "0.274", "466.3", "0.596", 1.0, "0.266"),
    ("24GB-int8", CostModel.lab3(kv_bytes_per_token=73728), "0.252", "0.282", "482.1", "0.576", 1.0, "0.275"),
    (
        "H100-bf16",
        CostModel.lab3(cache_memory=72e9, bandwidth=3.35e12, compute=0.5 * 989e12),
        "2.196", "2.464", "3500.0", "0.198", 2.5, "2.008",
    ),
    (
        "L4-bf16",
        CostModel.lab3(bandwidth=0.30e12, compute=0.5 * 121e12),
        "0.065", "0.072", "124.0", "1.792", 0.8, "0.071",
    ),
]


@pytest.mark.parametrize(
    "name, cost, nominal, realised, throughput, usd, price, goodput", PROFILES, ids=[p[0] for p in PROFILES]
)
def test_capacity_search_reproduces_lab3(name, cost, nominal, realised, throughput, usd, price, goodput):
    # Module 10 Lab 3: bisection of 10 steps over [0.01, 4.0] on the chunked policy,
    # pass = p99 TTFT ≤ 3 s and p99 ITL ≤ 0.1 s (the percentiles alone: an overloaded run
    # is reported, not failed), neighbours at ±0.005.
    result = capacity_search(cost, WorkloadSpec.lab3(), "chunked", SLO(3.0, 0.1), 0.01, 4.0, 10, 0.005,
                             overload="reported")
    assert f"{result.rate:.3f}" == nominal
    assert f"{result.metrics['realised_rate']:.3f}" == realised
    assert f"{result.metrics['throughput_tokens_per_s']:.1f}" == throughput
    assert f"{result.usd_per_million_output_tokens(price):.3f}" == usd
    assert f"{result.metrics['goodput']:.3f}" == goodput
    assert result.neighbour_passes == [True, False]
    assert result.passes and result.monotone
    assert len(result.history) == 10
    assert f"{result.rate * 3600:.0f}" == {"0.244": "878", "0.252": "906", "2.196": "7905", "0.065": "232"}[nominal]
    # The H100's capacity is a run whose TTFT still climbs (about 19 ms per second of
    # arrivals, from 0.79 s at the median: 2.3 s over its 122 s of arrivals).
    assert result.overloaded == (name == "H100-bf16")


def test_an_overloaded_capacity_fails_by_default():
    # The default judgement fails a rate past saturation: the H100 profile's capacity
    # falls below Lab 3's 2.196/s, to a rate whose run is stable.
    cost = CostModel.lab3(cache_memory=72e9, bandwidth=3.35e12, compute=0.5 * 989e12)
    result = capacity_search(cost, WorkloadSpec.lab3(), "chunked", SLO(3.0, 0.1), 0.01, 4.0, 10, 0.005)
    assert result.rate < 2.196 and result.passes and not result.overloaded
    with pytest.raises(SimulationError, match="overload must be one of fails, reported"):
        capacity_search(cost, overload="ignored")


SUBSET = [("static", 0.10), ("reserve", 0.25), ("paged", 0.30), ("chunked", 0.30), ("chunked", 0.40)]


def _assert_same_metrics(fast: dict[str, float], reference: dict[str, float]) -> None:
    assert fast.keys() == reference.keys()
    for name, a in fast.items():
        b = reference[name]
        if math.isnan(b):
            assert math.isnan(a), name
        else:
            assert a == pytest.approx(b, rel=1e-9, abs=1e-12), name


@pytest.mark.parametrize("policy, rate", SUBSET)
def test_fast_engine_matches_reference_engine(policy, rate):
    workload = WorkloadSpec.lab3().generate(rate, seed=0)
    fast = run_policy(CostModel.lab3(), workload, policy, engine="fast")
    reference = run_policy(CostModel.lab3(), workload, policy, engine="reference")
    _assert_same_metrics(fast, reference)


@pytest.mark.slow
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("rate", RATES)
def test_fast_engine_matches_reference_engine_on_all_24_runs(table, policy, rate):
    workload = WorkloadSpec.lab3().generate(rate, seed=0)
    reference = run_policy(CostModel.lab3(), workload, policy, engine="reference")
    _assert_same_metrics(table.run(policy, rate).metrics, reference)
