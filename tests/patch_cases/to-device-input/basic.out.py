out = model(xb.to(device))  # FIX: to-device-input # WRITE: device
