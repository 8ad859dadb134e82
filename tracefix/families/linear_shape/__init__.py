"""linear-shape: an ``nn.Linear`` (or a matmul) got inputs whose feature size is not its in_features."""
