"""Word-level corpus: train.txt / valid.txt / test.txt, one sentence a line, <eos> appended."""
import os
import random

import torch


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

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
        assert os.path.exists(path), path
        with open(path, encoding="utf8") as f:
            for line in f:
                for word in line.split() + ["<eos>"]:
                    self.dictionary.add_word(word)
        idss = []
        with open(path, encoding="utf8") as f:
            for line in f:
                ids = [self.dictionary.word2idx[w] for w in line.split() + ["<eos>"]]
                idss.append(torch.tensor(ids, dtype=torch.int64))
        return torch.cat(idss)


def write_synthetic_corpus(path, seed=0):
    """A toy grammar, so the model has something to learn."""
    rng = random.Random(seed)
    subjects = ["the cat", "a dog", "the bird", "my friend", "the teacher"]
    verbs = ["sees", "likes", "follows", "finds", "hears"]
    objects = ["the ball", "a tree", "the river", "some bread", "the house"]
    os.makedirs(path, exist_ok=True)
    for name, n in (("train.txt", 200), ("valid.txt", 40), ("test.txt", 40)):
        with open(os.path.join(path, name), "w", encoding="utf8") as f:
            for _ in range(n):
                f.write("%s %s %s .\n" % (rng.choice(subjects), rng.choice(verbs), rng.choice(objects)))
