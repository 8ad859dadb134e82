def forward(x):
	h = x.exp()
	h = h.clone()
	h[0][1] += 1  # FIX: inplace-subscript
	return h
