from helpers import mask_scores_


def attend(q, k, v, mask):
    scores = (q @ k.transpose(-2, -1)).sigmoid()
    probs = mask_scores_(scores, mask)
    return probs @ v, scores.amax(-1)
