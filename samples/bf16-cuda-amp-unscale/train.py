"""Fine-tune a tiny CNN in bf16 using a reusable training engine."""
import torch
import torch.nn as nn

from engine import Engine


class TinyCNN(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, num_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
model = TinyCNN().to(device).bfloat16()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
engine = Engine(model, optimizer, max_norm=1.0)

images = torch.randn(16, 3, 16, 16, device=device, dtype=torch.bfloat16)
labels = torch.randint(0, 3, (16,), device=device)
for step in range(5):
    loss = engine.train_step((images, labels))
    print(f"step {step} loss {loss:.4f}")
