out = model(xb)  # FIX: to-device-input # WRITE: device
