def f(x, a, b):
    y = x.sigmoid()
    y = y * (a + b)  # FIX: inplace-augassign
    return y
