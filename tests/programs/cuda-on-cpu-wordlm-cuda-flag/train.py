"""Word-level LSTM language model on a synthetic text corpus.

Modeled on pytorch/examples, word_language_model/main.py (BSD-3-Clause licence): Corpus,
batchify / get_batch / repackage_hidden, truncated BPTT, gradient clipping with a hand-written SGD
update, evaluate() on valid and test, the lr annealed by 4 when the validation loss stops
improving, the best model saved. Written from scratch for tracefix's test bed, following that
program's structure. Injected bug: the --cuda switch of the original (store_true, off by
default) became an int flag that defaults to 1, so `device = torch.device("cuda" if args.cuda else
"cpu")` asks for CUDA on a machine whose torch has none; the crash is the first .to(device), on the
training data, and the fix is where "cuda" is chosen.
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn

from data import Corpus, write_synthetic_corpus
from model import RNNModel

parser = argparse.ArgumentParser(description="PyTorch RNN/LSTM Language Model")
parser.add_argument("--data", default="data/synthetic")
parser.add_argument("--model", default="LSTM")
parser.add_argument("--emsize", type=int, default=16)
parser.add_argument("--nhid", type=int, default=16)
parser.add_argument("--nlayers", type=int, default=2)
parser.add_argument("--lr", type=float, default=20)
parser.add_argument("--clip", type=float, default=0.25)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--bptt", type=int, default=12)
parser.add_argument("--dropout", type=float, default=0.2)
parser.add_argument("--tied", action="store_true")
parser.add_argument("--seed", type=int, default=1111)
parser.add_argument("--log-interval", type=int, default=4)
parser.add_argument("--save", default="model.pt")
parser.add_argument("--cuda", type=int, default=1, help="use CUDA (1) or the CPU (0)")
args = parser.parse_args()
torch.manual_seed(args.seed)
device = torch.device("cuda" if args.cuda else "cpu")

if not os.path.exists(os.path.join(args.data, "train.txt")):
    write_synthetic_corpus(args.data)
corpus = Corpus(args.data)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    return data.narrow(0, 0, nbatch * bsz).view(bsz, -1).t().contiguous().to(device)


eval_batch_size = 4
train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)

ntokens = len(corpus.dictionary)
model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout, args.tied).to(device)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


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


def train(epoch):
    model.train()
    total_loss, start_time = 0.0, time.time()
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            elapsed = time.time() - start_time
            print("| epoch {:3d} | {:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | loss {:5.2f} | ppl {:8.2f}"
                  .format(epoch, batch, lr, elapsed * 1000 / args.log_interval, cur_loss, math.exp(cur_loss)))
            total_loss, start_time = 0.0, time.time()


lr = args.lr
best_val_loss = None
for epoch in range(1, args.epochs + 1):
    epoch_start_time = time.time()
    train(epoch)
    val_loss = evaluate(val_data)
    print("| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | valid ppl {:8.2f}"
          .format(epoch, time.time() - epoch_start_time, val_loss, math.exp(val_loss)))
    if not best_val_loss or val_loss < best_val_loss:
        with open(args.save, "wb") as f:
            torch.save(model.state_dict(), f)
        best_val_loss = val_loss
    else:
        lr /= 4.0

model.load_state_dict(torch.load(args.save))
test_loss = evaluate(test_data)
print("| End of training | test loss {:5.2f} | test ppl {:8.2f}".format(test_loss, math.exp(test_loss)))
print("done: %d epochs" % args.epochs)
