"""numpy-grad: a tensor that requires grad (or lives on a GPU) was turned into a numpy array."""
