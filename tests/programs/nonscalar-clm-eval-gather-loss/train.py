"""Train a tiny causal language model from scratch on a synthetic text file, without a Trainer.

Modeled on huggingface/transformers examples/pytorch/language-modeling/run_clm_no_trainer.py
(Apache-2.0 licence): parse_args() with train/validation files, block_size and gradient
accumulation, tokenize then group_texts into block_size chunks with labels = input_ids, weight
decay groups without bias/layer-norm weights, AdamW and a linear get_scheduler, the update-step
math, a train loop dividing outputs.loss by gradient_accumulation_steps before backward and keeping
total_loss with loss.detach().float(), checkpoints per epoch, an eval loop gathering
loss.repeat(per_device_eval_batch_size) for the perplexity, save_pretrained and all_results.json.
Written from scratch for tracefix's test bed in plain PyTorch (no transformers, accelerate or
datasets), following that program's structure. Injected bug: the model's loss in modeling.py uses
CrossEntropyLoss(reduction="none"), one loss per token; the training backward is the crash line,
but total_loss (read with .item() for the logged train loss) and the eval loop's loss.repeat(...)
(which would silently mix per-token losses into a per-example list and truncate it) also take
outputs.loss, so the fix is the model's loss computation.
"""
import argparse
import json
import logging
import math
import os
import random

import numpy as np
import torch
from torch.utils.data.dataloader import DataLoader

from data import CharTokenizer, LMDataset, default_data_collator, group_texts, load_text_dataset, write_text_files
from modeling import TinyGPTConfig, TinyGPTForCausalLM
from optimization import SCHEDULER_TYPES, get_scheduler

logger = logging.getLogger(__name__)


