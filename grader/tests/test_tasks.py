"""tasks.py: the registry, the task files and the formulas in them. Host only, no GPU."""
import copy
import json
from pathlib import Path

import pytest

from grader import protocol, tasks
from grader.tasks import TaskError

TRMM = json.loads((tasks.ROOT / "assignments" / "trmm" / "task.json").read_text())


def write_kit(root: Path, data=None, text=None) -> Path:
    """A kit under `root` whose registry lists one assignment, x, with this task file."""
    (root / "assignments" / "x").mkdir(parents=True)
    (root / "assignments" / "registry.txt").write_text("# comment line\nx  # trailing comment\n")
    path = root / "assignments" / "x" / "task.json"
    path.write_text(text if text is not None else json.dumps(data, indent=2))
    return path


def load_mutated(tmp_path, mutate):
    """Load a copy of trmm's task file changed by `mutate(data)`; the path of the file written."""
    data = copy.deepcopy(TRMM)
    mutate(data)
    path = write_kit(tmp_path, data)
    return path, lambda: tasks.load("x", tmp_path)


def case(data, case_id):
    return next(c for c in data["cases"] if c["id"] == case_id)


# --- the registry ---------------------------------------------------------------------------------

def test_the_registry_lists_trmm():
    assert "trmm" in tasks.registry()


@pytest.mark.parametrize("name", tasks.registry())
def test_every_registered_task_loads_with_its_graded_case_among_its_cases(name):
    task = tasks.load(name)
    assert task.name == name
    assert task.folder == tasks.ROOT / "assignments" / name
    assert all(g.case in task.cases for g in task.graded)
    assert all(g.runs >= 10 for g in task.graded)
    assert task.title and task.entry_point and task.metric


def test_the_registry_ignores_comments_and_blank_lines(tmp_path):
    write_kit(tmp_path, TRMM)
    assert tasks.registry(tmp_path) == ["x"]


def test_a_copy_of_trmms_task_file_loads_under_another_root(tmp_path):
    write_kit(tmp_path, TRMM)
    task = tasks.load("x", tmp_path)
    assert [c.id for c in task.cases] == [c["id"] for c in TRMM["cases"] if not c.get("hidden")]
    assert task.graded[0].case.id == TRMM["graded"]["id"]
    assert task.folder == tmp_path / "assignments" / "x"


def test_an_assignment_missing_from_the_registry_is_refused_with_the_names_it_lists(tmp_path):
    write_kit(tmp_path, TRMM)
    with pytest.raises(TaskError, match=r"unknown assignment 'nope'.*lists: x"):
        tasks.load("nope", tmp_path)


def test_a_missing_registry_is_a_task_error_naming_its_path(tmp_path):
    with pytest.raises(TaskError) as e:
        tasks.registry(tmp_path)
    assert str(tmp_path / "assignments" / "registry.txt") in str(e.value)


def test_a_registered_assignment_without_a_task_file_is_a_task_error_naming_the_file(tmp_path):
    path = write_kit(tmp_path, TRMM)
    path.unlink()
    with pytest.raises(TaskError) as e:
        tasks.load("x", tmp_path)
    assert str(path) in str(e.value)


# --- formulas -------------------------------------------------------------------------------------

def test_trmms_work_formula_counts_n_squared_times_n_plus_one_flops():
    assert tasks.evaluate("n*n*(n+1)", {"n": 4096}) == 4096 * 4096 * 4097


def test_trmms_work_is_scaled_to_gflop_and_its_bytes_to_three_matrices():
    task = tasks.load("trmm")
    assert task.work({"n": 4096}) == pytest.approx(4096 * 4096 * 4097 / 1e9)
    assert task.bytes({"n": 4096}) == 24 * 4096 * 4096


@pytest.mark.parametrize("expr,value", [("2**10", 1024), ("-n + 7", 3), ("n/8", 0.5), ("n//3", 1),
                                        ("(n - 1) * 2.5", 7.5)])
def test_formulas_allow_plain_arithmetic(expr, value):
    assert tasks.evaluate(expr, {"n": 4}) == value


@pytest.mark.parametrize("expr", ["__import__('os')", "open('/etc/passwd')", "n.bit_length()", "[n]",
                                  "n if n else 1", "n < 3", "'ab' * n", "lambda: 1"])
def test_formulas_reject_anything_but_arithmetic(expr):
    with pytest.raises(TaskError, match="only numbers, parameters"):
        tasks.evaluate(expr, {"n": 4})


def test_a_formula_that_does_not_parse_is_a_task_error():
    with pytest.raises(TaskError, match="not arithmetic"):
        tasks.evaluate("n*(n+1", {"n": 4})


def test_a_formula_using_a_name_the_case_does_not_define_names_it():
    with pytest.raises(TaskError, match="'m'"):
        tasks.evaluate("n*m", {"n": 4})


# --- broken task files ----------------------------------------------------------------------------

