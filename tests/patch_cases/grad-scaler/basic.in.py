import torch
scaler = torch.amp.GradScaler("cuda")  # FIX: grad-scaler
