import torch

DTYPES = {"fp32": torch.float32, "fp16": torch.float16}
dtype = DTYPES[args.dtype]
model = build().to(args.device)  # FIX: model-cast
scaler = torch.amp.GradScaler(args.device, enabled=dtype == torch.float16)
