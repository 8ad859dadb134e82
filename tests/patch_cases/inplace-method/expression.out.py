def f(x):
    y = x.mul(2)  # FIX: inplace-method
    return y
