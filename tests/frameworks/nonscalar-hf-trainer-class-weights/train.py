"""Fine-tunes a tiny BERT classifier with the Hugging Face Trainer on random token ids (CPU,
offline: the model is built from a config, nothing is downloaded)."""
import torch
from transformers import BertConfig, BertForSequenceClassification, TrainerCallback, TrainingArguments

from weighted_trainer import WeightedLossTrainer


class TokenDataset(torch.utils.data.Dataset):
    def __init__(self, n, vocab, length, classes):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(1, vocab, (n, length), generator=g)
        self.labels = torch.randint(0, classes, (n,), generator=g)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "attention_mask": torch.ones_like(self.ids[i]), "labels": self.labels[i]}


class PrintLoss(TrainerCallback):
    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs and "loss" in logs:
            print(f"step {state.global_step} loss {logs['loss']:.4f}")
        if logs and "eval_loss" in logs:
            print(f"step {state.global_step} eval_loss {logs['eval_loss']:.4f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=32, num_labels=3)
    model = BertForSequenceClassification(cfg)
    args = TrainingArguments(output_dir="out", max_steps=4, per_device_train_batch_size=8, logging_steps=1,
                             eval_strategy="steps", eval_steps=2, save_strategy="no", report_to=[],
                             use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    trainer = WeightedLossTrainer(model=model, args=args, train_dataset=TokenDataset(64, 64, 12, 3),
                                  eval_dataset=TokenDataset(16, 64, 12, 3),
                                  class_weights=torch.tensor([1.0, 2.0, 4.0]), callbacks=[PrintLoss()])
    trainer.train()
    print("done")
