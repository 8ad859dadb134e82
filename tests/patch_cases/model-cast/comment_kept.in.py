import torch

# the model
model = Net().cuda().half()  # FIX: model-cast (GPU, fp16 to save memory)
opt = torch.optim.AdamW(model.parameters())
