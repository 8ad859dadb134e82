"""Hand-written fit loop driving a Lightning-style module (no Lightning installed)."""
import torch

from module import LitAutoEncoder


def fit(module, batches, max_steps=5):
    optimizer = module.configure_optimizers()
    module.train()
    for batch_idx, batch in enumerate(batches):
        if batch_idx >= max_steps:
            break
        optimizer.zero_grad()
        loss = module.training_step(batch, batch_idx)
        loss.backward()
        optimizer.step()
        print(f"batch {batch_idx} train_loss {loss.item():.4f}")


if __name__ == "__main__":
    torch.manual_seed(0)
    images = torch.rand(40, 1, 16, 16)
    batches = list(images.split(8))
    fit(LitAutoEncoder(), batches)
