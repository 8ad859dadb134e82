def compute_loss(model, batch):
    logits = model(batch["x"])
    loss = ce(logits, batch["y"])
    return loss.mean()  # FIX: per-sample-return
