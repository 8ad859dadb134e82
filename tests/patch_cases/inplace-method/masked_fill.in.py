def attend(scores, mask):
    scores.masked_fill_(mask, float('-inf'))  # FIX: inplace-method
    return scores.softmax(-1)
