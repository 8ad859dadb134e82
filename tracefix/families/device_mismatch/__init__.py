"""device-mismatch: tensors on two devices meet in one operation."""
