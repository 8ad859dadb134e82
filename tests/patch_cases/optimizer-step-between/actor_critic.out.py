import torch
from torch import optim


def train(env, actor, critic, steps):
    actor_opt = optim.Adam(actor.parameters(), lr=1e-4)
    critic_opt = optim.Adam(critic.parameters(), lr=1e-3)
    for _ in range(steps):
        state, reward = env.sample()
        value = critic(state)
        action = actor(state)
        q = critic(torch.cat([state, action], dim=-1))
        critic_loss = (value - reward).pow(2).mean()
        critic_opt.zero_grad()
        critic_loss.backward(retain_graph=True)
        # update the critic first
        critic_opt.step()  # FIX: optimizer-step-between
        q = critic(torch.cat([state, action], dim=-1))
        actor_loss = -q.mean()
        actor_opt.zero_grad()
        actor_loss.backward(
            retain_graph=False,
        )
        actor_opt.step()
