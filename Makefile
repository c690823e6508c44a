# The CUDA course kit. Every target is driven by one list: assignments/registry.txt.
#
#   make grade [A=trmm] [SUBMISSION=path/to/kernel.cu]   build, check, time and score
#   make test                                             the kit's own tests (C++, Python, GPU)
#   make harness [A=...] [ARCH=sm_90]                     build the harness only
#
# The grader (grader/, plain Python 3) calls the internal targets at the bottom to build the
# harness once per GPU architecture and to compile each submission on its own.

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

# Keep the objects the grader links against.
.SECONDARY:

.PHONY: all grade test test-cpp test-python harness clean help
all: help
help:
	@sed -n '3,6p' Makefile

grade:
	@$(GRADER) grade $(A) $(if $(SUBMISSION),--submission $(SUBMISSION))

test:
	@sh tools/test.sh

# ---------------------------------------------------------------------------------------------
# The harness: shared objects, then per assignment the checker (a whole program, no student code)
# and the runner's problem object (linked with a student's object at grading time).
harness: $(foreach a,$(A),$(BUILD)/$(a)/checker $(BUILD)/$(a)/problem_runner.o) \
         $(BUILD)/harness/runner.o $(BUILD)/harness/common.o

$(BUILD)/harness/%.o: harness/src/%.cu $(HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/%/problem_runner.o: assignments/%/problem.cu $(HEADERS) $(wildcard assignments/%/*.h)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -DKIT_RUNNER -c $< -o $@

$(BUILD)/%/problem_checker.o: assignments/%/problem.cu $(HEADERS) $(wildcard assignments/%/*.h)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -Xcompiler -fopenmp -c $< -o $@

$(BUILD)/%/checker: $(BUILD)/%/problem_checker.o $(BUILD)/harness/checker.o $(BUILD)/harness/check.o $(BUILD)/harness/common.o
	$(NVCC) -arch=$(ARCH) -Xcompiler -fopenmp $^ -lcublas -o $@

# Internal, called by the grader: one student file compiled on its own, then linked with the runner.
student-object:
	$(NVCC) -std=c++17 -O3 -arch=$(ARCH) -Iharness/include -c $(SRC) -o $(OBJ)

link-runner:
	$(NVCC) -arch=$(ARCH) $(OBJ) $(BUILD)/$(A)/problem_runner.o $(BUILD)/harness/runner.o $(BUILD)/harness/common.o -o $(EXE)

# ---------------------------------------------------------------------------------------------
# C++ tests (Catch2, host code only): the harness's helpers and every assignment's CPU reference.
CATCH_TESTS := harness/tests/catch_main.cu harness/tests/test_harness.cu $(foreach a,$(ASSIGNMENTS),$(wildcard assignments/$(a)/test_*.cu))
CATCH_OBJS := $(patsubst %.cu,$(BUILD)/tests/%.o,$(CATCH_TESTS))

$(BUILD)/tests/%.o: %.cu $(HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/tests/cpp_tests: $(CATCH_OBJS) $(foreach a,$(ASSIGNMENTS),$(BUILD)/$(a)/problem_checker.o) \
                          $(BUILD)/harness/check.o $(BUILD)/harness/common.o
	$(NVCC) -arch=$(ARCH) -Xcompiler -fopenmp $^ -lcublas -o $@

test-cpp: $(BUILD)/tests/cpp_tests
	$(BUILD)/tests/cpp_tests

clean:
	rm -rf build
