"""no-grad-fn: backward() on a value that autograd never recorded."""
