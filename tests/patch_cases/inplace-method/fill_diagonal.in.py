def nt_xent(z):
    sim = (z @ z.t()).exp()
    sim.fill_diagonal_(0.0)  # FIX: inplace-method
    return sim.sum(1)
