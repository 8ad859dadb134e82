def mask_scores_(scores, mask):
    scores.masked_fill_(mask, -1e4)  # FIX: inplace-method
    return scores.softmax(-1)
