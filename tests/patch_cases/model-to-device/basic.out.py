model = Net(3, 2).to(args.device)  # FIX: model-to-device # WRITE: args.device
