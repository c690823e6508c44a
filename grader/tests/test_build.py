"""build.py on real files with the real nvcc (no GPU needed): compiler messages as students read
them, the forbidden-call scan of object symbols, and the link with the runner.

The submissions are compiled once, in parallel, by a module-scoped fixture; each test looks at one.
"""
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader import build, tasks
from grader.build import Forbidden

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA Toolkit) on PATH")

ARCH = "sm_90"
ROOT = tasks.ROOT
TESTS = ROOT / "assignments" / "trmm" / "tests"

CUB_DEVICE = """\
#include <cub/device/device_reduce.cuh>
void trmm(int n, const double* A, double* B) {
    size_t bytes = 0;
    cub::DeviceReduce::Sum(nullptr, bytes, A, B, n);
    void* tmp;
    cudaMalloc(&tmp, bytes);
    cub::DeviceReduce::Sum(tmp, bytes, A, B, n);
    cudaFree(tmp);
}
"""

# The namespace renamed by a #define the preprocessor reads but a plain search for "#define" does
# not: spelled with the digraph %:, split by a comment, split over two lines (with a blank after the
# backslash too), after a byte-order mark or a lone carriage return, or between a string holding "/*"
# and one holding "*/" (which a search for comments took for one; so a scanner that took 1'0's digit
# separator, or a raw string's '"' delimiter, for the start of a literal).
CUB_NAMESPACE_RENAMED = {how: head + "\n" + CUB_DEVICE.replace("cub::", "kub::") for how, head in (
    ("digraph", "%:define cub kub"), ("comment", "#/**/define cub kub"), ("spliced", "#def\\\nine cub kub"),
    ("spliced_after_a_blank", "#def\\ \nine cub kub"), ("after_a_byte_order_mark", "\ufeff#define cub kub"),
    ("after_a_carriage_return", "int cr_;\r#define cub kub"),
    ("between_comment_marks_in_strings", 'const char* open_ = "/*";\n#define cub kub\nconst char* close_ = "*/";'),
    ("after_a_digit_separator", "int open_ = 1'0 + '/*';\n#define cub kub\nint close_ = '*/';"),
    ("after_a_raw_string_delimited_by_a_quote", 'const char* open_ = R""(/*)"";\n#define cub kub\nconst char* close_ = "*/";'))}

THRUST = """\
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
void trmm(int n, const double* A, double* B) {
    double s = thrust::reduce(thrust::device, A, A + n, 0.0);
    cudaMemcpy(B, &s, sizeof s, cudaMemcpyHostToDevice);
}
"""

CUB_BLOCK = """\
#include <cub/block/block_reduce.cuh>
__global__ void row_sums(int n, const double* A, double* B) {
    using Reduce = cub::BlockReduce<double, 128>;
    __shared__ typename Reduce::TempStorage tmp;
    double v = 0;
    for (int k = threadIdx.x; k < n; k += 128) v += A[(size_t)blockIdx.x * n + k];
    double s = Reduce(tmp).Sum(v);
    if (threadIdx.x == 0) B[blockIdx.x] = s;
}
void trmm(int n, const double* A, double* B) { row_sums<<<n, 128>>>(n, A, B); }
"""

CUB_RENAMED = """\
#define DeviceReduce DevR
#include <cub/device/device_reduce.cuh>
void trmm(int n, const double* A, double* B) {
    size_t bytes = 0;
    cub::DevR::Sum(nullptr, bytes, A, B, n);
    void* tmp;
    cudaMalloc(&tmp, bytes);
    cub::DevR::Sum(tmp, bytes, A, B, n);
    cudaFree(tmp);
}
"""

CUBIN_LOADER = """\
#include <cuda.h>
static const unsigned char image[16] = {0};
void trmm(int n, const double* A, double* B) {
    void* load = nullptr;
    cudaDriverEntryPointQueryResult status;
    cudaGetDriverEntryPointByVersion("cuModuleLoadData", &load, 12000, cudaEnableDefault, &status);
    CUmodule m;
    if (load) ((CUresult(*)(CUmodule*, const void*))load)(&m, image);
}
"""

