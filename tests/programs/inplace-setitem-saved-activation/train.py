"""Graph Attention Network node classification on a synthetic Cora citation graph.

Modeled on pytorch/examples, gat/main.py (BSD-3-Clause licence): the GraphAttentionLayer with its
vectorised attention scores, the -9e16 connectivity mask, softmax and dropout on the attention
coefficients, the two-layer GAT with ELU and log-softmax, load_cora() from cora.content /
cora.cites, the random test/val/train split, Adam with L2 weight decay, NLLLoss on the training
mask, train_iter() / test() and the argparse options (--epochs, --lr, --l2, --dropout-p,
--hidden-dim, --num-heads, --concat-heads, --val-every, --dry-run, --seed). Written from scratch for
tracefix's test bed, following that program's structure, split into model.py and data.py; this bed
adds logging, a StepLR schedule, gradient-norm clipping and a best-validation checkpoint. The data
is written at start-up in Cora's own tab-separated format under data/cora.
Injected bug: GraphAttentionLayer.forward (model.py) zeroes the non-edge attention weights with an
index assignment, `attention[:, adj_mat == 0] = 0.0`, on the softmax output, which softmax's
backward saved; loss.backward() in train_iter() then fails. The fix is that line in model.py:
`attention = attention.masked_fill(adj_mat == 0, 0.0)` (out of place; or drop it, since the
-9e16 mask already gives non-edges zero weight).
"""
import argparse
import logging
import os
import time

import torch
from torch import nn
from torch.optim import Adam
from torch.optim.lr_scheduler import StepLR

from data import load_cora, write_synthetic_cora
from model import GAT

log = logging.getLogger("gat")


def train_iter(epoch, model, optimizer, criterion, input, target, mask_train, mask_val, args):
    start_t = time.time()
    model.train()
    optimizer.zero_grad()
    output = model(*input)
    loss = criterion(output[mask_train], target[mask_train])
    loss.backward()
    grad_norm = nn.utils.clip_grad_norm_(model.parameters(), args.clip)
    optimizer.step()

    loss_train, acc_train = test(model, criterion, input, target, mask_train)
    loss_val, acc_val = test(model, criterion, input, target, mask_val)
    if epoch % args.val_every == 0:
        log.info(f"Epoch: {epoch:04d} ({(time.time() - start_t):.4f}s) loss_train: {loss_train:.4f} "
                 f"acc_train: {acc_train:.4f} loss_val: {loss_val:.4f} acc_val: {acc_val:.4f} "
                 f"grad_norm: {grad_norm:.3f} lr: {optimizer.param_groups[0]['lr']:.2e}")
    return loss_val, acc_val


def test(model, criterion, input, target, mask):
    model.eval()
    with torch.no_grad():
        output = model(*input)
        output, target = output[mask], target[mask]
        loss = criterion(output, target)
        acc = (output.argmax(dim=1) == target).float().sum() / len(target)
    return loss.item(), acc.item()


def main():
    parser = argparse.ArgumentParser(description="PyTorch Graph Attention Network")
    parser.add_argument("--epochs", type=int, default=40, help="number of epochs to train (default: 40)")
    parser.add_argument("--lr", type=float, default=0.01, help="learning rate (default: 0.01)")
    parser.add_argument("--l2", type=float, default=5e-4, help="weight decay (default: 5e-4)")
    parser.add_argument("--dropout-p", type=float, default=0.4, help="dropout probability (default: 0.4)")
    parser.add_argument("--hidden-dim", type=int, default=16, help="dimension of the hidden representation")
    parser.add_argument("--num-heads", type=int, default=4, help="number of the attention heads (default: 4)")
    parser.add_argument("--concat-heads", action="store_true",
                        help="concatenate the attention heads instead of averaging them")
    parser.add_argument("--val-every", type=int, default=5, help="epochs between training/validation log lines")
    parser.add_argument("--step-size", type=int, default=20, help="StepLR period in epochs (default: 20)")
    parser.add_argument("--gamma", type=float, default=0.5, help="StepLR decay factor (default: 0.5)")
    parser.add_argument("--clip", type=float, default=1.0, help="gradient norm clipping (default: 1.0)")
    parser.add_argument("--data", default="data/cora", help="folder with cora.content and cora.cites")
    parser.add_argument("--checkpoint-dir", default="checkpoints")
    parser.add_argument("--dry-run", action="store_true", help="quickly check a single pass")
    parser.add_argument("--seed", type=int, default=13, metavar="S", help="random seed (default: 13)")
    args = parser.parse_args()

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    torch.manual_seed(args.seed)
    device = torch.device("cpu")
    log.info(f"Using {device} device")

    if os.path.isfile(os.path.join(args.data, "cora.content")) and os.path.isfile(os.path.join(args.data, "cora.cites")):
        log.info("Dataset already present...")
    else:
        log.info("Writing the synthetic dataset...")
        write_synthetic_cora(args.data)
    log.info("Loading dataset...")
    features, labels, adj_mat = load_cora(args.data, device=device)
    idx = torch.randperm(len(labels)).to(device)
    n_test, n_val = len(labels) // 4, len(labels) // 5
    idx_test, idx_val, idx_train = idx[:n_test], idx[n_test:n_test + n_val], idx[n_test + n_val:]
    log.info(f"{len(labels)} nodes, {int(adj_mat.sum())} adjacency entries, {features.shape[1]} features; "
             f"train/val/test {len(idx_train)}/{len(idx_val)}/{len(idx_test)}")

    gat_net = GAT(in_features=features.shape[1], n_hidden=args.hidden_dim, n_heads=args.num_heads,
                  num_classes=labels.max().item() + 1, concat=args.concat_heads, dropout=args.dropout_p,
                  leaky_relu_slope=0.2).to(device)
    optimizer = Adam(gat_net.parameters(), lr=args.lr, weight_decay=args.l2)
    scheduler = StepLR(optimizer, step_size=args.step_size, gamma=args.gamma)
    criterion = nn.NLLLoss()

    os.makedirs(args.checkpoint_dir, exist_ok=True)
    best_path = os.path.join(args.checkpoint_dir, "gat_best.pt")
    best_val = -1.0
    for epoch in range(args.epochs):
        loss_val, acc_val = train_iter(epoch + 1, gat_net, optimizer, criterion, (features, adj_mat), labels,
                                       idx_train, idx_val, args)
        scheduler.step()
        if acc_val > best_val:
            best_val = acc_val
            torch.save({"epoch": epoch + 1, "model": gat_net.state_dict(), "optimizer": optimizer.state_dict(),
                        "acc_val": acc_val, "args": vars(args)}, best_path)
        if args.dry_run:
            break

    gat_net.load_state_dict(torch.load(best_path, weights_only=False)["model"])
    loss_test, acc_test = test(gat_net, criterion, (features, adj_mat), labels, idx_test)
    log.info(f"Test set results: loss {loss_test:.4f} accuracy {acc_test:.4f}")
    print(f"done: {epoch + 1} epochs, best val accuracy {best_val:.4f}, test accuracy {acc_test:.4f}")


if __name__ == "__main__":
    main()
