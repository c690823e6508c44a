"""Nsight Compute's raw CSV, written here in its layout for the profile tests (test_profile.py,
test_profile_grading.py): no GPU and no ncu needed."""
import csv
import io

from grader.profile import Peaks
from grader.profile.ncu import Kernel

H100 = Peaks(flops=67e12, bandwidth=3.35e12, sms=132, precision="fp64")


def raw_csv(*kernels: dict) -> str:
    """ncu --csv --page raw --print-units base, for kernels given as {metric: value}."""
    fixed = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
             "Block Size", "Grid Size", "Device", "CC"]
    metrics = sorted({m for k in kernels for m in k if m not in fixed})
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(fixed + metrics)
    w.writerow([""] * len(fixed) + ["byte" if "bytes" in m else "" for m in metrics])
    for i, k in enumerate(kernels):
        w.writerow([str(i), "4242", "runner", "gpu", k.get("Kernel Name", f"kernel_{i}"), "1", "7", "(256, 1, 1)",
                    "(1, 1, 1)", "0", "9.0"] + [k.get(m, "") for m in metrics])
    return "==PROF== Connected to process 4242\n" + out.getvalue() + "==PROF== Disconnected\n"


def kernel(**values) -> Kernel:
    k = Kernel("void trmm_kernel<64>(int, const double*, double*)")
    k.values.update(values)
    return k
