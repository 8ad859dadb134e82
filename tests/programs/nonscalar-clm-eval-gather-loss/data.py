"""Text files in, fixed-size blocks of token ids out: the datasets/tokenizer side of run_clm.

write_text_files() makes a small synthetic corpus (train.txt, validation.txt, one text per line);
load_text_dataset() reads them as {"train": {"text": [...]}, "validation": {...}}; CharTokenizer
stands in for AutoTokenizer; group_texts() concatenates and chunks as the original does, and
default_data_collator() stacks a batch of feature dicts into tensors.
"""
import json
import os
import random

import torch

SUBJECTS = ["the model", "a small cat", "my neighbour", "the old engine", "every student", "the river"]
VERBS = ["reads", "follows", "carries", "watches", "builds", "finds"]
OBJECTS = ["a long letter", "the red kite", "some fresh bread", "the quiet road", "a paper boat"]
ENDINGS = ["in the morning.", "after the rain.", "with great care.", "before dinner.", "at the station."]


def write_text_files(data_dir, n_train=64, n_validation=16, seed=0):
    rng = random.Random(seed)
    os.makedirs(data_dir, exist_ok=True)
    for name, n in (("train.txt", n_train), ("validation.txt", n_validation)):
        with open(os.path.join(data_dir, name), "w") as f:
            for _ in range(n):
                f.write(" ".join([rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS),
                                  rng.choice(ENDINGS)]) + "\n")


def load_text_dataset(data_files):
    raw = {}
    for split, path in data_files.items():
        with open(path) as f:
            raw[split] = {"text": [line.rstrip("\n") for line in f if line.strip()]}
    return raw


class CharTokenizer:
    """A character-level tokenizer; id 0 is the end-of-text token appended to every text."""

    eos_token = "<|endoftext|>"

    def __init__(self, vocab, model_max_length=64):
        self.vocab = vocab
        self.model_max_length = model_max_length

    @classmethod
    def train_from_texts(cls, texts, model_max_length=64):
        chars = sorted(set("".join(texts)))
        return cls({cls.eos_token: 0, **{c: i + 1 for i, c in enumerate(chars)}}, model_max_length)

    def __len__(self):
        return len(self.vocab)

    def __call__(self, texts):
        ids = [[self.vocab[c] for c in text if c in self.vocab] + [0] for text in texts]
        return {"input_ids": ids, "attention_mask": [[1] * len(x) for x in ids]}

    def save_pretrained(self, save_directory):
        os.makedirs(save_directory, exist_ok=True)
        with open(os.path.join(save_directory, "vocab.json"), "w") as f:
            json.dump(self.vocab, f)


def group_texts(examples, block_size):
    # Concatenate all texts.
    concatenated_examples = {k: sum(examples[k], []) for k in examples.keys()}
    total_length = len(concatenated_examples[list(examples.keys())[0]])
    # We drop the small remainder.
    if total_length >= block_size:
        total_length = (total_length // block_size) * block_size
    # Split by chunks of block_size.
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
