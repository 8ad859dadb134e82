import torch.nn as nn
crit = nn.BCEWithLogitsLoss(
    pos_weight=w,
    reduction="none",  # FIX: criterion-reduction
)
