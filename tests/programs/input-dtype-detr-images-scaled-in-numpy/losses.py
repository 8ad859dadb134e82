"""The two task losses and their weighted total, returned as a dict like DETR's SetCriterion."""
import torch.nn as nn

cls_criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
reg_criterion = nn.SmoothL1Loss(beta=1.0 / 9)


def compute_losses(outputs, targets, weight_dict):
    """{"cls": ..., "reg": ..., "total": ...}; "total" is what the optimizer follows."""
    loss_cls = cls_criterion(outputs["pred_logits"], targets["labels"])
    loss_reg = reg_criterion(outputs["pred_boxes"], targets["boxes"])
    total = weight_dict["cls"] * loss_cls + weight_dict["reg"] * loss_reg
    return {"cls": loss_cls, "reg": loss_reg, "total": total}
