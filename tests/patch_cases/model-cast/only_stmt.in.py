def prepare(model):
    model.half()  # FIX: model-cast
