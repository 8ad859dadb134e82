import torch


class Trainer:
    def __init__(self, actor, critic):
        self.opt_actor = torch.optim.Adam(actor.parameters())
        self.opt_critic = torch.optim.Adam(critic.parameters())

    def update_critic(self):
        self.opt_critic.step()

    def update_actor(self):
        self.opt_actor.step()
