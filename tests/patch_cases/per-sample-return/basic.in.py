def compute_loss(model, batch):
    logits = model(batch["x"])
    loss = ce(logits, batch["y"])
    return loss  # FIX: per-sample-return
