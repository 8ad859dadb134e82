for step in range(5):
    c_loss = critic(x).mean()
    opt.zero_grad()
    c_loss.backward()
    n = clip_weights(critic, 0.01)  # FIX: param-update-before-backward
    print(n)
