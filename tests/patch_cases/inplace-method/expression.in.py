def f(x):
    y = x.mul_(2)  # FIX: inplace-method
    return y
