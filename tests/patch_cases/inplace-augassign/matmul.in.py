def f(x, w):
    x @= w  # FIX: inplace-augassign
    return x
