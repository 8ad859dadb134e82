"""Fine-tune a tiny causal language model on a text file, with fp16 autocast and a GradScaler.

Modeled on huggingface/transformers examples/pytorch/language-modeling/run_clm_no_trainer.py
(Apache-2.0 licence): parse_args() with its options (train/validation files, model_name_or_path,
per-device batch sizes, learning rate, weight decay, epochs / max_train_steps, gradient
accumulation, lr_scheduler_type, warmup steps, output_dir, seed, block_size, checkpointing_steps,
resume_from_checkpoint) plus run_clm.py's --torch_dtype, resolved as transformers does
(`args.torch_dtype if args.torch_dtype in ["auto", None] else getattr(torch, args.torch_dtype)`);
the tokenize + group_texts block chunking, DataLoaders with default_data_collator, AdamW with
no-decay groups, get_scheduler("linear") with warmup, the training loop with gradient accumulation,
the eval loop computing perplexity, per-epoch checkpoints and save_pretrained at the end. Written
from scratch for tracefix's test bed in plain PyTorch (no transformers / accelerate / datasets):
modeling.py holds a tiny GPT-2-style model with save_pretrained / from_pretrained(torch_dtype=...),
data.py the text files, tokenizer and group_texts, optimization.py get_scheduler. Accelerate's
--mixed_precision fp16 becomes torch.autocast("cpu", dtype=torch.float16) with
torch.amp.GradScaler("cpu"). At start-up the program saves a freshly initialised model with
save_pretrained to data/tiny-gpt2 as the local checkpoint it fine-tunes, and writes the text files.
Injected bug: the --torch_dtype option defaults to "float16", so from_pretrained() casts the
checkpoint's weights to float16; their gradients are fp16 and the GradScaler refuses them at
scaler.step(optimizer) in the training loop ("Attempting to unscale FP16 gradients"). The fix is
the from_pretrained call: load the weights without torch_dtype (float32 master weights; autocast
does the fp16 maths), or equally the option's default (None, as in run_clm.py).
"""
import argparse
import json
import logging
import math
import os
import random

import torch
from torch.utils.data import DataLoader

from data import (LMDataset, WordTokenizer, default_data_collator, group_texts, load_text_dataset,
                  write_synthetic_corpus)
from modeling import TinyGPTConfig, TinyGPTLMHeadModel
from optimization import SCHEDULER_TYPES, get_scheduler

logger = logging.getLogger(__name__)


def parse_args():
    parser = argparse.ArgumentParser(description="Finetune a tiny causal language model on a text file")
    parser.add_argument("--train_file", type=str, default="data/train.txt", help="A txt file containing the training data.")
    parser.add_argument("--validation_file", type=str, default="data/validation.txt",
                        help="A txt file containing the validation data.")
    parser.add_argument("--model_name_or_path", type=str, default="data/tiny-gpt2",
                        help="Path to a pretrained model saved with save_pretrained().")
    parser.add_argument("--torch_dtype", type=str, default="float16", choices=["auto", "bfloat16", "float16", "float32"], help="Override the default `torch.dtype` and load the model under this dtype.")
    parser.add_argument("--per_device_train_batch_size", type=int, default=8)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=8)
    parser.add_argument("--learning_rate", type=float, default=5e-3)
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--num_train_epochs", type=int, default=2)
    parser.add_argument("--max_train_steps", type=int, default=None,
                        help="Total number of training steps to perform. If provided, overrides num_train_epochs.")
    parser.add_argument("--gradient_accumulation_steps", type=int, default=2)
    parser.add_argument("--lr_scheduler_type", type=str, default="linear", choices=SCHEDULER_TYPES)
    parser.add_argument("--num_warmup_steps", type=int, default=2)
    parser.add_argument("--output_dir", type=str, default="out", help="Where to store the final model.")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--block_size", type=int, default=16)
    parser.add_argument("--mixed_precision", type=str, default="fp16", choices=["no", "fp16"])
    parser.add_argument("--checkpointing_steps", type=str, default="epoch",
                        help="Save the training state every n steps, or 'epoch' for each epoch.")
    parser.add_argument("--resume_from_checkpoint", type=str, default=None)
    args = parser.parse_args()
    for path in (args.train_file, args.validation_file):
        assert path.split(".")[-1] in ["csv", "json", "txt"], "`train_file` should be a csv, json or txt file."
    if args.output_dir is not None:
        os.makedirs(args.output_dir, exist_ok=True)
    return args


