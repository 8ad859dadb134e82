"""input-dtype: data of another dtype than the model's weights reached a layer."""
