"""Physics-informed network for a damped harmonic oscillator (no labelled data)."""
import torch
import torch.nn as nn

from physics import initial_condition_loss, ode_residual


class PINN(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(1, width), nn.Tanh(),
            nn.Linear(width, width), nn.Tanh(),
            nn.Linear(width, 1),
        )

    def forward(self, t):
        return self.body(t)


def main():
    torch.manual_seed(0)
    model = PINN()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    t_colloc = torch.linspace(0.0, 5.0, 100).unsqueeze(1)

    for it in range(5):
        optimizer.zero_grad()
        res = ode_residual(model, t_colloc.clone())
        loss = res.pow(2).mean() + 10.0 * initial_condition_loss(model)
        loss.backward()
        optimizer.step()
        print(f"iter {it} loss {loss.item():.5f}")


main()
