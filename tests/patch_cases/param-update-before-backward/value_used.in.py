for step in range(5):
    c_loss = critic(x).mean()
    n = clip_weights(critic, 0.01)  # FIX: param-update-before-backward
    c_loss = c_loss + 0 * n
    c_loss.backward()