def test_invalid_json_is_a_task_error_naming_the_file_and_the_line(tmp_path):
    lines = json.dumps(TRMM, indent=2).splitlines()
    bad = next(i for i, line in enumerate(lines) if '"entry_point"' in line)
    lines[bad] = lines[bad].rstrip(",")  # a missing comma: the error is reported on the next line
    path = write_kit(tmp_path, text="\n".join(lines))
    with pytest.raises(TaskError) as e:
        tasks.load("x", tmp_path)
    assert f"{path}:{bad + 2}:" in str(e.value)
    assert "not valid JSON" in str(e.value)


@pytest.mark.parametrize("key", ["title", "entry_point", "metric", "tolerance", "cases", "graded",
                                 "timeouts_s", "points", "performance"])
def test_a_missing_key_is_a_task_error_naming_the_file_and_the_key(tmp_path, key):
    path, load = load_mutated(tmp_path, lambda d: d.pop(key))
    with pytest.raises(TaskError) as e:
        load()
    assert str(path) in str(e.value) and repr(key) in str(e.value)


def test_a_duplicate_case_id_is_a_task_error_naming_the_file_and_the_id(tmp_path):
    path, load = load_mutated(tmp_path, lambda d: d["cases"].append(dict(d["cases"][0], seed=5)))
    with pytest.raises(TaskError, match="'n1' appears twice") as e:
        load()
    assert str(path) in str(e.value)


def test_a_case_without_a_seed_is_a_task_error(tmp_path):
    path, load = load_mutated(tmp_path, lambda d: d["cases"][1].pop("seed"))
    with pytest.raises(TaskError, match="case 1 needs an 'id' and a 'seed'") as e:
        load()
    assert str(path) in str(e.value)


def test_an_unknown_reference_kind_is_a_task_error(tmp_path):
    path, load = load_mutated(tmp_path, lambda d: case(d, "n17").update(reference="gpu"))
    with pytest.raises(TaskError, match="reference must be 'cpu' or 'library'") as e:
        load()
    assert str(path) in str(e.value)


def test_a_graded_id_not_among_the_cases_is_a_task_error(tmp_path):
    path, load = load_mutated(tmp_path, lambda d: d["graded"].update(id="n8192"))
    with pytest.raises(TaskError, match="graded case 'n8192' is not among the cases") as e:
        load()
    assert str(path) in str(e.value)


def test_fewer_than_ten_timed_runs_is_a_task_error(tmp_path):
    path, load = load_mutated(tmp_path, lambda d: d["graded"].update(runs=9))
    with pytest.raises(TaskError, match="at least 10.*not 9") as e:
        load()
    assert str(path) in str(e.value)


def test_exactly_ten_timed_runs_is_accepted(tmp_path):
    _, load = load_mutated(tmp_path, lambda d: d["graded"].update(runs=10, warmup=0))
    task = load()
    assert (task.graded[0].runs, task.graded[0].warmup) == (10, 0)


def test_tiers_out_of_order_are_a_task_error(tmp_path):
    def swap(d):
        t = d["performance"]["tiers"]
        t[0]["fraction"], t[1]["fraction"] = t[1]["fraction"], t[0]["fraction"]
    path, load = load_mutated(tmp_path, swap)
    with pytest.raises(TaskError, match="increasing order") as e:
        load()
    assert str(path) in str(e.value)


def test_a_gpu_profile_with_the_wrong_number_of_rates_is_a_task_error_naming_the_gpu(tmp_path):
    def short(d):
        d["performance"]["gpus"]["Some GPU"] = {"rates": [1.0, 2.0, 3.0], "source": "made up"}
    path, load = load_mutated(tmp_path, short)
    with pytest.raises(TaskError, match="thresholds for Some GPU need one rate per tier") as e:
        load()
    assert str(path) in str(e.value)


def test_a_last_tier_not_giving_all_performance_points_is_a_task_error(tmp_path):
    path, load = load_mutated(tmp_path, lambda d: d["performance"]["tiers"][-1].update(points=45))
    with pytest.raises(TaskError, match="last performance tier must give all 50 points") as e:
        load()
    assert str(path) in str(e.value)


@pytest.mark.parametrize("value", [17.0, "17", None])
def test_a_non_integer_parameter_is_a_task_error_naming_the_case_and_parameter(tmp_path, value):
    path, load = load_mutated(tmp_path, lambda d: case(d, "n17").update(n=value))
    with pytest.raises(TaskError, match="case n17: parameter n must be an integer") as e:
        load()
    assert str(path) in str(e.value)


def test_a_formula_that_fails_for_some_case_is_caught_at_load_time(tmp_path):
    _, load = load_mutated(tmp_path, lambda d: d["metric"].update(work="n*n*k"))
    with pytest.raises(TaskError, match="'k'"):
        load()


def test_a_formula_that_fails_for_some_case_names_the_task_file(tmp_path):
    path, load = load_mutated(tmp_path, lambda d: d["metric"].update(work="n*n*k"))
    with pytest.raises(TaskError) as e:
        load()
    assert str(path) in str(e.value)


