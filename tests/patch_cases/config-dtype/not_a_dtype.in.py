CONFIG = {"device": "cpu", "optimizer": "adamw"}  # FIX: config-dtype
