import torch
from torch import optim


def train(env, actor, critic, steps):
    actor_opt = optim.Adam(actor.parameters(), lr=1e-4)
    critic_opt = optim.Adam(critic.parameters(), lr=1e-3)
    for _ in range(steps):
        state, reward = env.sample()
        action = actor(state)
        value, q = critic(state), critic(torch.cat([state, action], dim=-1))
        critic_loss = (value - reward).pow(2).mean()
        critic_opt.zero_grad()
        critic_loss.backward(retain_graph=True)
        actor_loss = -q.mean()
        actor_opt.zero_grad()
        actor_loss.backward(
            retain_graph=False,
            inputs=[p for group in actor_opt.param_groups for p in group["params"] if p.requires_grad],
        )
        # update the critic first
        critic_opt.step()  # FIX: optimizer-step-between
        actor_opt.step()
