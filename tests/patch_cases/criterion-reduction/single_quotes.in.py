import torch.nn as nn
crit = nn.CrossEntropyLoss(reduction='none')  # FIX: criterion-reduction
