for step in range(5):
    c_loss = critic(x).mean()
    clip_weights(critic, 0.01)  # FIX: param-update-before-backward
    w = critic.weight.sum()
    c_loss.backward()
