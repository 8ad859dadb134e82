import torch
scaler = torch.cuda.amp.GradScaler(enabled=False)  # FIX: grad-scaler
