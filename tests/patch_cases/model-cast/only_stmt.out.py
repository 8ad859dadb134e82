def prepare(model):
    pass
