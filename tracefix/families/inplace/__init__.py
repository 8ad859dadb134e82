"""inplace-modification: a tensor autograd saved was modified in place before backward()."""
