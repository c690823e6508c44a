"""The GEMM references (matmul, syr2k, trmm) each carry one block of FP64 GEMM primitives: the
cp.async copies and the DMMA wrappers. A reference is one file compiled on its own, as a
submission is, so the block is copied, not included; these tests keep the copies identical, so a
fix made in one copy fails here until it is in all three. Host only, no GPU."""
import difflib

import pytest

from grader import tasks

BEGIN = ("// gemm-engine: begin (kept identical in reference/matmul, reference/syr2k and reference/trmm"
         " by grader/tests/test_reference_copies.py)")
END = "// gemm-engine: end"
REFERENCES = ("matmul", "syr2k", "trmm")


def block(name: str) -> list:
    """The lines of the reference's block, markers included; fails unless the file has exactly one
    begin marker, then exactly one end marker."""
    lines = (tasks.ROOT / "reference" / name / "kernel.cu").read_text().splitlines(keepends=True)
    begins = [i for i, line in enumerate(lines) if line.startswith("// gemm-engine: begin")]
    ends = [i for i, line in enumerate(lines) if line.startswith("// gemm-engine: end")]
    where = f"reference/{name}/kernel.cu"
    assert len(begins) == 1, f"{where}: {len(begins)} begin markers (lines {[i + 1 for i in begins]}), one expected"
    assert len(ends) == 1, f"{where}: {len(ends)} end markers (lines {[i + 1 for i in ends]}), one expected"
    assert begins[0] < ends[0], f"{where}: the end marker (line {ends[0] + 1}) comes before the begin marker"
    assert lines[begins[0]].rstrip("\n") == BEGIN, f"{where}: the begin marker reads\n{lines[begins[0]]}not\n{BEGIN}"
    assert lines[ends[0]].rstrip("\n") == END, f"{where}: the end marker reads\n{lines[ends[0]]}not\n{END}"
    return lines[begins[0]:ends[0] + 1]


@pytest.mark.parametrize("name", REFERENCES)
def test_each_gemm_reference_has_one_begin_marker_then_one_end_marker(name):
    block(name)


def test_the_gemm_engine_block_is_identical_in_the_three_references():
    first, *others = REFERENCES
    diffs = ["".join(difflib.unified_diff(block(first), block(other), f"reference/{first}/kernel.cu",
                                          f"reference/{other}/kernel.cu"))
             for other in others]
    diffs = [d for d in diffs if d]
    if diffs:
        pytest.fail("the gemm-engine blocks differ; make the same change in every copy:\n" + "\n".join(diffs))


def test_the_gemm_engine_block_holds_the_copies_and_the_mma_wrappers():
    text = "".join(block(REFERENCES[0]))
    for needed in ("#define KIT_SYNC_COPY", "void cp_async_8(", "void cp_async_16(", "void cp_async_commit(",
                   "void cp_async_wait(", "void dmma_8x8x4(", "void dmma_16x8x4(", "void dmma_16x8x8("):
        assert needed in text, f"the gemm-engine block has no {needed}"
