"""Trains GatedMLP with DistributedDataParallel on CPU processes (gloo backend), one per rank:
torchrun --nproc_per_node 2 train.py"""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from model import GatedMLP


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)                       # the same initial weights on every rank
    model = DDP(GatedMLP())
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)    # each rank its own shard of the data
    for step in range(6):
        x = torch.randn(16, 8, generator=g)
        y = x.sum(dim=1, keepdim=True)
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()
    if rank == 0:
        print("done")


if __name__ == "__main__":
    main()
