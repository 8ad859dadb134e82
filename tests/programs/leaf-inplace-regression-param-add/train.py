"""Fit a degree-4 polynomial with a Linear layer and a hand-written gradient step.

Modeled on pytorch/examples regression/main.py (BSD-3-Clause licence): make_features, the target
function f, poly_desc, get_batch, a torch.nn.Linear fitted with smooth_l1_loss, the parameters
updated by hand after the backward, and the stop criterion on the loss. Written from scratch for
tracefix's test bed, following that program's structure; a seed and --max-batches make it end
deterministically. Injected bug: the update loop calls param.add_(-lr * param.grad) on the
parameter itself (the original goes through the deprecated param.data), so the in-place update of
a leaf that requires grad runs while autograd records; the crash is that line, and the fix is to
run the update loop under torch.no_grad().
"""
from __future__ import print_function

import argparse
from itertools import count

import torch
import torch.nn.functional as F

POLY_DEGREE = 4
torch.manual_seed(0)
W_target = torch.randn(POLY_DEGREE, 1) * 5
b_target = torch.randn(1) * 5


def make_features(x):
    """Builds features i.e. a matrix with columns [x, x^2, x^3, x^4]."""
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    """Approximated function."""
    return x.mm(W_target) + b_target.item()


def poly_desc(W, b):
    """Creates a string description of a polynomial."""
    result = 'y = '
    for i, w in enumerate(W):
        result += '{:+.2f} x^{} '.format(w, i + 1)
    result += '{:+.2f}'.format(b[0])
    return result


def get_batch(batch_size=32):
    """Builds a batch i.e. (x, f(x)) pair."""
    random = torch.randn(batch_size)
    x = make_features(random)
    y = f(x)
    return x, y


parser = argparse.ArgumentParser()
parser.add_argument('--max-batches', type=int, default=200)
parser.add_argument('--lr', type=float, default=0.1)
args = parser.parse_args()

# Define model
fc = torch.nn.Linear(W_target.size(0), 1)

for batch_idx in count(1):
    # Get data
    batch_x, batch_y = get_batch()

    # Reset gradients
    fc.zero_grad()

    # Forward pass
    output = F.smooth_l1_loss(fc(batch_x), batch_y)
    loss = output.item()

    # Backward pass
    output.backward()

    # Apply gradients
    for param in fc.parameters():
        param.add_(-args.lr * param.grad)

    # Stop criterion
    if loss < 1e-3 or batch_idx >= args.max_batches:
        break

print('Loss: {:.6f} after {} batches'.format(loss, batch_idx))
print('==> Learned function:\t' + poly_desc(fc.weight.view(-1), fc.bias))
print('==> Actual function:\t' + poly_desc(W_target.view(-1), b_target))
print('done: {} batches'.format(batch_idx))
