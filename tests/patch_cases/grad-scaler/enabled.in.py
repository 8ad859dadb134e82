import torch
scaler = torch.cuda.amp.GradScaler(enabled=args.fp16)  # FIX: grad-scaler
