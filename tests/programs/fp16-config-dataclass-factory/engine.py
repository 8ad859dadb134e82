"""Training and evaluation loops: autocast in the config's precision, a GradScaler for fp16,
gradient accumulation, clipping after scaler.unscale_, a linear warmup/decay schedule, accuracy."""
import logging

import torch

logger = logging.getLogger(__name__)


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return float(step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - step) / float(max(1, num_training_steps - num_warmup_steps)))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


def train_one_epoch(model, dataloader, optimizer, lr_scheduler, scaler, cfg, epoch, completed_steps):
    model.train()
    total = 0.0
    for step, batch in enumerate(dataloader):
        with torch.autocast("cpu", dtype=cfg.autocast_dtype, enabled=cfg.precision != "fp32"):
            outputs = model(**batch)
            loss = outputs.loss / cfg.gradient_accumulation_steps
        scaler.scale(loss).backward()
        total += loss.item() * cfg.gradient_accumulation_steps
        if (step + 1) % cfg.gradient_accumulation_steps == 0 or step == len(dataloader) - 1:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()
            lr_scheduler.step()
            optimizer.zero_grad()
            completed_steps += 1
        if completed_steps >= cfg.max_train_steps:
            break
    logger.info("epoch %d: train loss %.4f, lr %.2e", epoch, total / (step + 1), lr_scheduler.get_last_lr()[0])
    return completed_steps


@torch.no_grad()
def evaluate(model, dataloader, cfg):
    model.eval()
    correct, seen = 0, 0
    for batch in dataloader:
        with torch.autocast("cpu", dtype=cfg.autocast_dtype, enabled=cfg.precision != "fp32"):
            outputs = model(**batch)
        predictions = outputs.logits.argmax(dim=-1)
        correct += (predictions == batch["labels"]).sum().item()
        seen += batch["labels"].numel()
    return {"accuracy": correct / max(1, seen)}
