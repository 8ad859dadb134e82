for step in range(5):
    q = critic(states, actor(states))
    critic_loss = (q - target).pow(2).mean()
    trainer.zero_grad()
    critic_loss.backward(retain_graph=True)

    actor_loss = -q.mean()
    actor_loss.backward()
    trainer.update_critic()  # FIX: param-step-before-backward
    trainer.update_actor()
