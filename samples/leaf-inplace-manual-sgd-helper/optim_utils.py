"""A hand-written SGD with momentum, for a tutorial that avoids torch.optim."""


def sgd_step(params, buffers, lr, momentum=0.9):
    """Update each parameter in place from its gradient, then clear the gradient."""
    for p, buf in zip(params, buffers):
        buf.mul_(momentum).add_(p.grad)
        p -= lr * buf
        p.grad = None
