"""A tiny GPT-2-style causal language model with save_pretrained() / from_pretrained().

Written in the manner of transformers' modeling_gpt2.py and modeling_utils.py: a config object saved
as config.json, the weights as pytorch_model.bin, and from_pretrained(path, torch_dtype=...) which
loads a local checkpoint and casts it to the requested dtype ("auto" reads the dtype the checkpoint
was saved in from its config).
"""
import json
import math
import os
from dataclasses import asdict, dataclass
from typing import NamedTuple, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "pytorch_model.bin"


@dataclass
class TinyGPTConfig:
    vocab_size: int = 64
    n_positions: int = 64
    n_embd: int = 32
    n_layer: int = 2
    n_head: int = 4
    resid_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02
    torch_dtype: str = "float32"
    model_type: str = "tiny-gpt2"

    def save_pretrained(self, save_directory):
        os.makedirs(save_directory, exist_ok=True)
        with open(os.path.join(save_directory, CONFIG_NAME), "w") as f:
            json.dump(asdict(self), f, indent=2, sort_keys=True)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path):
        with open(os.path.join(pretrained_model_name_or_path, CONFIG_NAME)) as f:
            return cls(**json.load(f))


class CausalLMOutput(NamedTuple):
    loss: Optional[torch.Tensor]
    logits: torch.Tensor


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        mask = torch.tril(torch.ones(config.n_positions, config.n_positions, dtype=torch.bool))
        self.register_buffer("bias", mask.view(1, 1, config.n_positions, config.n_positions), persistent=False)

    def forward(self, x, attention_mask=None):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        keep = self.bias[:, :, :T, :T]
        if attention_mask is not None:
            keep = keep & attention_mask[:, None, None, :].bool()
        att = att.masked_fill(~keep, torch.finfo(att.dtype).min)
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd)
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.mlp = MLP(config)

    def forward(self, x, attention_mask=None):
        x = x + self.attn(self.ln_1(x), attention_mask)
        return x + self.mlp(self.ln_2(x))


class TinyGPTLMHeadModel(nn.Module):
    config_class = TinyGPTConfig

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.n_positions, config.n_embd)
        self.drop = nn.Dropout(config.resid_pdrop)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.apply(self._init_weights)
        self.tie_weights()

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            module.weight.data.normal_(mean=0.0, std=self.config.initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            module.bias.data.zero_()

    def tie_weights(self):
        self.lm_head.weight = self.wte.weight

    def get_input_embeddings(self):
        return self.wte

    def resize_token_embeddings(self, new_num_tokens):
        old = self.wte
        if new_num_tokens == old.num_embeddings:
            return old
        new = nn.Embedding(new_num_tokens, old.embedding_dim).to(old.weight.device, old.weight.dtype)
        self._init_weights(new)
        n = min(new_num_tokens, old.num_embeddings)
        new.weight.data[:n] = old.weight.data[:n]
        self.wte = new
        self.lm_head = nn.Linear(old.embedding_dim, new_num_tokens, bias=False).to(old.weight.device)
        self.tie_weights()
        self.config.vocab_size = new_num_tokens
        return new

    def forward(self, input_ids, attention_mask=None, labels=None):
        B, T = input_ids.shape
        pos = torch.arange(T, device=input_ids.device)
        x = self.drop(self.wte(input_ids) + self.wpe(pos))
        for block in self.h:
            x = block(x, attention_mask)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if labels is not None:
            # Shift so that tokens < n predict n
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss = F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)).float(), shift_labels.view(-1))
        return CausalLMOutput(loss=loss, logits=logits)

    @property
    def dtype(self):
        return next(self.parameters()).dtype

    def save_pretrained(self, save_directory):
        os.makedirs(save_directory, exist_ok=True)
        self.config.torch_dtype = str(self.dtype).split(".")[-1]
        self.config.save_pretrained(save_directory)
        torch.save(self.state_dict(), os.path.join(save_directory, WEIGHTS_NAME))

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, config=None, torch_dtype=None):
        if config is None:
            config = cls.config_class.from_pretrained(pretrained_model_name_or_path)
        if torch_dtype == "auto":
            torch_dtype = getattr(torch, config.torch_dtype)
        model = cls(config)
        state_dict = torch.load(os.path.join(pretrained_model_name_or_path, WEIGHTS_NAME), map_location="cpu",
                                weights_only=True)
        model.load_state_dict(state_dict)
        if torch_dtype is not None:
            model = model.to(dtype=torch_dtype)
        model.eval()  # as transformers does: from_pretrained returns the model in evaluation mode
        return model
