model = build().to(target)  # FIX: model-cast
