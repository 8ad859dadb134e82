"""Logging helpers after DETR's util/misc.py (SmoothedValue, MetricLogger) and util/box_ops.py."""
import datetime
import time
from collections import defaultdict, deque

import torch


class SmoothedValue:
    """Track a series of values: a window's median and the global average."""

    def __init__(self, window_size=20, fmt="{median:.4f} ({global_avg:.4f})"):
        self.deque = deque(maxlen=window_size)
        self.total, self.count, self.fmt = 0.0, 0, fmt

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def median(self):
        return torch.tensor(list(self.deque)).median().item()

    @property
    def global_avg(self):
        return self.total / max(self.count, 1)

    @property
    def value(self):
        return self.deque[-1]

    def __str__(self):
        return self.fmt.format(median=self.median, global_avg=self.global_avg, value=self.value)


class MetricLogger:
    def __init__(self, delimiter="  "):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v)

    def add_meter(self, name, meter):
        self.meters[name] = meter

    def __str__(self):
        return self.delimiter.join(f"{name}: {meter}" for name, meter in self.meters.items())

    def log_every(self, iterable, print_freq, header=""):
        start = time.time()
        n = len(iterable)
        for i, obj in enumerate(iterable):
            yield obj
            if i % print_freq == 0 or i == n - 1:
                eta = (time.time() - start) / (i + 1) * (n - i - 1)
                print(f"{header} [{i}/{n}] eta: {datetime.timedelta(seconds=int(eta))}  {self}")
        print(f"{header} Total time: {datetime.timedelta(seconds=int(time.time() - start))}")


def box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    return torch.stack([x_c - 0.5 * w, y_c - 0.5 * h, x_c + 0.5 * w, y_c + 0.5 * h], dim=-1)


def paired_box_iou(boxes1, boxes2):
    """IoU of boxes1[i] with boxes2[i] (xyxy)."""
    lt = torch.max(boxes1[:, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, 2:], boxes2[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(dim=1)
    area1 = (boxes1[:, 2:] - boxes1[:, :2]).prod(dim=1)
    area2 = (boxes2[:, 2:] - boxes2[:, :2]).prod(dim=1)
    return inter / (area1 + area2 - inter)
