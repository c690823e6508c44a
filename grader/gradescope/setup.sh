#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. The autograder zip holds
# this file, run_autograder, and the kit itself in kit/ (without reference/: the references stay off
# the autograder, which needs only the harness, the task files and the grader):
#   zip -r autograder.zip setup.sh run_autograder kit/
# The image must be one with an NVIDIA GPU and driver; the CUDA Toolkit (nvcc) is installed here.
set -euo pipefail
# bubblewrap is the jail student code runs in: without it (or where the container refuses user
# namespaces) the grader refuses to run submissions, and results.json says why.
apt-get update -q >/dev/null && apt-get install -y -q make python3 bubblewrap >/dev/null
if ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
    # NVIDIA's network repository for Ubuntu; the toolkit only, the driver comes with the GPU host.
    . /etc/os-release
    repo="ubuntu${VERSION_ID/./}"
    apt-get install -y -q wget ca-certificates >/dev/null
    wget -q "https://developer.download.nvidia.com/compute/cuda/repos/${repo}/x86_64/cuda-keyring_1.1-1_all.deb"
    dpkg -i cuda-keyring_1.1-1_all.deb && apt-get update -q && apt-get install -y -q cuda-toolkit >/dev/null
fi
export PATH=/usr/local/cuda/bin:$PATH
# Build the harness now, for the GPU the image is built on, so that a submission pays only for itself.
cd /autograder/source/kit && make harness || echo "setup: the harness will be built at the first submission"
# Tell at build time, not at the first submission, whether this image can jail student code.
bwrap --unshare-all --unshare-user --uid 65534 --gid 65534 --ro-bind /usr /usr --symlink usr/lib /lib \
      --symlink usr/lib64 /lib64 --symlink usr/bin /bin -- /bin/true \
    || echo "setup: WARNING: bubblewrap cannot make its namespaces in this image: every submission will be refused"