# The loader's name kept out of the object's read-only strings: built at run time from a writable array.
CUBIN_LOADER_NAME_BUILT = CUBIN_LOADER.replace('"cuModuleLoadData"', "name()").replace(
    "void trmm(", 'static char loader[] = "cuModuleLoadDat";\n'
                  "static const char* name() { static char s[32]; for (int i = 0; i < 15; i++) s[i] = loader[i];"
                  " s[15] = 'a'; return s; }\nvoid trmm(")

DLSYM_CUBLAS = """\
#include <dlfcn.h>
void trmm(int n, const double* A, double* B) {
    void* lib = dlopen("libcublas.so.13", RTLD_NOW);
    void* f = lib ? dlsym(lib, "cublasDtrmm_v2") : dlsym(RTLD_DEFAULT, "cublasDtrmm_v2");
    (void)f;
}
"""

NO_KERNEL = """\
#include <cstring>
void trmm(int n, const double* A, double* B) { (void)n; (void)A; (void)B; }
"""

WRONG_SIGNATURE = """\
__global__ void add_one(int n, double* B) { if (threadIdx.x < n) B[threadIdx.x] += 1; }
void trmm(int n, double* A, double* B) { add_one<<<1, 32>>>(n, B); }  // A is not const
"""

SOURCES = {
    "cublas_call": TESTS / "cublas_call.cu",
    "compile_error": TESTS / "compile_error.cu",
    "reference": ROOT / "reference" / "trmm" / "kernel.cu",
    "cub_device": CUB_DEVICE,
    "thrust": THRUST,
    "cub_block": CUB_BLOCK,
    "wrong_signature": WRONG_SIGNATURE,
    "cub_renamed": CUB_RENAMED,
    "cubin_loader": CUBIN_LOADER,
    "cubin_loader_name_built": CUBIN_LOADER_NAME_BUILT,
    "library_load": TESTS / "hostile_library_load.cu",
    "dlsym_cublas": DLSYM_CUBLAS,
    "register_fatbinary": TESTS / "hostile_register_fatbinary.cu",
    "no_kernel": NO_KERNEL,
    **{f"cub_namespace_{how}": text for how, text in CUB_NAMESPACE_RENAMED.items()},
    # 3 MB of read-only data: at 1.5 GB (two seconds to compile) the scan, which runs in the grader's
    # own process and outside every limit, held 3 GB of memory for 24 s.
    "padded": 'asm(".section .rodata.pad, \\"a\\"\\n.space 3000000, 0x41\\n.previous");\n' + NO_KERNEL,
    # What the compiler says of a line is shown to the student and the TA, and it quotes the line: raw
    # escape sequences there would rewrite the TA's terminal (erase the line, print a verdict of their
    # choosing) or set its clipboard (OSC 52), and a right-to-left override would reorder what follows.
    "escapes": '#error "\x1b]52;c;cm0gLXJmIH4K\x07\x1b[2K\rtrmm: correct 100/100 \u202e"\n',
}


@dataclass
class Compiled:
    workdir: Path
    ok: bool
    messages: str
    forbidden: list


@pytest.fixture(scope="module")
def task():
    return tasks.load("trmm")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    """Every source of SOURCES compiled with compile_submission into its own folder, and scanned."""
    workdirs = {name: tmp_path_factory.mktemp(name) for name in SOURCES}  # mktemp is not thread-safe

    def one(name):
        workdir = workdirs[name]
        src = SOURCES[name]
        if isinstance(src, str):
            (workdir / "src").mkdir()
            src = workdir / "src" / "kernel.cu"
            src.write_text(SOURCES[name])
        ok, messages = build.compile_submission(src, workdir, ARCH, timeout=300)
        forbidden = build.scan_forbidden(workdir / "kernel.o") if ok else []
        return name, Compiled(workdir, ok, messages, forbidden)
    with ThreadPoolExecutor(max_workers=len(SOURCES)) as pool:
        return dict(pool.map(one, SOURCES))


@pytest.fixture(scope="module")
def harness(task, tmp_path_factory):
    """The runner's objects for sm_90 (`make harness`: a minute or more the first time)."""
    build.build_harness(task, ARCH, tmp_path_factory.mktemp("harness") / "harness.log")


