"""Training engine: one optimisation step with loss scaling and clipping."""
import torch


class Engine:
    def __init__(self, model, optimizer, max_norm=1.0):
        self.model = model
        self.optimizer = optimizer
        self.max_norm = max_norm
        self.scaler = torch.cuda.amp.GradScaler()

    def train_step(self, batch):
        images, labels = batch
        self.optimizer.zero_grad(set_to_none=True)
        logits = self.model(images)
        loss = torch.nn.functional.cross_entropy(logits.float(), labels)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        return loss.item()
