def normalize_(t):
    t = t.div(t.norm(dim=-1, keepdim=True))  # FIX: inplace-method
    return t


def embed(encoder, x):
    z = encoder(x).tanh()
    z = normalize_(z)
    return z @ z.T
