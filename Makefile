# The CUDA course kit. Every target is driven by one list: assignments/registry.txt.
#
#   make grade [A=trmm] [SUBMISSION=path/to/kernel.cu]   build, check, time and score
#   make test                                             the kit's own tests (C++, Python, GPU)
#   make harness [A=...] [ARCH=sm_90]                     build the harness only
#   make slides-bench                                     lecture examples: check, time, tables per GPU
#   make grade ... HIDDEN=1                               include the hidden cases (TA grading)
#   make grade ... PROFILE=1                              then profile one call (Nsight Compute): why it is as fast as it is
#   make handouts [HANDOUTS_OUT=dir] [NO_PDF=1] | make dist [DIST_OUT=file.tar.gz] [NO_PDF=1]   for instructors
#   make batch SUBMISSIONS=dir [OUT=dir] [REGRADE=student]   grade a whole class (TAs)
#   make bench [A=...] [REPEAT=5] [BENCH_OUT=dir]           the references against the libraries and the GPU's limits
#
# The grader (grader/, plain Python 3) calls `make harness` to build the harness once per GPU
# architecture; it compiles and links each submission itself (grader/grader/build.py).

include harness/harness.mk

.PHONY: all grade test test-cpp test-python harness clean help slides-bench handouts dist bench
all: help
help:
	@sed -n '3,11p' Makefile

grade:
	@$(call grade_cmd,$(if $(filter 1 yes true,$(HIDDEN)),--hidden) $(if $(filter 1 yes true,$(PROFILE)),--profile))

test:
	@sh tools/test.sh

# Every assignment's hidden reference graded on this GPU, next to the library baselines and the GPU's
# physical limit; REPEAT=N grades each N times (the spread of the rate). Tables in bench/<gpu>/.
bench:
	@$(GRADER) bench $(A) $(if $(REPEAT),--repeat $(REPEAT)) $(if $(BENCH_OUT),--out $(BENCH_OUT))

# The lecture examples (slides_examples/): every version checked, then timed on this GPU.
slides-bench:
	$(MAKE) -C slides_examples bench

# TAs: every student entry in SUBMISSIONS graded (see README, "TAs"). OUT (default grades/batch),
# JOBS (parallel builds), REGRADE (students graded again), A (only these assignments), SIMILARITY=1
# (a code-similarity report after the grading: needs copydetect), SLURM=1 (submit to Slurm as a job
# array), SLURM_STATUS=1 (its progress), GPUS=0,2 (the GPUs graded on, one timing each at once;
# default: all of GPU 0's model),
# BATCH_FLAGS (more options of `python3 -m grader batch --help`). OUT is read from the command line
# only, never from the environment.
.PHONY: batch
batch:
	@$(if $(SUBMISSIONS),,$(error make batch needs SUBMISSIONS=folder with one entry per student))$(GRADER) batch $(SUBMISSIONS) \
		$(if $(filter command line,$(origin OUT)),--out $(OUT)) $(if $(JOBS),--jobs $(JOBS)) \
		$(if $(filter command line,$(origin A)),--assignments $(A)) $(if $(REGRADE),--regrade $(REGRADE)) \
		$(if $(filter 1 yes true,$(SIMILARITY)),--similarity) $(if $(filter 1 yes true,$(PROFILE)),--profile) $(if $(filter 1 yes true,$(SLURM)),--slurm) \
		$(if $(filter 1 yes true,$(SLURM_STATUS)),--status) $(if $(GPUS),--gpus $(GPUS)) $(BATCH_FLAGS)

# Instructors: the handouts (build/handouts/) and the student kit (build/dist/cuda-kit-student.tar.gz),
# with a Python that has Jinja2 (tools/handouts_env.sh sets one up) and Chromium for the PDFs.
handouts dist:
	@py=$$(sh tools/handouts_env.sh) && PYTHONPATH=$(CURDIR)/grader $$py -m grader $@ \
	    $(if $(filter handouts,$@),$(if $(HANDOUTS_OUT),--out $(HANDOUTS_OUT)),$(if $(DIST_OUT),--out $(DIST_OUT))) \
	    $(if $(NO_PDF),--no-pdf)

# ---------------------------------------------------------------------------------------------
# C++ tests (Catch2, host code only): the harness's helpers and every assignment's CPU reference.
CATCH_TESTS := harness/tests/catch_main.cu harness/tests/test_harness.cu $(foreach a,$(ASSIGNMENTS),$(wildcard assignments/$(a)/test_*.cu))
CATCH_OBJS := $(patsubst %.cu,$(BUILD)/tests/%.o,$(CATCH_TESTS))

$(BUILD)/tests/%.o: %.cu $(HEADERS) $(PROBLEM_HEADERS)
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# Catch2's own main: host code only, the whole of Catch2's one big header. The host compiler
# without optimisation builds it in a quarter of the time nvcc -O3 takes (27 s of `make test` on a
# 16-core machine, the last object to finish), and nothing in it is timed.
$(BUILD)/tests/harness/tests/catch_main.o: harness/tests/catch_main.cu
	@mkdir -p $(@D)
	$(CXX) -std=c++17 -O0 -x c++ -c $< -o $@

$(BUILD)/tests/cpp_tests: $(CATCH_OBJS) $(foreach a,$(ASSIGNMENTS),$(BUILD)/$(a)/problem_checker.o) \
                          $(BUILD)/harness/check.o $(BUILD)/harness/common.o $(BUILD)/harness/wire.o
	$(NVCC) -arch=$(ARCH) -Xcompiler -fopenmp $^ -lcublas -o $@

test-cpp: $(BUILD)/tests/cpp_tests
	$(BUILD)/tests/cpp_tests

# The checker's comparison on the GPU next to the host's (run by grader/tests/test_gpu_compare.py).
$(BUILD)/tests/compare_on_gpu: $(BUILD)/tests/harness/tests/compare_on_gpu.o $(BUILD)/harness/check.o \
                               $(BUILD)/harness/common.o $(BUILD)/harness/wire.o
	$(NVCC) -arch=$(ARCH) -Xcompiler -fopenmp $^ -o $@

clean:
	rm -rf build
