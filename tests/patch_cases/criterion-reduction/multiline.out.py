import torch.nn as nn
crit = nn.BCEWithLogitsLoss(
    pos_weight=w,
    reduction="mean",  # FIX: criterion-reduction
)
