"""Cheap health metrics for embedding training."""
import torch


@torch.no_grad()
def mean_cosine(z):
    """Mean off-diagonal cosine similarity; close to 1 means the embeddings collapsed."""
    z.div_(z.norm(dim=1, keepdim=True))
    sim = z @ z.T
    n = z.shape[0]
    return ((sim.sum() - sim.diagonal().sum()) / (n * (n - 1))).item()


@torch.no_grad()
def accuracy(logits, labels):
    return (logits.argmax(dim=1) == labels).float().mean().item()
