model = Net(3, 2)  # FIX: model-to-device # WRITE: args.device
