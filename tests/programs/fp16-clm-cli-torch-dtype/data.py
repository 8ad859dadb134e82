"""Text files, a word-level tokenizer, group_texts and the default data collator.

Stands in for datasets.load_dataset("text", ...), AutoTokenizer and default_data_collator in
run_clm_no_trainer.py; the synthetic corpus is written as the .txt files the script is pointed at.
"""
import json
import os
import random

import torch

SPECIAL_TOKENS = ["<pad>", "<unk>", "<|endoftext|>"]
_SUBJECTS = ["the cat", "a dog", "the model", "my friend", "the teacher", "a bird", "the robot"]
_VERBS = ["sees", "likes", "reads", "finds", "follows", "trains", "writes"]
_OBJECTS = ["the book", "a ball", "the data", "a tree", "the river", "a letter", "the road"]
_ENDINGS = ["today", "again", "at night", "slowly", "with care", "in the park"]


def write_synthetic_corpus(data_dir, n_train=240, n_valid=40, seed=0):
    """Write train.txt and validation.txt: one short sentence a line, from a small grammar."""
    rng = random.Random(seed)
    os.makedirs(data_dir, exist_ok=True)
    for name, n in (("train.txt", n_train), ("validation.txt", n_valid)):
        with open(os.path.join(data_dir, name), "w") as f:
            for _ in range(n):
                f.write(f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_ENDINGS)} .\n")


def load_text_dataset(data_files):
    """Like load_dataset("text", data_files=...): {split: {"text": [lines]}}."""
    out = {}
    for split, path in data_files.items():
        with open(path) as f:
            out[split] = {"text": [line.rstrip("\n") for line in f if line.strip()]}
    return out


class WordTokenizer:
    vocab_file = "vocab.json"

    def __init__(self, vocab, model_max_length=64):
        self.vocab = dict(vocab)
        self.model_max_length = model_max_length
        self.eos_token_id = self.vocab["<|endoftext|>"]
        self.unk_token_id = self.vocab["<unk>"]

    @classmethod
    def train_from_texts(cls, texts, model_max_length=64):
        words = sorted({w for t in texts for w in t.split()})
        return cls({w: i for i, w in enumerate(SPECIAL_TOKENS + words)}, model_max_length)

    def __len__(self):
        return len(self.vocab)

    def __call__(self, texts):
        ids = [[self.vocab.get(w, self.unk_token_id) for w in t.split()] + [self.eos_token_id] for t in texts]
        return {"input_ids": ids, "attention_mask": [[1] * len(i) for i in ids]}

    def save_pretrained(self, save_directory):
        os.makedirs(save_directory, exist_ok=True)
        with open(os.path.join(save_directory, self.vocab_file), "w") as f:
            json.dump({"vocab": self.vocab, "model_max_length": self.model_max_length}, f)

    @classmethod
    def from_pretrained(cls, path):
        with open(os.path.join(path, cls.vocab_file)) as f:
            d = json.load(f)
        return cls(d["vocab"], d["model_max_length"])


def group_texts(examples, block_size):
    """Concatenate all texts and cut them into chunks of block_size (the remainder is dropped)."""
    concatenated_examples = {k: sum(examples[k], []) for k in examples.keys()}
    total_length = len(concatenated_examples[list(examples.keys())[0]])
    if total_length >= block_size:
        total_length = (total_length // block_size) * block_size
    result = {
        k: [t[i: i + block_size] for i in range(0, total_length, block_size)]
        for k, t in concatenated_examples.items()
    }
    result["labels"] = result["input_ids"].copy()
    return result


class LMDataset(torch.utils.data.Dataset):
    def __init__(self, columns):
        self.columns = columns

    def __len__(self):
        return len(self.columns["input_ids"])

    def __getitem__(self, i):
        return {k: v[i] for k, v in self.columns.items()}


def default_data_collator(features):
    return {k: torch.tensor([f[k] for f in features], dtype=torch.long) for k in features[0]}
