"""Word-level LSTM language model on a tiny synthetic corpus.

Modeled on pytorch/examples, word_language_model/main.py with its model.py and data.py
(BSD-3-Clause licence): Corpus/Dictionary, batchify, get_batch, repackage_hidden, gradient
clipping by hand, evaluation on valid and test, annealing the learning rate by 4 when the
validation loss stops improving, saving the best model. Written from scratch for tracefix's test
bed, following that program's structure. Injected bug: model.py builds its Dropout with
inplace=True, and applies it to the LSTM's output.
"""
import argparse
import logging
import math
import os
import time

import torch
import torch.nn as nn

import data
import model

parser = argparse.ArgumentParser(description="PyTorch word-level RNN/LSTM language model")
parser.add_argument("--data", type=str, default="./corpus", help="location of the data corpus")
parser.add_argument("--model", type=str, default="LSTM", help="type of network (LSTM, GRU)")
parser.add_argument("--emsize", type=int, default=16, help="size of word embeddings")
parser.add_argument("--nhid", type=int, default=16, help="number of hidden units per layer")
parser.add_argument("--nlayers", type=int, default=2, help="number of layers")
parser.add_argument("--lr", type=float, default=5.0, help="initial learning rate")
parser.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
parser.add_argument("--epochs", type=int, default=2, help="upper epoch limit")
parser.add_argument("--batch_size", type=int, default=8, metavar="N", help="batch size")
parser.add_argument("--bptt", type=int, default=10, help="sequence length")
parser.add_argument("--dropout", type=float, default=0.2, help="dropout applied to layers")
parser.add_argument("--tied", action="store_true", help="tie the word embedding and softmax weights")
parser.add_argument("--seed", type=int, default=1111, help="random seed")
parser.add_argument("--log-interval", type=int, default=10, metavar="N", help="report interval")
parser.add_argument("--save", type=str, default="checkpoints/model.pt", help="path to save the final model")
args = parser.parse_args()

logging.basicConfig(level=logging.INFO, format="| %(message)s")
log = logging.getLogger("wlm")
torch.manual_seed(args.seed)

if not os.path.exists(os.path.join(args.data, "train.txt")):
    data.write_synthetic_corpus(args.data)
corpus = data.Corpus(args.data)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


eval_batch_size = 4
train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)

ntokens = len(corpus.dictionary)
model = model.RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def evaluate(data_source):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train():
    model.train()
    total_loss = 0.0
    start_time = time.time()
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(hidden)
        model.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()

        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(p.grad, alpha=-lr)

        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            elapsed = time.time() - start_time
            log.info("epoch %3d | %5d/%5d batches | lr %02.2f | ms/batch %5.2f | loss %5.2f | ppl %8.2f",
                     epoch, batch, len(train_data) // args.bptt, lr,
                     elapsed * 1000 / args.log_interval, cur_loss, math.exp(cur_loss))
            total_loss = 0.0
            start_time = time.time()


lr = args.lr
best_val_loss = None
os.makedirs(os.path.dirname(args.save) or ".", exist_ok=True)
for epoch in range(1, args.epochs + 1):
    epoch_start_time = time.time()
    train()
    val_loss = evaluate(val_data)
    log.info("end of epoch %3d | time: %5.2fs | valid loss %5.2f | valid ppl %8.2f",
             epoch, time.time() - epoch_start_time, val_loss, math.exp(val_loss))
    if not best_val_loss or val_loss < best_val_loss:
        with open(args.save, "wb") as f:
            torch.save(model.state_dict(), f)
        best_val_loss = val_loss
    else:
        lr /= 4.0

model.load_state_dict(torch.load(args.save))
test_loss = evaluate(test_data)
print("done: test loss %5.2f | test ppl %8.2f" % (test_loss, math.exp(test_loss)))
