"""Actor and critic heads on one shared trunk."""
import torch.nn as nn
import torch.nn.functional as F


class Policy(nn.Module):
    """Implements both actor and critic in one model."""

    def __init__(self, n_obs=4, n_actions=2, hidden=32):
        super().__init__()
        self.affine1 = nn.Linear(n_obs, hidden)
        self.affine2 = nn.Linear(hidden, hidden)
        self.action_head = nn.Linear(hidden, n_actions)
        self.value_head = nn.Linear(hidden, 1)
        self.saved_actions = []
        self.rewards = []

    def trunk_parameters(self):
        return list(self.affine1.parameters()) + list(self.affine2.parameters())

    def forward(self, x):
        x = F.relu(self.affine1(x))
        x = F.relu(self.affine2(x))
        action_prob = F.softmax(self.action_head(x), dim=-1)
        state_values = self.value_head(x)
        return action_prob, state_values
