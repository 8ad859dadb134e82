from torch.cuda.amp import GradScaler
scaler = GradScaler()  # FIX: grad-scaler
