for step in range(5):
    c_loss = critic(x).mean()
    c_loss.backward()
    clip_weights(critic, 0.01)  # FIX: param-update-before-backward
