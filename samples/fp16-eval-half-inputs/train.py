"""Image classifier in the manner of pytorch/examples imagenet/main.py: the model is put in fp16 with
model.half(), and validate() casts its images with .half() to match; the training step uses
autocast and a GradScaler, which refuses the fp16 gradients."""
import torch
import torch.nn as nn

from models import SmallNet


def validate(loader, model, criterion):
    model.eval()
    total = 0.0
    with torch.no_grad():
        for images, target in loader:
            images = images.half()  # the model is in half precision
            output = model(images)
            total += criterion(output.float(), target).item()
    model.train()
    return total / len(loader)


def main():
    torch.manual_seed(0)
    images = torch.randn(40, 3, 8, 8)
    labels = torch.randint(0, 4, (40,))
    train_loader = list(zip(images[:32].split(8), labels[:32].split(8)))
    val_loader = list(zip(images[32:].split(4), labels[32:].split(4)))
    model = SmallNet()
    model.half()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu")
    step = 0
    for epoch in range(2):
        for x, y in train_loader:
            if step == 5:
                break
            with torch.autocast("cpu", dtype=torch.float16):
                loss = criterion(model(x), y)
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            print(f"step {step} loss {loss.item():.4f}")
            step += 1
        print(f"epoch {epoch} val loss {validate(val_loader, model, criterion):.4f}")


if __name__ == "__main__":
    main()
