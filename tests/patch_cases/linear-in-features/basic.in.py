import torch.nn as nn

HIDDEN = 128
# FIELDS: rows=8 got=128 expected=64 out=4
head = nn.Linear(64, 4)  # FIX: linear-in-features # WRITE: HIDDEN
