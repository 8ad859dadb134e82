CONFIG = {
    "model": {"hidden": [64, 64]},
    "precision": "float16",  # FIX: config-dtype
    "amp": True,
}
