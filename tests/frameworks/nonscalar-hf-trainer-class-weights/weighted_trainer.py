"""A Trainer whose loss weighs the rare classes up (the usual answer to an imbalanced dataset)."""
import torch
import torch.nn.functional as F
from transformers import Trainer


class WeightedLossTrainer(Trainer):
    def __init__(self, *args, class_weights=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.class_weights = class_weights

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        weights = self.class_weights.to(outputs.logits.device)
        per_example = F.cross_entropy(outputs.logits, labels, reduction="none")
        loss = per_example * weights[labels]
        return (loss, outputs) if return_outputs else loss
