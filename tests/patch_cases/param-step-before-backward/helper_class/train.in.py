from trainer import Trainer

trainer = Trainer(actor, critic)
for step in range(5):
    q = critic(states, actor(states))
    critic_loss = (q - target).pow(2).mean()
    critic_loss.backward(retain_graph=True)
    trainer.update_critic()  # FIX: param-step-before-backward
    actor_loss = -q.mean()
    actor_loss.backward()
    trainer.update_actor()
