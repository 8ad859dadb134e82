"""GLUE-style csv files (sentence, label), a whitespace word tokenizer and a padding collator.

write_synthetic_glue() writes an sst2-like task (does the sentence lean positive or negative?) to
train.csv / validation.csv so nothing is downloaded; load_csv() reads them back with the csv module.
"""
import csv
import os
import random

import torch

POS = ["good", "great", "fine", "lovely", "superb", "fun"]
NEG = ["bad", "awful", "dull", "poor", "boring", "weak"]
FILLER = ["the", "film", "was", "a", "plot", "and", "very", "quite", "acting", "story", "it"]


def write_synthetic_glue(data_dir, n_train=96, n_val=32, seed=0):
    rng = random.Random(seed)
    os.makedirs(data_dir, exist_ok=True)
    for name, n in (("train.csv", n_train), ("validation.csv", n_val)):
        with open(os.path.join(data_dir, name), "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["sentence", "label"])
            for _ in range(n):
                label = rng.randint(0, 1)
                words = [rng.choice(FILLER) for _ in range(rng.randint(4, 12))]
                for _ in range(rng.randint(1, 3)):
                    words.insert(rng.randint(0, len(words)), rng.choice(POS if label else NEG))
                w.writerow([" ".join(words), label])


def load_csv(path):
    with open(path, newline="") as f:
        return [{"sentence": row["sentence"], "label": int(row["label"])} for row in csv.DictReader(f)]


class WordTokenizer:
    pad_token, unk_token, cls_token, sep_token = "[PAD]", "[UNK]", "[CLS]", "[SEP]"

    def __init__(self, texts):
        vocab = [self.pad_token, self.unk_token, self.cls_token, self.sep_token]
        vocab += sorted({w for t in texts for w in t.split()})
        self.vocab = {w: i for i, w in enumerate(vocab)}
        self.pad_token_id = self.vocab[self.pad_token]

    def __len__(self):
        return len(self.vocab)

    def __call__(self, text, max_length, padding=False):
        ids = [self.vocab[self.cls_token]]
        ids += [self.vocab.get(w, self.vocab[self.unk_token]) for w in text.split()][:max_length - 2]
        ids.append(self.vocab[self.sep_token])
        if padding == "max_length":
            ids += [self.pad_token_id] * (max_length - len(ids))
        return {"input_ids": ids, "attention_mask": [1 if i != self.pad_token_id else 0 for i in ids]}


class GlueDataset(torch.utils.data.Dataset):
    def __init__(self, examples, tokenizer, max_length, padding=False):
        self.features = []
        for ex in examples:
            enc = tokenizer(ex["sentence"], max_length=max_length, padding=padding)
            enc["labels"] = ex["label"]
            self.features.append(enc)

    def __len__(self):
        return len(self.features)

    def __getitem__(self, i):
        return self.features[i]


class DataCollatorWithPadding:
    """Pads input_ids / attention_mask to the longest in the batch (rounded up to pad_to_multiple_of)."""

    def __init__(self, pad_token_id, pad_to_multiple_of=None):
        self.pad_token_id = pad_token_id
        self.pad_to_multiple_of = pad_to_multiple_of

    def __call__(self, features):
        length = max(len(f["input_ids"]) for f in features)
        if self.pad_to_multiple_of:
            length = -(-length // self.pad_to_multiple_of) * self.pad_to_multiple_of
        ids = torch.full((len(features), length), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(features), length), dtype=torch.long)
        for i, f in enumerate(features):
            ids[i, :len(f["input_ids"])] = torch.tensor(f["input_ids"])
            mask[i, :len(f["attention_mask"])] = torch.tensor(f["attention_mask"])
        labels = torch.tensor([f["labels"] for f in features], dtype=torch.long)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}
