"""Optimiser bookkeeping for actor-critic agents."""
import torch
import torch.nn as nn


class ActorCriticTrainer:
    def __init__(self, actor, critic, lr_actor=1e-3, lr_critic=2e-3, max_norm=1.0):
        self.actor, self.critic = actor, critic
        self.opt_actor = torch.optim.Adam(actor.parameters(), lr=lr_actor)
        self.opt_critic = torch.optim.Adam(critic.parameters(), lr=lr_critic)
        self.max_norm = max_norm

    def zero_grad(self):
        self.opt_actor.zero_grad()
        self.opt_critic.zero_grad()

    def update_critic(self):
        nn.utils.clip_grad_norm_(self.critic.parameters(), self.max_norm)
        self.opt_critic.step()

    def update_actor(self):
        nn.utils.clip_grad_norm_(self.actor.parameters(), self.max_norm)
        self.opt_actor.step()