def parse_args():
    parser = argparse.ArgumentParser(description="Train a causal language model on a text file")
    parser.add_argument("--train_file", type=str, default="data/train.txt", help="A txt file with the training data.")
    parser.add_argument("--validation_file", type=str, default="data/validation.txt",
                        help="A txt file with the validation data.")
    parser.add_argument("--per_device_train_batch_size", type=int, default=8,
                        help="Batch size (per device) for the training dataloader.")
    parser.add_argument("--per_device_eval_batch_size", type=int, default=8,
                        help="Batch size (per device) for the evaluation dataloader.")
    parser.add_argument("--learning_rate", type=float, default=3e-3, help="Initial learning rate.")
    parser.add_argument("--weight_decay", type=float, default=0.01, help="Weight decay to use.")
    parser.add_argument("--num_train_epochs", type=int, default=2, help="Total number of training epochs.")
    parser.add_argument("--max_train_steps", type=int, default=None,
                        help="Total number of training steps. If provided, overrides num_train_epochs.")
    parser.add_argument("--gradient_accumulation_steps", type=int, default=2,
                        help="Number of updates steps to accumulate before performing a backward/update pass.")
    parser.add_argument("--lr_scheduler_type", type=str, default="linear", choices=SCHEDULER_TYPES,
                        help="The scheduler type to use.")
    parser.add_argument("--num_warmup_steps", type=int, default=1, help="Warmup steps for the lr scheduler.")
    parser.add_argument("--output_dir", type=str, default="out", help="Where to store the final model.")
    parser.add_argument("--seed", type=int, default=42, help="A seed for reproducible training.")
    parser.add_argument("--block_size", type=int, default=32,
                        help="Input sequence length after tokenization; the texts are grouped in blocks of it.")
    parser.add_argument("--max_grad_norm", type=float, default=1.0, help="Gradient clipping norm (0: none).")
    parser.add_argument("--checkpointing_steps", type=str, default="epoch",
                        help="Save the training state every n steps, or 'epoch' for each epoch.")
    args = parser.parse_args()

    for path in (args.train_file, args.validation_file):
        extension = path.split(".")[-1]
        assert extension == "txt", "`train_file` and `validation_file` should be txt files."
    if args.output_dir is not None:
        os.makedirs(args.output_dir, exist_ok=True)
    return args


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def main():
    args = parse_args()
    logging.basicConfig(
        format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
        datefmt="%m/%d/%Y %H:%M:%S",
        level=logging.INFO,
    )
    if args.seed is not None:
        set_seed(args.seed)

    if not os.path.exists(args.train_file):
        write_text_files(os.path.dirname(args.train_file) or ".")
    raw_datasets = load_text_dataset({"train": args.train_file, "validation": args.validation_file})

    tokenizer = CharTokenizer.train_from_texts(raw_datasets["train"]["text"] + raw_datasets["validation"]["text"])
    config = TinyGPTConfig(vocab_size=len(tokenizer), n_positions=tokenizer.model_max_length)
    logger.info("Training new model from scratch")
    model = TinyGPTForCausalLM.from_config(config)

    if args.block_size > tokenizer.model_max_length:
        logger.warning(f"The block_size passed ({args.block_size}) is larger than the maximum length for the model "
                       f"({tokenizer.model_max_length}). Using block_size={tokenizer.model_max_length}.")
    block_size = min(args.block_size, tokenizer.model_max_length)

    lm_datasets = {}
    for split, columns in raw_datasets.items():
        tokenized = tokenizer(columns["text"])
        lm_datasets[split] = LMDataset(group_texts(tokenized, block_size))
    train_dataset = lm_datasets["train"]
    eval_dataset = lm_datasets["validation"]

    # Log a few random samples from the training set:
    for index in random.sample(range(len(train_dataset)), 2):
        logger.info(f"Sample {index} of the training set: {train_dataset[index]['input_ids'][:12]}...")

    train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=default_data_collator,
                                  batch_size=args.per_device_train_batch_size)
    eval_dataloader = DataLoader(eval_dataset, collate_fn=default_data_collator,
                                 batch_size=args.per_device_eval_batch_size)

    # Optimizer
    # Split weights in two groups, one with weight decay and the other not.
    no_decay = ["bias", "layer_norm.weight"]
    optimizer_grouped_parameters = [
        {
            "params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
            "weight_decay": args.weight_decay,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=args.learning_rate)

    # Scheduler and math around the number of training steps.
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    if args.max_train_steps is None:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
    else:
        args.num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)

    lr_scheduler = get_scheduler(
        name=args.lr_scheduler_type,
        optimizer=optimizer,
        num_warmup_steps=args.num_warmup_steps,
        num_training_steps=args.max_train_steps,
    )
    checkpointing_steps = args.checkpointing_steps
    if checkpointing_steps is not None and checkpointing_steps.isdigit():
        checkpointing_steps = int(checkpointing_steps)

    # Train!
    total_batch_size = args.per_device_train_batch_size * args.gradient_accumulation_steps
    logger.info("***** Running training *****")
    logger.info(f"  Num examples = {len(train_dataset)}")
    logger.info(f"  Num Epochs = {args.num_train_epochs}")
    logger.info(f"  Instantaneous batch size per device = {args.per_device_train_batch_size}")
    logger.info(f"  Total train batch size (w. accumulation) = {total_batch_size}")
    logger.info(f"  Gradient Accumulation steps = {args.gradient_accumulation_steps}")
    logger.info(f"  Total optimization steps = {args.max_train_steps}")
    completed_steps = 0
    perplexity = float("inf")

    for epoch in range(args.num_train_epochs):
        model.train()
        total_loss = 0
        for step, batch in enumerate(train_dataloader):
            outputs = model(**batch)
            loss = outputs.loss
            # We keep track of the loss at each epoch
            total_loss += loss.detach().float()
            loss = loss / args.gradient_accumulation_steps
            loss.backward()
            if (step + 1) % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                if args.max_grad_norm:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
                completed_steps += 1

                if isinstance(checkpointing_steps, int) and completed_steps % checkpointing_steps == 0:
                    save_state(os.path.join(args.output_dir, f"step_{completed_steps}"), model, optimizer,
                               lr_scheduler)

            if completed_steps >= args.max_train_steps:
                break

        model.eval()
        losses = []
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad():
                outputs = model(**batch)

            loss = outputs.loss
            losses.append(loss.repeat(args.per_device_eval_batch_size))

        losses = torch.cat(losses)
        losses = losses[: len(eval_dataset)]
        try:
            eval_loss = torch.mean(losses)
            perplexity = math.exp(eval_loss)
        except OverflowError:
            perplexity = float("inf")

        train_loss = total_loss.item() / len(train_dataloader)
        logger.info(f"epoch {epoch}: perplexity: {perplexity} eval_loss: {eval_loss} train_loss: {train_loss}")

        if checkpointing_steps == "epoch":
            save_state(os.path.join(args.output_dir, f"epoch_{epoch}"), model, optimizer, lr_scheduler)

    if args.output_dir is not None:
        model.save_pretrained(args.output_dir)
        tokenizer.save_pretrained(args.output_dir)
        with open(os.path.join(args.output_dir, "all_results.json"), "w") as f:
            json.dump({"perplexity": perplexity, "train_loss": train_loss}, f)
    print(f"done: {args.num_train_epochs} epochs, {completed_steps} steps, perplexity {perplexity:.2f}")


def save_state(output_dir, model, optimizer, lr_scheduler):
    os.makedirs(output_dir, exist_ok=True)
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "lr_scheduler": lr_scheduler.state_dict()}, os.path.join(output_dir, "state.pt"))


if __name__ == "__main__":
    main()
