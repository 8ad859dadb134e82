"""One-step deterministic actor-critic on a contextual-bandit toy task."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from trainer import ActorCriticTrainer

STATE, ACTION = 6, 2


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(STATE + ACTION, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, s, a):
        return self.net(torch.cat([s, a], dim=-1)).squeeze(-1)


def reward(s, a):
    return -((a - s[:, :ACTION].tanh()) ** 2).sum(dim=-1)


torch.manual_seed(0)
actor = nn.Sequential(nn.Linear(STATE, 64), nn.ReLU(), nn.Linear(64, ACTION), nn.Tanh())
critic = Critic()
trainer = ActorCriticTrainer(actor, critic)

for step in range(5):
    states = torch.randn(128, STATE)
    actions = actor(states)
    q = critic(states, actions)
    critic_loss = F.mse_loss(q, reward(states, actions.detach()))

    trainer.zero_grad()
    critic_loss.backward(retain_graph=True)
    trainer.update_critic()

    actor_loss = -q.mean()
    actor_loss.backward()
    trainer.update_actor()
    print(f"step {step} loss {critic_loss.item():.4f} actor {actor_loss.item():.4f}")
