"""GPU test: the checker compares whole outputs with a library truth on the GPU (a gigabyte field is
never copied to the host); on arrays made to trip every rule its verdict, counts and worst element
are those of the comparison on the host, which the C++ tests pin down. Skipped without a GPU."""

import json
import math
import subprocess

import pytest

from grader import build

EXACT = ["pass", "compared", "nonfinite", "unwritten", "protected", "protected_changed",
         "worst_index", "worst_got", "worst_want"]


@pytest.fixture(scope="module")
def sides(local_gpu):
    target = f"build/{local_gpu.arch}/tests/compare_on_gpu"
    subprocess.run(["make", "-s", "-C", str(build.ROOT), target, f"ARCH={local_gpu.arch}"], check=True)
    out = subprocess.run([str(build.ROOT / target)], capture_output=True, text=True, check=True).stdout
    by_scenario = {}
    for line in out.splitlines():
        r = json.loads(line)
        by_scenario.setdefault(r["scenario"], {})[r["side"]] = r
    return by_scenario


SCENARIOS = ["equal", "errors of one size", "unwritten, nan and a wall", "within tolerance",
             "poison, infinity and a nan truth"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_comparison_on_the_gpu_gives_the_verdict_counts_and_worst_element_of_the_one_on_the_host(sides, scenario):
    host, device = sides[scenario]["host"], sides[scenario]["device"]
    for key in EXACT:
        assert device[key] == host[key], f"{key}: {device[key]} on the GPU, {host[key]} on the host"
    if host["rel_error"] == "nan":
        assert device["rel_error"] == "nan"
    else:
        assert math.isclose(device["rel_error"], host["rel_error"], rel_tol=1e-9, abs_tol=1e-300)


def test_the_scenarios_trip_every_rule_of_the_comparison(sides):
    """Each rule is met somewhere, or the agreement above would prove little."""
    host = {s: sides[s]["host"] for s in SCENARIOS}
    assert host["equal"]["pass"] and host["within tolerance"]["pass"]
    assert host["errors of one size"]["worst_index"] == (1 << 16) + 44, "the first of equal errors in index order"
    assert not host["errors of one size"]["pass"]
    tripped = host["unwritten, nan and a wall"]
    assert (tripped["unwritten"], tripped["nonfinite"], tripped["protected_changed"]) == (2, 1, 1)
    assert tripped["protected"] == 2000
    poisoned = host["poison, infinity and a nan truth"]
    assert (poisoned["unwritten"], poisoned["nonfinite"]) == (100, 1)
    assert poisoned["rel_error"] == "nan" and not poisoned["pass"]
