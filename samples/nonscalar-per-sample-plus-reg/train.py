"""Image-feature classifier with a confidence penalty and hard-example tracking."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BETA = 0.1          # confidence-penalty weight (Pereyra et al., 2017)
N_HARD = 4


def confidence_penalty(logits):
    log_p = F.log_softmax(logits, dim=1)
    return (log_p.exp() * log_p).sum(dim=1).mean()


def main():
    torch.manual_seed(0)
    x = torch.randn(64, 30)
    y = torch.randint(0, 6, (64,))
    model = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 6))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    hard_counts = torch.zeros(64, dtype=torch.long)

    for step in range(5):
        logits = model(x)
        per_example = F.cross_entropy(logits, y, reduction="none")
        hard_counts[per_example.detach().topk(N_HARD).indices] += 1
        loss = per_example + BETA * confidence_penalty(logits)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"step {step} loss {loss.item():.4f}")
    print("most often hard:", hard_counts.topk(N_HARD).indices.tolist())


if __name__ == "__main__":
    main()
