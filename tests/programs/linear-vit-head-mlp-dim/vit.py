"""A small Vision Transformer: patch embedding, pre-norm attention and feed-forward, cls pooling."""
import torch
import torch.nn as nn


class FeedForward(nn.Module):
    def __init__(self, dim, hidden_dim, dropout=0.0):
        super().__init__()
        self.net = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden_dim), nn.GELU(),
                                 nn.Dropout(dropout), nn.Linear(hidden_dim, dim), nn.Dropout(dropout))

    def forward(self, x):
        return self.net(x)


class Attention(nn.Module):
    def __init__(self, dim, heads=2, dim_head=8, dropout=0.0):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.attend = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, dim), nn.Dropout(dropout))

    def forward(self, x, keep=None):
        b, n, _ = x.shape
        x = self.norm(x)
        q, k, v = (t.view(b, n, self.heads, -1).transpose(1, 2) for t in self.to_qkv(x).chunk(3, dim=-1))
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        attn = self.attend(dots)
        if keep is not None:
            # dropped patches get no attention
            attn = attn.masked_fill(~keep[:, None, None, :], 0.0)
        attn = self.dropout(attn)
        out = torch.matmul(attn, v).transpose(1, 2).reshape(b, n, -1)
        return self.to_out(out)


class Transformer(nn.Module):
    def __init__(self, dim, depth, heads, dim_head, mlp_dim, dropout=0.0):
        super().__init__()
        self.layers = nn.ModuleList([nn.ModuleList([Attention(dim, heads, dim_head, dropout),
                                                    FeedForward(dim, mlp_dim, dropout)]) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, x, keep=None):
        for attn, ff in self.layers:
            x = attn(x, keep) + x
            x = ff(x) + x
        return self.norm(x)


class ViT(nn.Module):
    def __init__(self, image_size, patch_size, num_classes, dim, depth, heads, mlp_dim, channels=1, dim_head=8):
        super().__init__()
        self.patch_size = patch_size
        num_patches = (image_size // patch_size) ** 2
        self.to_patch_embedding = nn.Sequential(nn.LayerNorm(channels * patch_size ** 2),
                                                nn.Linear(channels * patch_size ** 2, dim), nn.LayerNorm(dim))
        self.pos_embedding = nn.Parameter(torch.randn(1, num_patches + 1, dim))
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.transformer = Transformer(dim, depth, heads, dim_head, mlp_dim)
        self.mlp_head = nn.Linear(mlp_dim, num_classes)

    def forward(self, img, patch_keep=None):
        p = self.patch_size
        b, c, h, w = img.shape
        patches = img.unfold(2, p, p).unfold(3, p, p).permute(0, 2, 3, 1, 4, 5).reshape(b, -1, c * p * p)
        x = self.to_patch_embedding(patches)
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), dim=1) + self.pos_embedding
        keep = None
        if patch_keep is not None:
            keep = torch.cat((torch.ones(b, 1, dtype=torch.bool), patch_keep), dim=1)
        x = self.transformer(x, keep)
        return self.mlp_head(x[:, 0])
