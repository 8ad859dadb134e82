"""Train an MLP regressor with AMP and gradient clipping."""
import torch
import torch.nn as nn

from utils.precision import autocast_ctx, count_parameters, prepare_model

torch.manual_seed(0)
DEVICE = "cpu"
MAX_GRAD_NORM = 1.0

net = nn.Sequential(
    nn.Linear(16, 64), nn.SiLU(),
    nn.Linear(64, 64), nn.SiLU(),
    nn.Linear(64, 1),
)
net = prepare_model(net, DEVICE)
print(f"model has {count_parameters(net)} trainable parameters")

optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
scaler = torch.amp.GradScaler(DEVICE)
loss_fn = nn.SmoothL1Loss()

inputs = torch.randn(320, 16)
targets = inputs.sum(dim=1, keepdim=True).sin()

for step, (xb, yb) in enumerate(zip(inputs.split(64), targets.split(64))):
    optimizer.zero_grad()
    with autocast_ctx(DEVICE):
        loss = loss_fn(net(xb), yb)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)  # so clipping sees true gradient norms
    torch.nn.utils.clip_grad_norm_(net.parameters(), MAX_GRAD_NORM)
    scaler.step(optimizer)
    scaler.update()
    print(f"step {step} loss {loss.item():.4f}")
