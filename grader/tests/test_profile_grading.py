"""--profile in a grading and in a batch (grader/profile/, batch/classview.py), with a stand-in for
ncu that hands back a CSV written in its layout (the real one is tried by the GPU tests)."""
from pathlib import Path

import pytest

from fake_kit import args, make_class
from fake_kit import kernel as submission
from grader import batch
from grader.profile import table
from ncu_csv import H100, kernel, raw_csv


FAKE_NCU = '''#!{python}
import os, sys
args = sys.argv[1:]
if "--import" in args:
    sys.stdout.write(open(args[args.index("--import") + 1]).read())
    sys.exit(0)
if os.environ.get("FAKE_NCU") == "noperm":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
program = next(i for i, a in enumerate(args) if a.endswith("/runner"))
assert args[program + 1] == "--alone" and os.path.isfile(args[program + 2]), args
assert "--nvtx-include" in args[:program] and "--launch-count" in args[:program]
open(args[args.index("--export") + 1], "w").write(open(os.environ["FAKE_NCU_CSV"]).read())
'''


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    import sys
    exe = tmp_path / "ncu"
    exe.write_text(FAKE_NCU.format(python=sys.executable))
    exe.chmod(0o755)
    profile_csv = tmp_path / "profile.csv"
    profile_csv.write_text(raw_csv({"Kernel Name": "trmm_naive(int, const double*, double*)",
                                    "gpu__time_duration.sum": "2,000,000", "launch__grid_size": "1",
                                    "launch__block_size": "256", "dram__bytes.sum": "1,000,000,000",
                                    "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum": "100,000,000",
                                    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "15"}))
    monkeypatch.setenv("NCU", str(exe))
    monkeypatch.setenv("FAKE_NCU_CSV", str(profile_csv))
    return exe


def grade_alice(tmp_path, *extra):
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "alice" / "trmm").mkdir(parents=True)
    (subs / "alice" / "trmm" / "kernel.cu").write_text(submission("reference"))
    assert batch.main(args(subs, out, *extra)) == 0
    import json
    return json.loads((out / "records" / "alice" / "trmm.json").read_text()), out


def test_a_profiled_batch_record_holds_the_kernels_the_hints_and_a_roofline_beside_it(fake_kit, fake_ncu, tmp_path):
    rec, out = grade_alice(tmp_path, ("profile", True))
    prof = rec["profile"]
    assert prof["case"] == "n4096" and prof["kernels"][0]["kernel"].startswith("trmm_naive")
    assert any("runs 1 block of 256 threads" in h for h in prof["hints"])
    assert prof["roofline"] == "trmm-roofline.svg" and "roofline_svg" not in prof
    assert (out / "records" / "alice" / "trmm-roofline.svg").read_text().startswith("<svg")
    assert rec["score"] == 100  # the profile is never part of the score
    report = (out / "reports" / "alice.md").read_text()
    assert "runs 1 block of 256 threads" in report and "](../records/alice/trmm-roofline.svg)" in report


def test_the_profile_is_of_the_graded_case_the_submission_trails_its_library_by_most():
    from grader import tasks
    from grader.profile.run import furthest_behind
    from grader.results import Performance, Timing
    jacobi = tasks.load("jacobi")
    fixed, converging = (g.case.id for g in jacobi.graded)

    def timed(case_id, rate, baseline):
        return Performance(case_id, {}, "MLUPS", Timing([1.0], 0), rate, None, "plain kernel", baseline)
    # the atomic-norm kernel on an H100: 0.93x at fixed sweeps, 0.01x where it must converge
    case, perf = furthest_behind(jacobi, [timed(fixed, 111416, 119785), timed(converging, 568, 87279)])
    assert case.id == converging and perf.rate == 568
    case, _ = furthest_behind(jacobi, [timed(fixed, 60000, 119785), timed(converging, 80000, 87279)])
    assert case.id == fixed
    case, perf = furthest_behind(jacobi, [])
    assert case.id == fixed and perf is None


