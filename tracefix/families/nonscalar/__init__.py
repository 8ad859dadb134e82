"""nonscalar-backward: backward() or autograd.grad() on a tensor that is not a scalar."""
