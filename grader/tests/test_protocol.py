"""protocol.py: exit codes shared with the harness, seeds, plan lines and results files."""
import json
import re

from grader import protocol, tasks

KIT_CUH = tasks.ROOT / "harness" / "include" / "kit.cuh"


def harness_exit_codes() -> dict:
    """kit::ExitCode as written in kit.cuh: {"Ok": 0, "Usage": 2, ...}."""
    text = KIT_CUH.read_text()
    block = re.search(r"enum\s+ExitCode\b[^{]*\{(.*?)\};", text, re.S)
    assert block, f"no `enum ExitCode {{ ... }};` in {KIT_CUH}"
    codes = dict((name, int(v)) for name, v in re.findall(r"\bkExit(\w+)\s*=\s*(\d+)\s*,", block.group(1)))
    assert codes, f"no `kExit... = N,` lines in the ExitCode enum of {KIT_CUH}"
    return codes


def grader_exit_codes() -> dict:
    """protocol.EXIT_* as {"Ok": 0, "Usage": 2, ...} (EXIT_LAUNCH_ERROR -> LaunchError)."""
    return {"".join(w.capitalize() for w in name[5:].split("_")): value
            for name, value in vars(protocol).items() if name.startswith("EXIT_")}


def test_the_grader_and_the_harness_agree_on_every_exit_code():
    harness, grader = harness_exit_codes(), grader_exit_codes()
    assert set(harness) - set(grader) == set(), "kit.cuh has exit codes protocol.py lacks"
    assert set(grader) - set(harness) == set(), "protocol.py has exit codes kit.cuh lacks"
    assert grader == harness


def test_exit_codes_are_distinct_and_only_ok_is_zero():
    codes = list(grader_exit_codes().values())
    assert len(set(codes)) == len(codes)
    assert protocol.EXIT_OK == 0 and codes.count(0) == 1


def test_mix64_of_zero_is_splitmix64s_first_output():
    assert protocol.mix64(0) == 0xE220A8397B1DCDAF


def test_mix64_stays_within_64_bits():
    for x in (0, 1, 0x9E3779B97F4A7C15, (1 << 64) - 1):
        assert 0 <= protocol.mix64(x) < 1 << 64


def test_the_case_seed_is_stable_for_the_same_secret():
    assert protocol.case_seed(4096, 12345) == protocol.case_seed(4096, 12345)


def test_the_case_seed_differs_for_different_secrets():
    seeds = {protocol.case_seed(4096, s) for s in range(1000)}
    assert len(seeds) == 1000


def test_the_case_seed_differs_for_different_public_seeds_and_salts():
    assert protocol.case_seed(101, 7) != protocol.case_seed(117, 7)
    assert protocol.case_seed(101, 7, salt=0) != protocol.case_seed(101, 7, salt=1)


def test_the_case_seed_fits_the_harness_uint64():
    assert 0 <= protocol.case_seed((1 << 64) - 1, (1 << 63) + 5, salt=(1 << 64) - 1) < 1 << 64


def test_new_secret_gives_a_different_64_bit_value_each_time():
    secrets = [protocol.new_secret() for _ in range(20)]
    assert len(set(secrets)) == 20
    assert all(0 <= s < 1 << 64 for s in secrets)


def test_a_plan_line_has_kind_id_seed_tol_reference_then_extras_then_params():
    line = protocol.plan_line("case", "n17", 42, 1e-10, "cpu", {"n": 17})
    assert line == "case id=n17 seed=42 rtol=1e-10 reference=cpu n=17"


def test_a_plan_line_puts_extras_before_params():
    line = protocol.plan_line("timed", "n4096", 7, 1e-10, "library", {"n": 4096, "m": 3}, warmup=2, runs=10)
    assert line == "timed id=n4096 seed=7 rtol=1e-10 reference=library warmup=2 runs=10 n=4096 m=3"


def test_a_plan_line_writes_the_tolerance_without_losing_digits():
    tol = 0.1 + 0.2
    word = protocol.plan_line("case", "a", 1, tol, "cpu", {}).split()[3]
    assert float(word.split("=", 1)[1]) == tol


def test_read_results_keeps_complete_json_lines_and_drops_a_truncated_last_one(tmp_path):
    f = tmp_path / "results.jsonl"
    f.write_text(json.dumps({"id": "n1", "ok": True}) + "\n" + json.dumps({"id": "n17", "ok": False}) + "\n"
                 + '{"id": "n100", "rel_err')
    assert protocol.read_results(f) == [{"id": "n1", "ok": True}, {"id": "n17", "ok": False}]


def test_read_results_drops_lines_that_are_not_json_objects(tmp_path):
    f = tmp_path / "results.jsonl"
    f.write_text('[1, 2]\n"text"\n42\nnull\nsome garbage\n\n{"id": "n1"}\n')
    assert protocol.read_results(f) == [{"id": "n1"}]


def test_read_results_of_a_file_never_written_is_empty(tmp_path):
    assert protocol.read_results(tmp_path / "missing.jsonl") == []


def test_read_results_survives_bytes_that_are_not_utf8(tmp_path):
    f = tmp_path / "results.jsonl"
    f.write_bytes(b'{"id": "n1"}\n\xff\xfe garbage\n{"id": "n17"}\n')
    assert protocol.read_results(f) == [{"id": "n1"}, {"id": "n17"}]
