"""LoRA fine-tuning of a toy attention layer with fp16 AMP."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from lora import inject_lora


class ToyAttention(nn.Module):
    def __init__(self, dim=32, num_labels=4):
        super().__init__()
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.classifier = nn.Linear(dim, num_labels)

    def forward(self, x):
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        ctx = F.scaled_dot_product_attention(q, k, v)
        return self.classifier(ctx.mean(dim=1))


torch.manual_seed(0)
model = ToyAttention()
model.requires_grad_(False)
model = inject_lora(model, r=4)
model.to(torch.float16)  # the base model was released in fp16

params = [p for p in model.parameters() if p.requires_grad]
optimizer = torch.optim.AdamW(params, lr=1e-3)
scaler = torch.amp.GradScaler("cpu")

x = torch.randn(8, 6, 32)
y = torch.randint(0, 4, (8,))
for step in range(5):
    with torch.autocast(device_type="cpu", dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
    print(f"step {step} loss {loss.item():.4f}")
