import torch
def step(outputs, labels):
	loss = compute(
		outputs,
		labels,
	)
	loss.backward(  # FIX: backward-receiver
		retain_graph=False,
	)
