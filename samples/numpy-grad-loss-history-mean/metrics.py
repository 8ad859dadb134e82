"""Running statistics for the training log."""
import numpy as np


def summarize(values):
    """Mean and spread of the losses logged since the last report."""
    return float(np.mean(values)), float(np.std(values))
