import torch
scaler = torch.amp.GradScaler("cuda", enabled=False)  # FIX: grad-scaler
