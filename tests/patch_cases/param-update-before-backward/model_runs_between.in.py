for step in range(5):
    c_loss = critic(G(z).detach()).mean()
    clip_weights(critic, 0.01)  # FIX: param-update-before-backward
    g_out = G(z)
    c_loss.backward()
