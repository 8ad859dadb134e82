import torch
def step(outputs, labels):
	loss = compute(
		outputs,
		labels,
	)
	loss.mean().backward(  # FIX: backward-receiver
		retain_graph=False,
	)
