def prepare(model):
    pass  # FIX: model-cast
