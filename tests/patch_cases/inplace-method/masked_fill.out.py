def attend(scores, mask):
    scores = scores.masked_fill(mask, float('-inf'))  # FIX: inplace-method
    return scores.softmax(-1)
