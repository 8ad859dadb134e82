from torch.cuda.amp import GradScaler
scaler = GradScaler(enabled=False)  # FIX: grad-scaler
