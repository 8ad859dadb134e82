from trainer import Trainer

trainer = Trainer(actor, critic)
for step in range(5):
    q = critic(states, actor(states))
    critic_loss = (q - target).pow(2).mean()
    critic_loss.backward(retain_graph=True)
    actor_loss = -q.mean()
    actor_loss.backward(inputs=[p for group in trainer.opt_actor.param_groups for p in group["params"] if p.requires_grad])
    trainer.update_critic()  # FIX: param-step-before-backward
    trainer.update_actor()
