def step(opt_g, opt_d, d_loss, g_loss):
    d_loss.backward(retain_graph=True)
    opt_d.step()  # FIX: optimizer-step-between
    g_loss.backward()
    opt_g.step()
