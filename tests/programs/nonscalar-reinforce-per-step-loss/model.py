"""The REINFORCE example's policy: 4 -> 128 -> 2 with dropout, softmax over the two actions."""
import torch.nn as nn
import torch.nn.functional as F


class Policy(nn.Module):
    def __init__(self, n_obs=4, n_actions=2, hidden=128):
        super().__init__()
        self.affine1 = nn.Linear(n_obs, hidden)
        self.dropout = nn.Dropout(p=0.6)
        self.affine2 = nn.Linear(hidden, n_actions)

        self.saved_log_probs = []
        self.rewards = []

    def forward(self, x):
        x = self.affine1(x)
        x = self.dropout(x)
        x = F.relu(x)
        action_scores = self.affine2(x)
        return F.softmax(action_scores, dim=1)