def test_a_cublas_call_is_forbidden_and_named_without_the_v2_suffix(compiled):
    c = compiled["cublas_call"]
    assert c.ok, c.messages
    assert Forbidden("cuBLAS", "cublasDtrmm") in c.forbidden
    assert all(f.library == "cuBLAS" for f in c.forbidden), c.forbidden


def test_a_cub_device_wide_reduction_is_forbidden_and_named(compiled):
    c = compiled["cub_device"]
    assert c.ok, c.messages
    assert Forbidden("CUB device-wide algorithm", "cub::DeviceReduce") in c.forbidden


def test_cub_s_device_wide_reduction_renamed_with_a_define_is_still_forbidden(compiled):
    c = compiled["cub_renamed"]
    assert c.ok, c.messages
    assert Forbidden("a library identifier renamed with #define", "#define DeviceReduce") in c.forbidden
    assert any(f.library == "CUB device-wide algorithm" for f in c.forbidden), c.forbidden  # by its kernels


@pytest.mark.parametrize("how", sorted(CUB_NAMESPACE_RENAMED))
def test_cub_s_namespace_renamed_by_a_define_written_as_the_preprocessor_reads_it_is_forbidden(compiled, how):
    c = compiled[f"cub_namespace_{how}"]
    assert c.ok, c.messages
    assert Forbidden("a library identifier renamed with #define", "#define cub") in c.forbidden, c.forbidden


def test_an_object_larger_than_the_grader_reads_is_refused_before_a_byte_of_it_is_read(compiled, monkeypatch):
    c = compiled["padded"]
    assert c.ok and c.forbidden == [], c
    monkeypatch.setattr(build, "OBJECT_BYTES", 2 << 20)
    monkeypatch.setattr(build, "list_symbols", lambda obj: pytest.fail("the object was read"))
    with pytest.raises(build.ScanError, match=r"kernel.o is 3 MiB, more than the 2 MiB"):
        build.scan_forbidden(c.workdir / "kernel.o")


def test_loading_a_prebuilt_gpu_binary_through_the_driver_is_forbidden_and_named(compiled):
    c = compiled["cubin_loader"]
    assert c.ok, c.messages
    assert Forbidden("prebuilt GPU code loaded at run time", "cuModuleLoadData") in c.forbidden


def test_a_driver_function_looked_up_by_a_name_built_at_run_time_is_forbidden_and_named(compiled):
    c = compiled["cubin_loader_name_built"]
    assert c.ok, c.messages
    assert Forbidden("a driver function looked up by name at run time", "cudaGetDriverEntryPointByVersion") \
        in c.forbidden, c.forbidden


def test_a_prebuilt_gpu_binary_loaded_by_calling_the_runtime_s_library_api_directly_is_forbidden(compiled):
    """No loader's name among the object's strings (no CUDA_CHECK around the call), only in its symbols."""
    c = compiled["library_load"]
    assert c.ok, c.messages
    assert Forbidden("prebuilt GPU code loaded at run time", "cudaLibraryLoadData") in c.forbidden


def test_a_prebuilt_gpu_binary_registered_through_the_runtime_s_start_up_hooks_is_forbidden(compiled):
    """nvcc's stub calls __cudaRegisterFatBinary once; the file calls it a second time, by hand."""
    c = compiled["register_fatbinary"]
    assert c.ok, c.messages
    assert Forbidden("prebuilt GPU code registered by hand", "__cudaRegisterFatBinary") in c.forbidden


def test_nvcc_s_own_registration_of_a_file_without_kernels_is_not_taken_for_a_prebuilt_binary(compiled):
    c = compiled["no_kernel"]
    assert c.ok, c.messages
    assert c.forbidden == []


def test_a_library_and_a_function_looked_up_by_name_at_run_time_are_forbidden(compiled):
    c = compiled["dlsym_cublas"]
    assert c.ok, c.messages
    calls = {f.call for f in c.forbidden}
    assert {"libcublas.so.13", "cublasDtrmm_v2"} <= calls, c.forbidden


