import torch.nn as nn
crit = nn.CrossEntropyLoss(reduction='mean')  # FIX: criterion-reduction
