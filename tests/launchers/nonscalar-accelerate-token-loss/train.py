"""Trains a tiny GRU language model on random token ids with Hugging Face Accelerate:
accelerate launch --cpu train.py"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator

VOCAB = 40


class TinyLM(nn.Module):
    def __init__(self, vocab=VOCAB, dim=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.out = nn.Linear(dim, vocab)

    def forward(self, ids):
        h, _ = self.gru(self.emb(ids))
        return self.out(h)


def main():
    accelerator = Accelerator()
    torch.manual_seed(0)
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = torch.utils.data.DataLoader(torch.randint(1, VOCAB, (64, 12)), batch_size=8)
    model, opt, loader = accelerator.prepare(model, opt, loader)
    for step, ids in enumerate(loader):
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        accelerator.backward(loss)
        opt.step()
        opt.zero_grad()
        accelerator.print(f"step {step} loss {loss.mean().item():.4f}")
    accelerator.print("done")


if __name__ == "__main__":
    main()
