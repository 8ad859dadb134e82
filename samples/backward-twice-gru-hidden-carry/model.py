"""A character-level GRU language model."""
import torch
import torch.nn as nn


class CharGRU(nn.Module):
    def __init__(self, vocab, embed=16, hidden=32):
        super().__init__()
        self.hidden_size = hidden
        self.embed = nn.Embedding(vocab, embed)
        self.rnn = nn.GRU(embed, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def init_hidden(self, batch):
        return torch.zeros(1, batch, self.hidden_size)

    def forward(self, tokens, hidden):
        output, hidden = self.rnn(self.embed(tokens), hidden)
        return self.out(output), hidden
