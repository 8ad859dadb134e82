from accelerate import Accelerator
accelerator = Accelerator()
for batch in loader:
    loss = model(**batch).loss
    accelerator.backward(loss.mean())  # FIX: backward-receiver
