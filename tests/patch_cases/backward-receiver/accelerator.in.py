from accelerate import Accelerator
accelerator = Accelerator()
for batch in loader:
    loss = model(**batch).loss
    accelerator.backward(loss)  # FIX: backward-receiver
