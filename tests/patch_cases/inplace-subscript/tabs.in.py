def forward(x):
	h = x.exp()
	h[0][1] += 1  # FIX: inplace-subscript
	return h
