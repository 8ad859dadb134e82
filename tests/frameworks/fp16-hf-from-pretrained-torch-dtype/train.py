"""Fine-tunes a small causal LM, loaded from a local checkpoint in half precision to save memory,
with loss scaling for the fp16 maths (CPU, offline: the checkpoint is a tiny GPT-2 made here)."""
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

CKPT = Path("tiny-gpt2")


def make_checkpoint():
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=2)
    GPT2LMHeadModel(cfg).save_pretrained(CKPT)


def main():
    if not CKPT.exists():
        make_checkpoint()
    model = AutoModelForCausalLM.from_pretrained(CKPT, torch_dtype=torch.float16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")
    g = torch.Generator().manual_seed(0)
    for step in range(4):
        ids = torch.randint(0, 64, (4, 16), generator=g)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = model(input_ids=ids, labels=ids).loss
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        print(f"step {step} loss {loss.item():.4f}")
    print("done")


if __name__ == "__main__":
    main()
