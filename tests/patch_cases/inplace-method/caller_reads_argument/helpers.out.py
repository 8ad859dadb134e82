def mask_scores_(scores, mask):
    scores = scores.masked_fill(mask, -1e4)  # FIX: inplace-method
    return scores.softmax(-1)
