"""Fine-tune only the adapters of a 'pretrained' encoder on a toy task."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from adapters import AdaptedLayer

DIM = 32


def build_model():
    # stand-in for a pretrained backbone: two frozen layers + a new head
    backbone = [nn.Sequential(nn.Linear(DIM, DIM), nn.GELU()) for _ in range(2)]
    layers = [AdaptedLayer(b, DIM) for b in backbone]
    return nn.Sequential(*layers, nn.Linear(DIM, 2))


def main():
    torch.manual_seed(0)
    model = build_model()
    trainable = [p for p in model.parameters() if p.requires_grad]
    print(f"trainable params: {sum(p.numel() for p in trainable)}")
    optimizer = torch.optim.AdamW(trainable, lr=1e-3)

    x = torch.randn(16, DIM)
    y = torch.randint(0, 2, (16,))
    for step in range(5):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss={loss.item():.4f}")


main()
