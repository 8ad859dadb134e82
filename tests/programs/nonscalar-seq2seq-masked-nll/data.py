"""The translation tutorial's data pipeline: Lang vocabularies, normalizeString, readLangs,
filterPairs and prepareData over a tab-separated eng-fra.txt (the Tatoeba / manythings.org
layout: English, French, attribution), plus padded batches and a small synthetic eng-fra.txt.
"""
import os
import random
import re
import unicodedata

import torch

SOS_token = 0
EOS_token = 1
PAD_token = 2
MAX_LENGTH = 10

eng_prefixes = (
    "i am ", "i m ",
    "he is", "he s ",
    "she is", "she s ",
    "you are", "you re ",
    "we are", "we re ",
    "they are", "they re ",
)


class Lang:
    def __init__(self, name):
        self.name = name
        self.word2index = {}
        self.word2count = {}
        self.index2word = {SOS_token: "SOS", EOS_token: "EOS", PAD_token: "PAD"}
        self.n_words = 3  # Count SOS, EOS and PAD

    def addSentence(self, sentence):
        for word in sentence.split(" "):
            self.addWord(word)

    def addWord(self, word):
        if word not in self.word2index:
            self.word2index[word] = self.n_words
            self.word2count[word] = 1
            self.index2word[self.n_words] = word
            self.n_words += 1
        else:
            self.word2count[word] += 1


def unicodeToAscii(s):
    return "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")


def normalizeString(s):
    s = unicodeToAscii(s.lower().strip())
    s = re.sub(r"([.!?])", r" \1", s)
    s = re.sub(r"[^a-zA-Z!?]+", r" ", s)
    return s.strip()


def readLangs(path, lang1, lang2, reverse=False):
    print("Reading lines...")
    with open(path, encoding="utf-8") as f:
        lines = f.read().strip().split("\n")
    pairs = [[normalizeString(s) for s in l.split("\t")[:2]] for l in lines]
    if reverse:
        pairs = [list(reversed(p)) for p in pairs]
        input_lang, output_lang = Lang(lang2), Lang(lang1)
    else:
        input_lang, output_lang = Lang(lang1), Lang(lang2)
    return input_lang, output_lang, pairs


def filterPair(p, reverse):
    eng = p[1] if reverse else p[0]
    return (len(p[0].split(" ")) < MAX_LENGTH and len(p[1].split(" ")) < MAX_LENGTH
            and eng.startswith(eng_prefixes))


def prepareData(path, lang1, lang2, reverse=False):
    input_lang, output_lang, pairs = readLangs(path, lang1, lang2, reverse)
    print("Read %s sentence pairs" % len(pairs))
    pairs = [p for p in pairs if filterPair(p, reverse)]
    print("Trimmed to %s sentence pairs" % len(pairs))
    print("Counting words...")
    for pair in pairs:
        input_lang.addSentence(pair[0])
        output_lang.addSentence(pair[1])
    print("Counted words:")
    print(input_lang.name, input_lang.n_words)
    print(output_lang.name, output_lang.n_words)
    return input_lang, output_lang, pairs


def indexesFromSentence(lang, sentence):
    return [lang.word2index[word] for word in sentence.split(" ")]


def tensorFromSentence(lang, sentence):
    return torch.tensor(indexesFromSentence(lang, sentence) + [EOS_token], dtype=torch.long).view(1, -1)


class PairBatches:
    """Shuffled batches of (input, target), each padded with PAD_token to its longest sentence."""

    def __init__(self, pairs, input_lang, output_lang, batch_size, shuffle=True, seed=0):
        self.pairs = [(indexesFromSentence(input_lang, p[0]) + [EOS_token],
                       indexesFromSentence(output_lang, p[1]) + [EOS_token]) for p in pairs]
        self.batch_size, self.shuffle = batch_size, shuffle
        self.rng = random.Random(seed)

    def __len__(self):
        return (len(self.pairs) + self.batch_size - 1) // self.batch_size

    def __iter__(self):
        order = list(range(len(self.pairs)))
        if self.shuffle:
            self.rng.shuffle(order)
        for start in range(0, len(order), self.batch_size):
            batch = [self.pairs[i] for i in order[start:start + self.batch_size]]
            yield pad([b[0] for b in batch]), pad([b[1] for b in batch])


def pad(seqs):
    out = torch.full((len(seqs), max(len(s) for s in seqs)), PAD_token, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, :len(s)] = torch.tensor(s)
    return out


SUBJECTS = [("I am", "I'm", "Je", "suis"), ("He is", "He's", "Il", "est"), ("She is", "She's", "Elle", "est"),
            ("You are", "You're", "Tu", "es"), ("We are", "We're", "Nous", "sommes"),
            ("They are", "They're", "Ils", "sont")]
ADJECTIVES = [("cold", "froid"), ("tired", "fatigué"), ("happy", "heureux"), ("hungry", "affamé"),
              ("late", "en retard"), ("ready", "prêt"), ("sick", "malade"), ("busy", "occupé"),
              ("young", "jeune"), ("rich", "riche"), ("calm", "calme"), ("strong", "fort")]
OTHERS = [("Go.", "Va !"), ("Run!", "Cours !"), ("Who?", "Qui ?"), ("Wow!", "Ça alors !"),
          ("Help me.", "Aide-moi."), ("Come in.", "Entre.")]


def write_synthetic_pairs(path, seed=0):
    """Tatoeba-style lines: English, French, attribution, tab separated."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    rng = random.Random(seed)
    lines = [f"{e}\t{f}\tCC-BY 2.0 (France) Attribution: tatoeba.org #0 (synthetic)" for e, f in OTHERS]
    for eng, short, pron, verb in SUBJECTS:
        for adj, fr_adj in ADJECTIVES:
            e = rng.choice((eng, short))
            lines.append(f"{e} {adj}.\t{pron} {verb} {fr_adj}.\tCC-BY 2.0 (France)")
            lines.append(f"{e} very {adj}.\t{pron} {verb} très {fr_adj}.\tCC-BY 2.0 (France)")
            neg = "n'" + verb if verb[0] in "ae" else "ne " + verb
            lines.append(f"{e} not {adj}.\t{pron} {neg} pas {fr_adj}.\tCC-BY 2.0 (France)")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
