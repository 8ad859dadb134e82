CONFIG = {
    "model": {"hidden": [64, 64]},
    "precision": "float32",  # FIX: config-dtype
    "amp": True,
}
