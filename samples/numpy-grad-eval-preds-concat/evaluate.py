"""Validation: ranking quality of the predicted probabilities."""
import numpy as np
import torch


def auc(scores, labels):
    """Area under the ROC curve from the rank statistic (no sklearn needed)."""
    order = np.argsort(scores)
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def validate(model, loader):
    model.eval()
    preds, targets = [], []
    for xb, yb in loader:
        logits = model(xb).squeeze(1)
        preds.append(torch.sigmoid(logits))
        targets.append(yb.numpy())
    model.train()
    return auc(np.concatenate(preds), np.concatenate(targets))