def test_counters_closed_to_this_user_give_one_line_on_how_to_open_them_and_the_grading_goes_on(
        fake_kit, fake_ncu, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_NCU", "noperm")
    rec, _ = grade_alice(tmp_path, ("profile", True))
    assert "ERR_NVGPUCTRPERM" in rec["profile"]["note"] and "NVreg_RestrictProfilingToAdminUsers=0" in rec["profile"]["note"]
    assert rec["score"] == 100


def toolkit_with_nsight(root: Path, *versions: str) -> Path:
    """A CUDA Toolkit's layout: bin/ncu, the launcher, and Nsight Compute's folders beside bin/."""
    (root / "bin").mkdir(parents=True)
    launcher = root / "bin" / "ncu"
    launcher.write_text("#!/bin/sh\necho 'ERROR : nsight-compute directory is not found'; exit 1\n")
    launcher.chmod(0o755)
    for v in versions:
        (root / f"nsight-compute-{v}").mkdir()
        (root / f"nsight-compute-{v}" / "ncu").write_text("#!/bin/sh\n")
        (root / f"nsight-compute-{v}" / "ncu").chmod(0o755)
    return launcher


def test_the_toolkit_s_ncu_launcher_is_followed_to_the_newest_nsight_compute_folder_which_the_jail_binds(tmp_path, monkeypatch):
    from grader.jail import profiler_folder
    from grader.profile.ncu import find_ncu
    launcher = toolkit_with_nsight(tmp_path / "cuda", "2024.3.2", "2025.3.1", "2025.10.0")
    newest = tmp_path / "cuda" / "nsight-compute-2025.10.0"
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("PATH", str(launcher.parent))
    assert find_ncu() == str(newest / "ncu")
    assert profiler_folder() == newest  # not bin/, where the launcher finds nothing in a jail
    monkeypatch.setenv("NCU", str(launcher))
    assert find_ncu() == str(newest / "ncu")


def test_an_ncu_that_is_not_the_toolkit_s_launcher_is_run_as_given(tmp_path, monkeypatch):
    from grader.profile import ncu
    from grader.profile.ncu import find_ncu
    monkeypatch.setattr(ncu, "SYSTEM_NSIGHT", tmp_path / "no-opt-nvidia")  # as where /opt/nvidia has no Nsight Compute
    toolkit_with_nsight(tmp_path / "cuda")  # a launcher with no Nsight Compute folder beside it
    monkeypatch.setenv("NCU", str(tmp_path / "cuda" / "bin" / "ncu"))
    assert find_ncu() == str(tmp_path / "cuda" / "bin" / "ncu")
    tool = tmp_path / "opt" / "ncu"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("NCU", str(tool))
    assert find_ncu() == str(tool)


def test_without_ncu_the_profile_says_so_in_one_line(fake_kit, tmp_path, monkeypatch):
    monkeypatch.setenv("NCU", str(tmp_path / "no-such-ncu"))
    rec, _ = grade_alice(tmp_path, ("profile", True))
    assert rec["profile"] == {"note": "not profiled: Nsight Compute (ncu) is not installed; it comes with the CUDA Toolkit"}


def test_without_profile_nothing_is_profiled(fake_kit, fake_ncu, tmp_path):
    rec, _ = grade_alice(tmp_path)
    assert rec["profile"] == {}


def test_the_terminal_report_shows_the_kernels_and_hints_of_a_profile():
    from grader.report import profile_lines
    lines = profile_lines({"case": "n4096", "kernels": [table([kernel(duration_ns=2e6, dram_bytes=1e9, dfma=1e8)], H100)[0]],
                           "hints": ["trmm_kernel runs 1 block."], "roofline": "trmm-roofline.svg"})
    text = "\n".join(lines)
    assert "Profile (Nsight Compute, one call of n4096; not part of the score)" in text
    assert "100% of the time, DRAM 500 GB/s" in text and "- trmm_kernel runs 1 block." in text
    assert "trmm-roofline.svg" in text


def test_a_slow_call_has_fewer_of_its_launches_profiled_and_the_report_says_how_many():
    from grader.profile.ncu import launch_limit
    from grader.report import profile_lines
    assert launch_limit(None) == launch_limit(27.0) == launch_limit(500.0) == 10  # jacobi's reference: 27 ms
    assert launch_limit(1000.0) == 5 and launch_limit(4900.0) == 1 and launch_limit(60000.0) == 1
    row = table([kernel(duration_ns=2e6, dram_bytes=1e9, dfma=1e8)], H100)[0]
    text = "\n".join(profile_lines({"case": "n512_converge", "launches": 1, "launch_limit": 1, "kernels": [row],
                                    "hints": []}))
    assert "one call of n512_converge, its first kernel launch; not part of the score" in text
    text = "\n".join(profile_lines({"case": "n512", "launches": 10, "launch_limit": 10, "kernels": [row], "hints": []}))
    assert "one call of n512, its first 10 kernel launches;" in text


# ---------------------------------------------------------------------------------------------
# The class view of a batch (batch/classview.py).

def test_a_batch_draws_the_class_per_assignment_without_naming_anyone(fake_kit, fake_ncu, tmp_path):
    subs, out = make_class(tmp_path), tmp_path / "out"
    (subs / "frank" / "trmm").mkdir(parents=True)
    (subs / "frank" / "trmm" / "kernel.cu").write_text(submission("reference"))
    assert batch.main(args(subs, out, ("profile", True), ("no_reference", False))) == 0
    readme = (out / "class" / "README.md").read_text()
    assert "## trmm" in readme and "5 graded, 2 correct" in readme  # dave had nothing gradeable
    assert "| n4096 | 2 |" in readme and "50: 2" in readme  # both correct ones in the top tier
    for name in ("alice", "bob", "carol", "erin", "frank"):
        assert name not in readme
    scores = (out / "class" / "trmm-scores.svg").read_text()
    assert scores.startswith("<svg") and ">2</text>" in scores  # the full-marks bar holds two
    rates = (out / "class" / "trmm-rates-n4096.svg").read_text()
    assert rates.count("<circle") == 2 and ">reference 20,535</text>" in rates
    roof = (out / "class" / "trmm-roofline.svg").read_text()
    assert ">submission (2)</text>" in roof and ">reference (1)</text>" in roof
    assert "alice" not in roof and "frank" not in roof


def test_without_profiles_the_class_view_has_no_roofline(fake_kit, tmp_path):
    subs, out = make_class(tmp_path), tmp_path / "out"
    assert batch.main(args(subs, out)) == 0
    assert (out / "class" / "trmm-scores.svg").is_file() and not (out / "class" / "trmm-roofline.svg").exists()
    assert "| n4096 | 1 |" in (out / "class" / "README.md").read_text()


def test_the_reference_of_a_profiled_batch_keeps_its_roofline_beside_its_record(fake_kit, fake_ncu, tmp_path):
    rec, out = grade_alice(tmp_path, ("profile", True), ("no_reference", False))
    import json
    ref = json.loads((out / "reference" / "trmm.json").read_text())
    assert ref["profile"]["roofline"] == "trmm-roofline.svg" and "roofline_svg" not in ref["profile"]
    assert (out / "reference" / "trmm-roofline.svg").is_file()
