"""Fine-tune a tiny encoder classifier on a GLUE-style csv task with fp16 autocast.

Modeled on huggingface/transformers examples/pytorch/text-classification/run_glue_no_trainer.py
(Apache-2.0 licence): parse_args() with the same options (train/validation csv files, max_length,
per-device batch sizes, learning rate, weight decay, epochs / max_train_steps, gradient
accumulation, warmup steps, output_dir, seed), a tokenizer and DataCollatorWithPadding (padding to a
multiple of 8 under fp16), AdamW with no-decay groups for biases and LayerNorm weights, a linear
warmup schedule, and an accuracy evaluation after every epoch. Written from scratch for tracefix's
test bed in plain PyTorch (a tiny transformer encoder defined in models/, no transformers or
accelerate): config.py holds a TrainConfig dataclass and the DTYPES name -> dtype dict,
models/factory.py builds the model, engine.py runs autocast + GradScaler("cpu").
Injected bug: build_model() in models/factory.py returns model.to(dtype=DTYPES[cfg.precision]), so
the config's precision = "fp16" casts the weights to float16 too; their gradients are fp16 and the
GradScaler refuses them at scaler.unscale_ in engine.py. The fix is that cast in the factory (return
the float32 model; autocast does the fp16 maths), not the "fp16" default, which is what the user wants.
"""
import argparse
import logging
import math
import os
import random

import torch
from torch.utils.data import DataLoader

from config import DTYPES, TrainConfig
from data import DataCollatorWithPadding, GlueDataset, WordTokenizer, load_csv, write_synthetic_glue
from engine import evaluate, get_linear_schedule_with_warmup, train_one_epoch
from models import build_model

logger = logging.getLogger(__name__)


def parse_args():
    d = TrainConfig()
    parser = argparse.ArgumentParser(description="Finetune a tiny encoder on a text classification task")
    parser.add_argument("--train_file", type=str, default=d.train_file, help="A csv file containing the training data.")
    parser.add_argument("--validation_file", type=str, default=d.validation_file,
                        help="A csv file containing the validation data.")
    parser.add_argument("--max_length", type=int, default=d.max_length)
    parser.add_argument("--pad_to_max_length", action="store_true")
    parser.add_argument("--per_device_train_batch_size", type=int, default=d.per_device_train_batch_size)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=d.per_device_eval_batch_size)
    parser.add_argument("--learning_rate", type=float, default=d.learning_rate)
    parser.add_argument("--weight_decay", type=float, default=d.weight_decay)
    parser.add_argument("--num_train_epochs", type=int, default=d.num_train_epochs)
    parser.add_argument("--max_train_steps", type=int, default=d.max_train_steps)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=d.gradient_accumulation_steps)
    parser.add_argument("--num_warmup_steps", type=int, default=d.num_warmup_steps)
    parser.add_argument("--max_grad_norm", type=float, default=d.max_grad_norm)
    parser.add_argument("--output_dir", type=str, default=d.output_dir)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--precision", type=str, default=d.precision, choices=list(DTYPES))
    args = parser.parse_args()
    for path in (args.train_file, args.validation_file):
        assert path.split(".")[-1] == "csv", "`train_file` and `validation_file` should be csv files."
    if args.output_dir is not None:
        os.makedirs(args.output_dir, exist_ok=True)
    return args


def main():
    args = parse_args()
    cfg = TrainConfig.from_args(args)
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                        datefmt="%m/%d/%Y %H:%M:%S", level=logging.INFO)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)

    if not (os.path.exists(cfg.train_file) and os.path.exists(cfg.validation_file)):
        write_synthetic_glue(os.path.dirname(cfg.train_file) or ".")
    raw_train, raw_eval = load_csv(cfg.train_file), load_csv(cfg.validation_file)
    label_list = sorted({ex["label"] for ex in raw_train})
    num_labels = len(label_list)

    tokenizer = WordTokenizer([ex["sentence"] for ex in raw_train])
    model = build_model(cfg, vocab_size=len(tokenizer), num_labels=num_labels,
                        pad_token_id=tokenizer.pad_token_id)

    padding = "max_length" if cfg.pad_to_max_length else False
    train_dataset = GlueDataset(raw_train, tokenizer, cfg.max_length, padding)
    eval_dataset = GlueDataset(raw_eval, tokenizer, cfg.max_length, padding)
    for index in random.sample(range(len(train_dataset)), 2):
        logger.info("Sample %d of the training set: %s.", index, train_dataset[index])
    data_collator = DataCollatorWithPadding(tokenizer.pad_token_id, pad_to_multiple_of=8 if cfg.use_fp16 else None)
    train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=data_collator,
                                  batch_size=cfg.per_device_train_batch_size)
    eval_dataloader = DataLoader(eval_dataset, collate_fn=data_collator, batch_size=cfg.per_device_eval_batch_size)

    # Optimizer: weight decay on everything but biases and LayerNorm weights
    no_decay = ["bias", "LayerNorm.weight", "norm1.weight", "norm2.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=cfg.learning_rate)

    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / cfg.gradient_accumulation_steps)
    if cfg.max_train_steps is None:
        cfg.max_train_steps = cfg.num_train_epochs * num_update_steps_per_epoch
    else:
        cfg.num_train_epochs = math.ceil(cfg.max_train_steps / num_update_steps_per_epoch)
    lr_scheduler = get_linear_schedule_with_warmup(optimizer, cfg.num_warmup_steps, cfg.max_train_steps)
    scaler = torch.amp.GradScaler("cpu", enabled=cfg.use_fp16)

    total_batch_size = cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps
    logger.info("***** Running training *****")
    logger.info("  Num examples = %d", len(train_dataset))
    logger.info("  Num Epochs = %d", cfg.num_train_epochs)
    logger.info("  Total train batch size (w. accumulation) = %d", total_batch_size)
    logger.info("  Total optimization steps = %d", cfg.max_train_steps)
    completed_steps = 0
    eval_metric = {"accuracy": 0.0}
    for epoch in range(cfg.num_train_epochs):
        completed_steps = train_one_epoch(model, train_dataloader, optimizer, lr_scheduler, scaler, cfg,
                                          epoch, completed_steps)
        eval_metric = evaluate(model, eval_dataloader, cfg)
        logger.info("epoch %d: %s", epoch, eval_metric)
        if completed_steps >= cfg.max_train_steps:
            break

    if cfg.output_dir is not None:
        torch.save({"model": model.state_dict(), "config": vars(cfg), "vocab": tokenizer.vocab},
                   os.path.join(cfg.output_dir, "pytorch_model.bin"))
    print(f"done: {epoch + 1} epochs, {completed_steps} steps, eval accuracy {eval_metric['accuracy']:.3f}")


if __name__ == "__main__":
    main()
