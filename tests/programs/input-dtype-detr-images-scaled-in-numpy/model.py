"""A small convolutional backbone with DETR's two prediction heads: class logits and a box MLP."""
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    """Very simple multi-layer perceptron (also called FFN), as in DETR."""

    def __init__(self, input_dim, hidden_dim, output_dim, num_layers):
        super().__init__()
        h = [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip([input_dim] + h, h + [output_dim]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < len(self.layers) - 1 else layer(x)
        return x


class Backbone(nn.Module):
    def __init__(self, hidden_dim):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, hidden_dim, 3, padding=1), nn.BatchNorm2d(hidden_dim), nn.ReLU(),
        )
        self.num_channels = hidden_dim

    def forward(self, x):
        return self.body(x)


class SingleObjectDetector(nn.Module):
    def __init__(self, num_classes, hidden_dim=32, image_size=32):
        super().__init__()
        self.backbone = Backbone(hidden_dim)
        cells = (image_size // 4) ** 2
        self.input_proj = nn.Linear(hidden_dim * cells, hidden_dim * 2)
        self.class_embed = nn.Linear(hidden_dim * 2, num_classes)
        self.bbox_embed = MLP(hidden_dim * 2, hidden_dim * 2, 4, 3)

    def forward(self, images):
        features = self.backbone(images).flatten(1)
        hs = F.relu(self.input_proj(features))
        return {"pred_logits": self.class_embed(hs), "pred_boxes": self.bbox_embed(hs).sigmoid()}
