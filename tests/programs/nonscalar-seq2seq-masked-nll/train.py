"""French-to-English translation with a GRU encoder and an attention decoder on synthetic pairs.

Modeled on pytorch/tutorials, intermediate_source/seq2seq_translation_tutorial.py (BSD-3-Clause
licence): Lang, normalizeString, readLangs / filterPairs / prepareData on eng-fra.txt, EncoderRNN
and AttnDecoderRNN with Bahdanau attention, teacher forcing, the summed per-step loss,
print_loss_total and timeSince, evaluateRandomly. Batches are padded and the padding is masked
in the NLL loss with ignore_index, as in its batched forks; a validation pass, gradient clipping
and checkpoints are added. Written from scratch for tracefix's test bed, following that
program's structure. Injected bug: main() builds the criterion with reduction="none", so each
decoder step's loss is one value per sentence and their sum is a [batch] tensor; train_epoch()'s
backward and .item() and evaluate()'s .item() (both in trainer.py) all use that criterion, so the
fix is its construction.
"""
import argparse
import os
import random
import time

import torch
import torch.nn as nn
from torch import optim

from data import PAD_token, PairBatches, prepareData, write_synthetic_pairs
from model import AttnDecoderRNN, EncoderRNN
from trainer import evaluate, evaluateRandomly, timeSince, train_epoch


def main():
    parser = argparse.ArgumentParser(description="seq2seq translation with attention")
    parser.add_argument("--data", default="data/eng-fra.txt")
    parser.add_argument("--hidden-size", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.003)
    parser.add_argument("--teacher-forcing-ratio", type=float, default=0.5)
    parser.add_argument("--clip", type=float, default=5.0)
    parser.add_argument("--print-every", type=int, default=4)
    parser.add_argument("--val-fraction", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save-dir", default="checkpoints")
    args = parser.parse_args()
    random.seed(args.seed)
    torch.manual_seed(args.seed)

    if not os.path.exists(args.data):
        write_synthetic_pairs(args.data)
    input_lang, output_lang, pairs = prepareData(args.data, "eng", "fra", reverse=True)
    print(random.choice(pairs))
    random.shuffle(pairs)
    n_val = max(1, int(len(pairs) * args.val_fraction))
    val_pairs, train_pairs = pairs[:n_val], pairs[n_val:]
    train_loader = PairBatches(train_pairs, input_lang, output_lang, args.batch_size, seed=args.seed)
    val_loader = PairBatches(val_pairs, input_lang, output_lang, args.batch_size, shuffle=False)

    encoder = EncoderRNN(input_lang.n_words, args.hidden_size)
    decoder = AttnDecoderRNN(args.hidden_size, output_lang.n_words)
    encoder_optimizer = optim.Adam(encoder.parameters(), lr=args.lr)
    decoder_optimizer = optim.Adam(decoder.parameters(), lr=args.lr)
    criterion = nn.NLLLoss(ignore_index=PAD_token, reduction="none")

    os.makedirs(args.save_dir, exist_ok=True)
    start = time.time()
    best_val = float("inf")
    for epoch in range(1, args.epochs + 1):
        train_loss = train_epoch(train_loader, encoder, decoder, encoder_optimizer, decoder_optimizer,
                                 criterion, args.teacher_forcing_ratio, args.clip, args.print_every,
                                 start, (epoch, args.epochs))
        val_loss = evaluate(val_loader, encoder, decoder, criterion)
        print("%s epoch %d: train loss %.4f, val loss %.4f" % (timeSince(start, epoch / args.epochs),
                                                              epoch, train_loss, val_loss))
        if val_loss < best_val:
            best_val = val_loss
            torch.save({"epoch": epoch, "encoder": encoder.state_dict(), "decoder": decoder.state_dict(),
                        "encoder_optimizer": encoder_optimizer.state_dict(),
                        "decoder_optimizer": decoder_optimizer.state_dict(),
                        "input_lang": input_lang.__dict__, "output_lang": output_lang.__dict__},
                       os.path.join(args.save_dir, "best.tar"))

    evaluateRandomly(encoder, decoder, val_pairs, input_lang, output_lang)
    print("done: %d epochs, train loss %.4f, best val loss %.4f" % (args.epochs, train_loss, best_val))


if __name__ == "__main__":
    main()
