"""leaf-inplace: an in-place write to a parameter (a leaf that requires grad) with gradients on."""
