"""device-mismatch: tensors on two devices (a GPU and the CPU) meet in one operation; the fix
moves the one that stayed behind: a batch, the model, or a tensor made in ``forward``."""
from tracefix.families.api import Family

FAMILY = Family(
    name="device_mismatch",
    entries=("device-mismatch",),
    locate={"device-mismatch": "run"},
    fix_kinds=("to-device-input", "model-to-device", "factory-device", "buffer-attribute"),
    gate_words=("same device", "device type", "weight type", "expected it to be on gpu"),
)
