"""Train and eval functions used in train.py, after DETR's engine.py."""
import math
import sys

import torch

import utils
from losses import compute_losses


def train_one_epoch(model, weight_dict, data_loader, optimizer, epoch, max_norm=0.0, print_freq=4):
    model.train()
    metric_logger = utils.MetricLogger(delimiter="  ")
    metric_logger.add_meter("lr", utils.SmoothedValue(window_size=1, fmt="{value:.6f}"))
    header = f"Epoch: [{epoch}]"
    for samples, targets in metric_logger.log_every(data_loader, print_freq, header):
        outputs = model(samples)
        losses = compute_losses(outputs, targets, weight_dict)

        optimizer.zero_grad()
        losses["total"].backward()
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()

        loss_values = {k: v.item() for k, v in losses.items()}
        if not math.isfinite(loss_values["total"]):
            print(f"Loss is {loss_values['total']}, stopping training")
            print(loss_values)
            sys.exit(1)
        metric_logger.update(**loss_values)
        metric_logger.update(lr=optimizer.param_groups[0]["lr"])
    print("Averaged stats:", metric_logger)
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}


@torch.no_grad()
def evaluate(model, weight_dict, data_loader, print_freq=4):
    model.eval()
    metric_logger = utils.MetricLogger(delimiter="  ")
    header = "Test:"
    for samples, targets in metric_logger.log_every(data_loader, print_freq, header):
        outputs = model(samples)
        losses = compute_losses(outputs, targets, weight_dict)
        metric_logger.update(**{k: v.item() for k, v in losses.items()})

        acc = (outputs["pred_logits"].argmax(-1) == targets["labels"]).float().mean()
        iou = utils.paired_box_iou(utils.box_cxcywh_to_xyxy(outputs["pred_boxes"]),
                                   utils.box_cxcywh_to_xyxy(targets["boxes"]))
        metric_logger.update(class_acc=acc.item(), mean_iou=iou.mean().item())
    print("Averaged stats:", metric_logger)
    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}
