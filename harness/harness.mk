# harness.mk: what both Makefiles share (the kit's, and the student kit's): the assignments, the
# grader, the GPU architecture, and how the harness is built. Included, never run on its own.

ASSIGNMENTS := $(shell sed -e 's/\#.*//' assignments/registry.txt)
A ?= $(ASSIGNMENTS)
PYTHON ?= python3
GRADER := PYTHONPATH=$(CURDIR)/grader $(PYTHON) -m grader
NVCC ?= nvcc
# The local GPU's architecture (sm_90 where there is none); CI compiles for this one only.
ARCH ?= $(shell $(GRADER) arch 2>/dev/null || echo sm_90)
BUILD := build/$(ARCH)
NVCCFLAGS := -std=c++17 -O3 -arch=$(ARCH) -Iharness/include -Xcompiler -Wall
HEADERS := $(wildcard harness/include/*.cuh harness/include/*.h)
# An assignment's headers (a problem may share another's, as jacobi_2gpu does jacobi's).
PROBLEM_HEADERS := $(wildcard assignments/*/*.h assignments/*/*.cuh)

# Keep the objects the grader links against.
.SECONDARY:

# make grade exits 0 once the grading completed (whatever the score: the report says it) and 2 when
# it could not grade; `python3 -m grader grade` also exits 1 for less than full marks, for scripts.
grade_cmd = $(GRADER) grade $(A) $(if $(SUBMISSION),--submission $(SUBMISSION)) $(1); rc=$$?; [ $$rc -le 1 ] || exit $$rc

# ---------------------------------------------------------------------------------------------
# The harness, per assignment: the checker (a whole program, no student code: the judge and the
# library server) and the runner's problem object, linked with a student's kernel.o and the runner's
# library (librunner.a) at grading time.
RUNNER_PARTS := common wire shared_arrays serve runner
CHECKER_PARTS := common wire shared_arrays serve check truth hand judge checker

harness: $(foreach a,$(A),$(BUILD)/$(a)/checker $(BUILD)/$(a)/problem_runner.o) \
         $(BUILD)/harness/librunner.a $(BUILD)/harness/gpu_probe

$(BUILD)/harness/%.o: harness/src/%.cu $(HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# The checker compares outputs of CPU-computed truths, and gathers protected elements, on every core.
$(BUILD)/harness/check.o: NVCCFLAGS += -Xcompiler -fopenmp

$(BUILD)/harness/librunner.a: $(foreach p,$(RUNNER_PARTS),$(BUILD)/harness/$(p).o)
	@rm -f $@
	$(NVCC) -lib $^ -o $@

$(BUILD)/%/problem_runner.o: assignments/%/problem.cu $(HEADERS) $(PROBLEM_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DKIT_RUNNER -c $< -o $@

$(BUILD)/%/problem_checker.o: assignments/%/problem.cu $(HEADERS) $(PROBLEM_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fopenmp -c $< -o $@

$(BUILD)/%/checker: $(BUILD)/%/problem_checker.o $(foreach p,$(CHECKER_PARTS),$(BUILD)/harness/$(p).o)
	$(NVCC) -arch=$(ARCH) -Xcompiler -fopenmp $^ -lcublas -o $@

# Linked as a runner is (build.py links each submission's kernel.o with the objects above the same
# way): batch grading learns from it which libraries a runner loads, and checks the GPU in the jail.
$(BUILD)/harness/gpu_probe: $(BUILD)/harness/gpu_probe.o $(BUILD)/harness/common.o
	$(NVCC) -arch=$(ARCH) $^ -o $@
