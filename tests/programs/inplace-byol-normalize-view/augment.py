"""Two random views of a batch: random crop-and-resize, horizontal flip, brightness jitter."""
import torch
import torch.nn.functional as F


def random_view(images, out_size, generator=None):
    n, _, h, w = images.shape
    crops = []
    for i in range(n):
        ch = int(torch.randint(h // 2, h + 1, (1,), generator=generator))
        cw = int(torch.randint(w // 2, w + 1, (1,), generator=generator))
        top = int(torch.randint(0, h - ch + 1, (1,), generator=generator))
        left = int(torch.randint(0, w - cw + 1, (1,), generator=generator))
        crop = images[i:i + 1, :, top:top + ch, left:left + cw]
        crop = F.interpolate(crop, size=(out_size, out_size), mode="bilinear", align_corners=False)
        if torch.rand(1, generator=generator) < 0.5:
            crop = crop.flip(-1)
        crops.append(crop * (0.8 + 0.4 * torch.rand(1, generator=generator)))
    return torch.cat(crops)
