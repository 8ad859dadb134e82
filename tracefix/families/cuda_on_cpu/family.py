"""cuda-on-cpu: code asks for CUDA where there is none (a CPU-only torch build, no driver, no
GPU); the fix is where the device is chosen, or ``map_location`` at ``torch.load``."""
from tracefix.families.api import Family

FAMILY = Family(
    name="cuda_on_cpu",
    entries=("cuda-on-cpu",),
    locate={"cuda-on-cpu": "run"},
    fix_kinds=("device-choice", "load-map-location", "cuda-call"),
    gate_words=("cuda", "nvidia"),
)
