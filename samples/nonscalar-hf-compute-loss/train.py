"""Fine-tune a tiny bag-of-embeddings sentence classifier with a custom Trainer."""
import torch
import torch.nn as nn

from trainer import ClassificationTrainer


class SentenceClassifier(nn.Module):
    def __init__(self, vocab=100, dim=32, num_labels=3):
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.head = nn.Sequential(nn.Dropout(0.1), nn.Linear(dim, num_labels))

    def forward(self, input_ids):
        return self.head(self.embed(input_ids))


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
model = SentenceClassifier().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
scaler = torch.amp.GradScaler(device)
trainer = ClassificationTrainer(model, optimizer, scaler, device)

batch = {
    "input_ids": torch.randint(0, 100, (16, 20), device=device),
    "labels": torch.randint(0, 3, (16,), device=device),
}
for step in range(5):
    loss = trainer.training_step(batch)
    print(f"step {step} loss {loss.item():.4f}")