def test_a_thrust_algorithm_is_forbidden(compiled):
    c = compiled["thrust"]
    assert c.ok, c.messages
    assert any(f.library == "Thrust" for f in c.forbidden), c.forbidden


def test_a_thrust_reduce_call_is_named_as_thrust_reduce(compiled):
    assert Forbidden("Thrust", "thrust::reduce") in compiled["thrust"].forbidden


def test_a_block_level_cub_reduction_is_allowed(compiled):
    c = compiled["cub_block"]
    assert c.ok, c.messages
    assert c.forbidden == []


def test_the_hidden_reference_compiles_and_calls_nothing_forbidden(compiled):
    c = compiled["reference"]
    assert c.ok, c.messages
    assert (c.workdir / "kernel.o").is_file()
    assert c.forbidden == []


def test_a_compile_error_is_reported_against_kernel_cu_with_the_undefined_identifier(compiled):
    c = compiled["compile_error"]
    assert not c.ok
    assert "kernel.cu" in c.messages
    assert '"Bold"' in c.messages and "undefined" in c.messages
    assert str(c.workdir) not in c.messages and "/tmp" not in c.messages
    assert "make:" not in c.messages and "nvcc -" not in c.messages


def test_escape_sequences_a_compile_error_quotes_reach_no_terminal_and_no_report_as_they_are(compiled, task):
    from grader import grade, report
    c = compiled["escapes"]
    assert not c.ok and "\x1b" in c.messages, c.messages  # the compiler quotes the line as it is
    result = grade.new_result(task, c.workdir / "src" / "kernel.cu", None, grade.Options())
    assert not grade.build_stage(task, c.workdir / "src" / "kernel.cu", ARCH, c.workdir, result)
    shown = report.terminal(result)
    assert not [ch for ch in shown if not ch.isprintable() and ch not in "\n"], repr(shown)
    assert "\\x1b]52;c;cm0gLXJmIH4K\\x07\\x1b[2K" in shown and "100/100 \\u202e" in shown, shown


def test_the_hidden_reference_links_with_the_runner(compiled, harness, task):
    c = compiled["reference"]
    ok, messages = build.link_runner(task, c.workdir, ARCH, timeout=300)
    assert ok, messages
    assert (c.workdir / "runner").is_file()


def test_a_wrong_entry_point_signature_fails_to_link_naming_the_expected_one(compiled, harness, task):
    c = compiled["wrong_signature"]
    assert c.ok, c.messages
    ok, messages = build.link_runner(task, c.workdir, ARCH, timeout=300)
    assert not ok
    assert "`void trmm(int n, const double* A, double* B)`" in messages
    assert messages.startswith("kernel.cu must define the entry point")
    assert str(c.workdir) not in messages


def test_an_nvcc_on_path_that_is_a_wrapper_script_is_followed_to_the_toolkit_it_runs(tmp_path, monkeypatch):
    """/usr/local/bin/nvcc in Debian's CUDA images is `exec /usr/local/cuda-X/bin/nvcc "$@"`: the
    toolkit is where that nvcc lives, not /usr/local (which the jail would then bind whole)."""
    from grader import jail
    real = jail.toolkit_root()
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").write_text(f'#!/bin/sh\nexec {real / "bin" / "nvcc"} "$@"\n')
    (tmp_path / "bin" / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    assert jail.toolkit_root() == real != tmp_path
    assert build._nvcc() == str(real / "bin" / "nvcc")
    assert (real / "bin" / "nvcc.profile").is_file()


@pytest.mark.parametrize("text", ["\n" * (4 << 20), "/* " * (1 << 20), '"/* ' * (1 << 20), "#/*" * (1 << 20)],
                         ids=["4 MiB of newlines", "unclosed comments", "comment marks in strings", "#/* repeated"])
def test_the_define_scan_reads_a_file_built_to_slow_it_in_linear_time(tmp_path, text):
    # It runs in the grader's own process: its regexes took quadratic time (200 KB of newlines: 50 s,
    # a 4 MiB file about six hours), holding up every grading thread of a batch.
    src = tmp_path / "kernel.cu"
    src.write_text(text)
    start = time.monotonic()
    assert build._by_macro(src) == []
    assert time.monotonic() - start < 2
