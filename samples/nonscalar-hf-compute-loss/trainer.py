"""A minimal HF-style Trainer with a custom compute_loss."""
import torch
import torch.nn.functional as F


class ClassificationTrainer:
    def __init__(self, model, optimizer, scaler, device):
        self.model = model
        self.optimizer = optimizer
        self.scaler = scaler
        self.device = device

    def compute_loss(self, model, inputs):
        logits = model(inputs["input_ids"])
        log_probs = F.log_softmax(logits.float(), dim=-1)
        # negative log-likelihood of the gold label for every example
        nll = -log_probs.gather(-1, inputs["labels"].unsqueeze(-1)).squeeze(-1)
        return nll

    def training_step(self, inputs):
        self.model.train()
        with torch.autocast(device_type=self.device, dtype=torch.float16):
            loss = self.compute_loss(self.model, inputs)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()
