"""Loss functions for the token tagger."""
import torch.nn as nn


class SmoothedTokenLoss(nn.Module):
    """Cross-entropy over every token with a little label smoothing."""

    def __init__(self, num_tags, smoothing=0.1):
        super().__init__()
        self.num_tags = num_tags
        # keep per-token losses so we can inspect hard tokens later
        self.crit = nn.CrossEntropyLoss(reduction="none", label_smoothing=smoothing)

    def forward(self, logits, tags):
        # logits: [batch, seq, num_tags] -> flatten tokens
        return self.crit(logits.reshape(-1, self.num_tags), tags.reshape(-1))
