"""build_model(cfg, ...): the one place the classifier is constructed from a TrainConfig."""
import logging

from config import DTYPES
from .encoder import TinyEncoderForSequenceClassification

logger = logging.getLogger(__name__)


def build_model(cfg, vocab_size, num_labels, pad_token_id=0):
    model = TinyEncoderForSequenceClassification(
        vocab_size=vocab_size,
        num_labels=num_labels,
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        intermediate_size=cfg.intermediate_size,
        hidden_dropout_prob=cfg.hidden_dropout_prob,
        max_position=cfg.max_length,
        pad_token_id=pad_token_id,
    )
    n_params = sum(p.numel() for p in model.parameters())
    logger.info("built %s with %d parameters (precision %s)", type(model).__name__, n_params, cfg.precision)
    return model.to(dtype=DTYPES[cfg.precision])
