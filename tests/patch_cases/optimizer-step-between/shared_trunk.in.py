import torch
from torch import optim


def train(model, env, steps):
    actor_opt = optim.Adam(model.trunk_parameters() + list(model.action_head.parameters()), lr=3e-4)
    critic_opt = optim.Adam(model.trunk_parameters() + list(model.value_head.parameters()), lr=1e-3)
    for _ in range(steps):
        state, reward = env.sample()
        log_prob, value = model(state)
        value_loss = (value - reward).pow(2).mean()
        policy_loss = -(log_prob * (reward - value.detach())).mean()
        actor_opt.zero_grad()
        critic_opt.zero_grad()
        value_loss.backward(retain_graph=True)
        critic_opt.step()  # FIX: optimizer-step-between
        policy_loss.backward()
        actor_opt.step()