def test_a_tasks_least_bytes_are_its_bytes_unless_it_names_fewer_that_no_call_can_avoid():
    trmm, jacobi = tasks.load("trmm"), tasks.load("jacobi")
    p = trmm.cases[0].params
    assert trmm.least_bytes(p) == trmm.bytes(p)
    fixed = next(g.case for g in jacobi.graded if g.case.params["tol"] == 0)
    assert jacobi.bytes(fixed.params) == 24 * 510 ** 3 * 100
    assert jacobi.least_bytes(fixed.params) == 16 * 510 ** 3  # u_old read and u written once, whatever the sweeps


def test_least_bytes_above_the_bytes_the_metric_counts_are_refused(tmp_path):
    _, load = load_mutated(tmp_path, lambda d: d["metric"].update(least_bytes="25*n*n", least_why="why"))
    with pytest.raises(TaskError, match="least_bytes cannot exceed"):
        load()


def test_least_bytes_without_a_why_for_the_handout_are_refused(tmp_path):
    _, load = load_mutated(tmp_path, lambda d: d["metric"].update(least_bytes="16*n*n"))
    with pytest.raises(TaskError, match="least_why"):
        load()


# --- malformed task files are TaskErrors, never tracebacks ---------------------------------------
@pytest.mark.parametrize("mutate", [
    lambda d: d["performance"]["tiers"][0].pop("fraction"),
    lambda d: d["metric"].pop("work"),
    lambda d: d.update(graded="n4096"),
    lambda d: d["cases"].append("n17"),
    lambda d: d["graded"].update(runs="ten"),
    lambda d: d["metric"].update(work="n/(n-1)"),
], ids=["tier-without-fraction", "metric-without-work", "graded-not-an-object", "case-not-an-object",
        "runs-not-a-number", "formula-dividing-by-zero"])
def test_a_malformed_task_file_is_a_task_error_naming_the_file(tmp_path, mutate):
    path, load = load_mutated(tmp_path, mutate)
    with pytest.raises(TaskError) as e:
        load()
    assert str(path) in str(e.value)


def test_a_parameter_listed_as_real_may_have_a_fraction_and_reaches_the_plan(tmp_path):
    def mutate(d):
        d["real_parameters"] = ["stop"]
        case(d, "n17").update(stop=1.5e-3)
    _, load = load_mutated(tmp_path, mutate)
    c = next(c for c in load().cases if c.id == "n17")
    assert c.params["stop"] == 1.5e-3
    assert "stop=0.0015" in protocol.plan_line("case", c.id, 1, c.tol, c.reference, c.params)


def test_a_real_parameter_not_listed_as_real_is_refused_with_a_hint(tmp_path):
    _, load = load_mutated(tmp_path, lambda d: case(d, "n17").update(stop=1.5e-3))
    with pytest.raises(TaskError, match="real_parameters"):
        load()


def test_a_boolean_parameter_is_not_taken_for_an_integer(tmp_path):
    _, load = load_mutated(tmp_path, lambda d: case(d, "n17").update(n=True))
    with pytest.raises(TaskError, match="integer"):
        load()


@pytest.mark.parametrize("word", ["rtol", "warmup", "runs"])
def test_a_parameter_named_like_a_harness_word_is_refused(tmp_path, word):
    _, load = load_mutated(tmp_path, lambda d: case(d, "n17").update({word: 3}))
    with pytest.raises(TaskError, match=word):
        load()


def test_thresholds_that_do_not_increase_tier_by_tier_are_refused(tmp_path):
    def mutate(d):
        d["performance"]["gpus"] = {"H200": {"rates": [4, 3, 2, 1], "source": "test"}}
    _, load = load_mutated(tmp_path, mutate)
    with pytest.raises(TaskError, match="increase"):
        load()


# --- several graded cases (conv1d grades w = 7 and w = 63) ----------------------------------------
def two_graded(d):
    d["graded"] = [{"id": "n1024", "runs": 10}, {"id": "n4096", "runs": 12, "warmup": 1}]
    d["performance"]["gpus"] = {}


def test_a_task_may_grade_several_cases_each_with_its_own_runs(tmp_path):
    _, load = load_mutated(tmp_path, two_graded)
    task = load()
    assert [(g.case.id, g.runs, g.warmup) for g in task.graded] == [("n1024", 10, 2), ("n4096", 12, 1)]


def test_with_several_graded_cases_a_gpu_profile_gives_rates_per_case(tmp_path):
    def mutate(d):
        two_graded(d)
        d["performance"]["gpus"] = {"H200": {"rates": {"n1024": [1, 2, 3, 4], "n4096": [5, 6, 7, 8]}, "source": "t"}}
    _, load = load_mutated(tmp_path, mutate)
    assert load().data["performance"]["gpus"]["H200"]["rates"]["n4096"] == [5, 6, 7, 8]


def test_with_several_graded_cases_a_single_list_of_rates_is_refused(tmp_path):
    def mutate(d):
        two_graded(d)
        d["performance"]["gpus"] = {"H200": {"rates": [1, 2, 3, 4], "source": "t"}}
    _, load = load_mutated(tmp_path, mutate)
    with pytest.raises(TaskError, match="n1024, n4096"):
        load()
