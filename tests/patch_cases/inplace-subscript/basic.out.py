def forward(self, x):
    h = x.sigmoid()
    if self.mask_first:
        # zero the first column
        h = h.clone()
        h[:, 0] = 0  # FIX: inplace-subscript
    return h
