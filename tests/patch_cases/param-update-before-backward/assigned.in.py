for step in range(5):
    c_loss = critic(x).mean()
    n = clip_weights(critic, 0.01)  # FIX: param-update-before-backward
    opt.zero_grad()
    c_loss.backward()
    print(n)
