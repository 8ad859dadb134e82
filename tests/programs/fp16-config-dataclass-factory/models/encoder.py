"""A tiny BERT-like encoder for sequence classification: embeddings, nn.TransformerEncoder, a
tanh pooler on the [CLS] position and a linear classifier; forward returns (loss, logits)."""
from typing import NamedTuple, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


class SequenceClassifierOutput(NamedTuple):
    loss: Optional[torch.Tensor]
    logits: torch.Tensor


class Embeddings(nn.Module):
    def __init__(self, vocab_size, hidden_size, max_position, dropout, pad_token_id):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, hidden_size, padding_idx=pad_token_id)
        self.position_embeddings = nn.Embedding(max_position, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(dropout)

    def forward(self, input_ids):
        pos = torch.arange(input_ids.size(1), device=input_ids.device).unsqueeze(0)
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos)
        return self.dropout(self.LayerNorm(x))


class TinyEncoderForSequenceClassification(nn.Module):
    def __init__(self, vocab_size, num_labels, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                 intermediate_size=64, hidden_dropout_prob=0.1, max_position=64, pad_token_id=0):
        super().__init__()
        self.num_labels = num_labels
        self.embeddings = Embeddings(vocab_size, hidden_size, max_position, hidden_dropout_prob, pad_token_id)
        layer = nn.TransformerEncoderLayer(hidden_size, num_attention_heads, intermediate_size,
                                           hidden_dropout_prob, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_hidden_layers, enable_nested_tensor=False)
        self.pooler = nn.Linear(hidden_size, hidden_size)
        self.dropout = nn.Dropout(hidden_dropout_prob)
        self.classifier = nn.Linear(hidden_size, num_labels)

    def forward(self, input_ids, attention_mask=None, labels=None):
        x = self.embeddings(input_ids)
        pad_mask = None if attention_mask is None else attention_mask == 0
        x = self.encoder(x, src_key_padding_mask=pad_mask)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        logits = self.classifier(self.dropout(pooled))
        loss = F.cross_entropy(logits.view(-1, self.num_labels), labels.view(-1)) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)
