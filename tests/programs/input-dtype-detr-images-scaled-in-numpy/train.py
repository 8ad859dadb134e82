"""Single-object detection (a class head and a box head) on synthetic COCO-style data.

Modeled on facebookresearch/detr, main.py and engine.py (Apache-2.0 licence): get_args_parser,
AdamW with a separate backbone learning rate, StepLR at --lr_drop, gradient clipping at
--clip_max_norm, train_one_epoch() / evaluate() with MetricLogger, a dict of losses weighted by
weight_dict, the checkpoint and the JSON log.txt every epoch, --resume. The Hungarian matcher and
the transformer are left out (one object per image). Written from scratch for tracefix's test
bed, following that program's structure. Injected bug: data.py's CocoSingleObject scales the
uint8 image in numpy (`self.images[idx] / 255.0`, float64) before torch.from_numpy, so float64
images reach the float32 backbone; the crash is the backbone's first conv, inside the model's
forward, reached from train_one_epoch(); evaluate() reads the same dataset class through the same
collate_fn, so the fix is where the image enters torch in __getitem__.
"""
import argparse
import datetime
import json
import os
import random
import time

import numpy as np
import torch
from torch.utils.data import DataLoader

from data import CocoSingleObject, collate_fn, write_synthetic_dataset
from engine import evaluate, train_one_epoch
from model import SingleObjectDetector


def get_args_parser():
    parser = argparse.ArgumentParser("Set single-object detector", add_help=False)
    parser.add_argument("--lr", default=1e-3, type=float)
    parser.add_argument("--lr_backbone", default=5e-4, type=float)
    parser.add_argument("--batch_size", default=16, type=int)
    parser.add_argument("--weight_decay", default=1e-4, type=float)
    parser.add_argument("--epochs", default=3, type=int)
    parser.add_argument("--lr_drop", default=2, type=int)
    parser.add_argument("--clip_max_norm", default=0.1, type=float, help="gradient clipping max norm")
    parser.add_argument("--hidden_dim", default=32, type=int)
    # loss coefficients
    parser.add_argument("--cls_loss_coef", default=1, type=float)
    parser.add_argument("--bbox_loss_coef", default=5, type=float)
    # dataset parameters
    parser.add_argument("--coco_path", type=str, default="data/coco_single")
    parser.add_argument("--output_dir", default="output", help="path where to save, empty for no saving")
    parser.add_argument("--seed", default=42, type=int)
    parser.add_argument("--resume", default="", help="resume from checkpoint")
    parser.add_argument("--start_epoch", default=0, type=int, metavar="N", help="start epoch")
    parser.add_argument("--eval", action="store_true")
    parser.add_argument("--num_workers", default=0, type=int)
    return parser


def main(args):
    print(args)
    seed = args.seed
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)

    if not os.path.exists(os.path.join(args.coco_path, "instances_train.json")):
        write_synthetic_dataset(args.coco_path)
    dataset_train = CocoSingleObject(args.coco_path, "train")
    dataset_val = CocoSingleObject(args.coco_path, "val")

    model = SingleObjectDetector(dataset_train.num_classes, hidden_dim=args.hidden_dim)
    weight_dict = {"cls": args.cls_loss_coef, "reg": args.bbox_loss_coef}
    n_parameters = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print("number of params:", n_parameters)

    param_dicts = [
        {"params": [p for n, p in model.named_parameters() if "backbone" not in n and p.requires_grad]},
        {"params": [p for n, p in model.named_parameters() if "backbone" in n and p.requires_grad],
         "lr": args.lr_backbone},
    ]
    optimizer = torch.optim.AdamW(param_dicts, lr=args.lr, weight_decay=args.weight_decay)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, args.lr_drop)

    data_loader_train = DataLoader(dataset_train, args.batch_size, shuffle=True, drop_last=True,
                                   collate_fn=collate_fn, num_workers=args.num_workers)
    data_loader_val = DataLoader(dataset_val, args.batch_size, shuffle=False, drop_last=False,
                                 collate_fn=collate_fn, num_workers=args.num_workers)

    output_dir = args.output_dir
    if args.resume:
        checkpoint = torch.load(args.resume, map_location="cpu")
        model.load_state_dict(checkpoint["model"])
        if not args.eval and "optimizer" in checkpoint:
            optimizer.load_state_dict(checkpoint["optimizer"])
            lr_scheduler.load_state_dict(checkpoint["lr_scheduler"])
            args.start_epoch = checkpoint["epoch"] + 1
    if args.eval:
        test_stats = evaluate(model, weight_dict, data_loader_val)
        print(json.dumps(test_stats))
        return

    print("Start training")
    start_time = time.time()
    for epoch in range(args.start_epoch, args.epochs):
        train_stats = train_one_epoch(model, weight_dict, data_loader_train, optimizer, epoch,
                                      args.clip_max_norm)
        lr_scheduler.step()
        if output_dir:
            os.makedirs(output_dir, exist_ok=True)
            torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "lr_scheduler": lr_scheduler.state_dict(), "epoch": epoch, "args": vars(args)},
                       os.path.join(output_dir, "checkpoint.pth"))

        test_stats = evaluate(model, weight_dict, data_loader_val)
        log_stats = {**{f"train_{k}": v for k, v in train_stats.items()},
                     **{f"test_{k}": v for k, v in test_stats.items()},
                     "epoch": epoch, "n_parameters": n_parameters}
        if output_dir:
            with open(os.path.join(output_dir, "log.txt"), "a") as f:
                f.write(json.dumps(log_stats) + "\n")

    total_time_str = str(datetime.timedelta(seconds=int(time.time() - start_time)))
    print("Training time {}".format(total_time_str))
    print("done: {} epochs, test loss {:.4f}, class acc {:.3f}, mean IoU {:.3f}".format(
        args.epochs, test_stats["total"], test_stats["class_acc"], test_stats["mean_iou"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser("single-object detector training and evaluation script",
                                     parents=[get_args_parser()])
    args = parser.parse_args()
    main(args)
