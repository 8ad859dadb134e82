"""word_language_model's data: a Dictionary and a Corpus of train.txt / valid.txt / test.txt."""
import os
import random

import torch


class Dictionary:
    def __init__(self):
        self.word2idx, self.idx2word = {}, []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, "train.txt"))
        self.valid = self.tokenize(os.path.join(path, "valid.txt"))
        self.test = self.tokenize(os.path.join(path, "test.txt"))

    def tokenize(self, path):
        ids = []
        with open(path, encoding="utf8") as f:
            for line in f:
                for word in line.split() + ["<eos>"]:
                    ids.append(self.dictionary.add_word(word))
        return torch.tensor(ids, dtype=torch.int64)


def write_synthetic_corpus(path, seed=0):
    words = "the cat dog sat on a mat ran to red big small house tree".split()
    rng = random.Random(seed)
    os.makedirs(path, exist_ok=True)
    for name, n in (("train.txt", 120), ("valid.txt", 24), ("test.txt", 24)):
        with open(os.path.join(path, name), "w", encoding="utf8") as f:
            for _ in range(n):
                f.write(" ".join(rng.choice(words) for _ in range(rng.randint(4, 9))) + "\n")