def write_local_checkpoint(path, train_file):
    """Save a freshly initialised model and its tokenizer, as a local pretrained checkpoint."""
    with open(train_file) as f:
        tokenizer = WordTokenizer.train_from_texts(f.read().splitlines())
    model = TinyGPTLMHeadModel(TinyGPTConfig(vocab_size=len(tokenizer)))
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def save_state(output_dir, model, optimizer, lr_scheduler, scaler, completed_steps):
    model.save_pretrained(output_dir)
    torch.save({"optimizer": optimizer.state_dict(), "lr_scheduler": lr_scheduler.state_dict(),
                "scaler": scaler.state_dict(), "completed_steps": completed_steps},
               os.path.join(output_dir, "training_state.pt"))


def main():
    args = parse_args()
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                        datefmt="%m/%d/%Y %H:%M:%S", level=logging.INFO)
    if args.seed is not None:
        random.seed(args.seed)
        torch.manual_seed(args.seed)

    if not (os.path.exists(args.train_file) and os.path.exists(args.validation_file)):
        write_synthetic_corpus(os.path.dirname(args.train_file) or ".")
    if not os.path.exists(os.path.join(args.model_name_or_path, "config.json")):
        write_local_checkpoint(args.model_name_or_path, args.train_file)
    raw_datasets = load_text_dataset({"train": args.train_file, "validation": args.validation_file})

    # Load pretrained model and tokenizer
    config = TinyGPTConfig.from_pretrained(args.model_name_or_path)
    tokenizer = WordTokenizer.from_pretrained(args.model_name_or_path)
    torch_dtype = args.torch_dtype if args.torch_dtype in ["auto", None] else getattr(torch, args.torch_dtype)
    model = TinyGPTLMHeadModel.from_pretrained(args.model_name_or_path, config=config, torch_dtype=torch_dtype)
    embedding_size = model.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > embedding_size:
        model.resize_token_embeddings(len(tokenizer))

    # Preprocessing the datasets: tokenize, then concatenate and cut into blocks of block_size.
    tokenized_datasets = {split: tokenizer(ds["text"]) for split, ds in raw_datasets.items()}
    block_size = min(args.block_size, tokenizer.model_max_length, config.n_positions)
    lm_datasets = {split: group_texts(ds, block_size) for split, ds in tokenized_datasets.items()}
    train_dataset = LMDataset(lm_datasets["train"])
    eval_dataset = LMDataset(lm_datasets["validation"])
    for index in random.sample(range(len(train_dataset)), 2):
        logger.info(f"Sample {index} of the training set: {train_dataset[index]['input_ids']}.")

    train_dataloader = DataLoader(train_dataset, shuffle=True, collate_fn=default_data_collator,
                                  batch_size=args.per_device_train_batch_size)
    eval_dataloader = DataLoader(eval_dataset, collate_fn=default_data_collator,
                                 batch_size=args.per_device_eval_batch_size)

    # Optimizer: split weights in two groups, one with weight decay and the other not.
    no_decay = ["bias", "ln_1.weight", "ln_2.weight", "ln_f.weight"]
    optimizer_grouped_parameters = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(optimizer_grouped_parameters, lr=args.learning_rate)

    # Scheduler and math around the number of training steps.
    num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)
    if args.max_train_steps is None:
        args.max_train_steps = args.num_train_epochs * num_update_steps_per_epoch
    else:
        args.num_train_epochs = math.ceil(args.max_train_steps / num_update_steps_per_epoch)
    lr_scheduler = get_scheduler(name=args.lr_scheduler_type, optimizer=optimizer,
                                 num_warmup_steps=args.num_warmup_steps, num_training_steps=args.max_train_steps)
    use_fp16 = args.mixed_precision == "fp16"
    scaler = torch.amp.GradScaler("cpu", enabled=use_fp16)

    checkpointing_steps = args.checkpointing_steps
    if checkpointing_steps is not None and checkpointing_steps.isdigit():
        checkpointing_steps = int(checkpointing_steps)

    total_batch_size = args.per_device_train_batch_size * args.gradient_accumulation_steps
    logger.info("***** Running training *****")
    logger.info(f"  Num examples = {len(train_dataset)}")
    logger.info(f"  Num Epochs = {args.num_train_epochs}")
    logger.info(f"  Instantaneous batch size per device = {args.per_device_train_batch_size}")
    logger.info(f"  Total train batch size (w. accumulation) = {total_batch_size}")
    logger.info(f"  Gradient Accumulation steps = {args.gradient_accumulation_steps}")
    logger.info(f"  Total optimization steps = {args.max_train_steps}")
    completed_steps = 0
    starting_epoch = 0

    if args.resume_from_checkpoint:
        logger.info(f"Resumed from checkpoint: {args.resume_from_checkpoint}")
        state = torch.load(os.path.join(args.resume_from_checkpoint, "training_state.pt"), weights_only=False)
        model.load_state_dict(torch.load(os.path.join(args.resume_from_checkpoint, "pytorch_model.bin")))
        optimizer.load_state_dict(state["optimizer"])
        lr_scheduler.load_state_dict(state["lr_scheduler"])
        scaler.load_state_dict(state["scaler"])
        completed_steps = state["completed_steps"]
        starting_epoch = completed_steps // num_update_steps_per_epoch

    perplexity = float("inf")
    for epoch in range(starting_epoch, args.num_train_epochs):
        model.train()
        total_loss = 0.0
        for step, batch in enumerate(train_dataloader):
            with torch.autocast("cpu", dtype=torch.float16, enabled=use_fp16):
                outputs = model(**batch)
                loss = outputs.loss
            total_loss += loss.detach().float().item()
            loss = loss / args.gradient_accumulation_steps
            scaler.scale(loss).backward()
            if (step + 1) % args.gradient_accumulation_steps == 0 or step == len(train_dataloader) - 1:
                scaler.step(optimizer)
                scaler.update()
                lr_scheduler.step()
                optimizer.zero_grad()
                completed_steps += 1
                if isinstance(checkpointing_steps, int) and completed_steps % checkpointing_steps == 0:
                    save_state(os.path.join(args.output_dir, f"step_{completed_steps}"), model, optimizer,
                               lr_scheduler, scaler, completed_steps)
            if completed_steps >= args.max_train_steps:
                break

        model.eval()
        losses = []
        for step, batch in enumerate(eval_dataloader):
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.float16, enabled=use_fp16):
                outputs = model(**batch)
            loss = outputs.loss
            losses.append(loss.float().repeat(args.per_device_eval_batch_size))
        losses = torch.cat(losses)[: len(eval_dataset)]
        try:
            eval_loss = torch.mean(losses)
            perplexity = math.exp(eval_loss)
        except OverflowError:
            perplexity = float("inf")
        logger.info(f"epoch {epoch}: perplexity: {perplexity} eval_loss: {eval_loss:.4f} "
                    f"train_loss: {total_loss / len(train_dataloader):.4f} lr: {lr_scheduler.get_last_lr()[0]:.2e}")

        if args.checkpointing_steps == "epoch":
            save_state(os.path.join(args.output_dir, f"epoch_{epoch}"), model, optimizer, lr_scheduler, scaler,
                       completed_steps)

    if args.output_dir is not None:
        model.save_pretrained(args.output_dir)
        tokenizer.save_pretrained(args.output_dir)
        with open(os.path.join(args.output_dir, "all_results.json"), "w") as f:
            json.dump({"perplexity": perplexity}, f)
    print(f"done: {epoch + 1} epochs, {completed_steps} steps, perplexity {perplexity:.2f}")


if __name__ == "__main__":
    main()
