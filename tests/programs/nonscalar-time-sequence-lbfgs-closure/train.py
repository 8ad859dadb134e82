"""Train a two-LSTMCell model to continue sine waves, with LBFGS.

Modeled on pytorch/examples time_sequence_prediction/train.py and generate_sine_wave.py
(BSD-3-Clause licence): the sine-wave set written with torch.save and loaded back, the first three
waves held out for testing, the Sequence model in double precision, LBFGS stepping with a closure
that runs the forward, the loss and its backward, prints loss.item() and returns the loss, then a
no-grad prediction of `future` steps past the test waves with its printed test loss. Written from
scratch for tracefix's test bed, following that program's structure; the predictions are saved to
out/ as tensors instead of being plotted (no matplotlib), and the closure prints its loss after the
backward. Injected bug: the criterion is built as nn.MSELoss(reduction='none'), so the loss is one
value per sample and time step; the backward inside the closure (called from optimizer.step) is the
crash line, but the closure's loss.item(), the loss LBFGS reads back from the closure and the test
loss's .item() all use the same criterion, so the fix is the criterion's construction.
"""
from __future__ import print_function

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

from generate_sine_wave import generate
from model import Sequence

if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--steps', type=int, default=2, help='steps to run')
    parser.add_argument('--max-iter', type=int, default=8, help='LBFGS iterations per step')
    parser.add_argument('--future', type=int, default=40, help='steps to predict past the test waves')
    parser.add_argument('--data', default='data/traindata.pt')
    parser.add_argument('--out-dir', default='out')
    opt = parser.parse_args()
    # set random seed to 0
    np.random.seed(0)
    torch.manual_seed(0)
    if not os.path.exists(opt.data):
        generate(opt.data)
    os.makedirs(opt.out_dir, exist_ok=True)
    # load data and make training set
    data = torch.load(opt.data)
    input = data[3:, :-1]
    target = data[3:, 1:]
    test_input = data[:3, :-1]
    test_target = data[:3, 1:]
    # build the model
    seq = Sequence()
    seq.double()
    criterion = nn.MSELoss(reduction='none')
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=opt.max_iter)
    # begin to train
    for i in range(opt.steps):
        print('STEP: ', i)

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            loss.backward()
            print('loss:', loss.item())
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            future = opt.future
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            test_loss = loss.item()
            print('test loss:', test_loss)
            y = pred.detach()
        torch.save(y, os.path.join(opt.out_dir, 'predict%d.pt' % i))
    print('done: %d steps, test loss %.6f' % (opt.steps, test_loss))
