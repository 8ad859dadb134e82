"""Train a bag-of-embeddings text classifier with mixed precision."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from config import TrainConfig


class TextClassifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab_size, cfg.embed_dim)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.embed_dim, cfg.hidden), nn.GELU(),
            nn.Linear(cfg.hidden, cfg.num_classes),
        )

    def forward(self, tokens):
        return self.mlp(self.embed(tokens).mean(dim=1))


def main(cfg: TrainConfig):
    torch.manual_seed(0)
    model = TextClassifier(cfg).to(cfg.device, getattr(torch, cfg.param_dtype))
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    scaler = torch.amp.GradScaler(cfg.device)
    amp_dtype = getattr(torch, cfg.amp_dtype)

    tokens = torch.randint(0, cfg.vocab_size, (cfg.batch_size, cfg.seq_len))
    labels = torch.randint(0, cfg.num_classes, (cfg.batch_size,))
    for step in range(cfg.steps):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=cfg.device, dtype=amp_dtype):
            loss = F.cross_entropy(model(tokens), labels)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        print(f"step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main(TrainConfig())
