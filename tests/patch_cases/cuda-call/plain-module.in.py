import torch


class Denoiser(torch.nn.Module):
    def forward(self, batch):
        noise = torch.randn(batch.shape).cuda()  # FIX: cuda-call
        return batch + noise
