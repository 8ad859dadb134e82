def f(x, w):
    x = x @ w  # FIX: inplace-augassign
    return x
