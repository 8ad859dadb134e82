"""Actor-critic on a small cart-pole, with separate actor and critic optimizers over a shared trunk.

Modeled on pytorch/examples, reinforcement_learning/actor_critic.py (BSD-3-Clause licence): the
Policy with an action head and a value head, SavedAction records, discounted normalised returns,
smooth-L1 critic loss, the running reward and log interval. Written from scratch for tracefix's
test bed, following that program's structure; the two optimizers (actor and critic, both over the
shared trunk) and the checkpoint are this bed's additions. Injected bug: the critic's optimizer
steps between the critic's backward and the actor's backward.
"""
import argparse
import logging
import os
from collections import namedtuple

import torch
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

from env import CartPole
from model import Policy

parser = argparse.ArgumentParser(description="actor-critic with two optimizers")
parser.add_argument("--gamma", type=float, default=0.99, metavar="G", help="discount factor")
parser.add_argument("--seed", type=int, default=543, metavar="N", help="random seed")
parser.add_argument("--episodes", type=int, default=6, help="episodes to train")
parser.add_argument("--max-steps", type=int, default=40, help="steps per episode at most")
parser.add_argument("--actor-lr", type=float, default=3e-3)
parser.add_argument("--critic-lr", type=float, default=1e-2)
parser.add_argument("--log-interval", type=int, default=2, metavar="N")
parser.add_argument("--save-dir", default="checkpoints")
args = parser.parse_args()

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
log = logging.getLogger("actor_critic")
torch.manual_seed(args.seed)
env = CartPole(seed=args.seed, max_steps=args.max_steps)
SavedAction = namedtuple("SavedAction", ["log_prob", "value"])

model = Policy()
actor_optimizer = optim.Adam(model.trunk_parameters() + list(model.action_head.parameters()),
                             lr=args.actor_lr)
critic_optimizer = optim.Adam(model.trunk_parameters() + list(model.value_head.parameters()),
                              lr=args.critic_lr)
eps = torch.finfo(torch.float32).eps


def select_action(state):
    state = torch.tensor(state, dtype=torch.float32)
    probs, state_value = model(state)
    m = Categorical(probs)
    action = m.sample()
    model.saved_actions.append(SavedAction(m.log_prob(action), state_value))
    return action.item()


def finish_episode():
    """Computes the actor and critic losses and updates each with its own optimizer."""
    R = 0
    returns = []
    for r in model.rewards[::-1]:
        R = r + args.gamma * R
        returns.insert(0, R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)

    policy_losses, value_losses = [], []
    for (log_prob, value), R in zip(model.saved_actions, returns):
        advantage = R - value.item()
        policy_losses.append(-log_prob * advantage)
        value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
    policy_loss = torch.stack(policy_losses).sum()
    value_loss = torch.stack(value_losses).sum()

    actor_optimizer.zero_grad()
    critic_optimizer.zero_grad()
    value_loss.backward(retain_graph=True)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    critic_optimizer.step()
    policy_loss.backward()
    actor_optimizer.step()

    del model.rewards[:]
    del model.saved_actions[:]
    return policy_loss.item(), value_loss.item()


def main():
    os.makedirs(args.save_dir, exist_ok=True)
    running_reward = 10
    for i_episode in range(1, args.episodes + 1):
        state, ep_reward = env.reset(), 0
        for t in range(1, 10000):
            action = select_action(state)
            state, reward, done, _ = env.step(action)
            model.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
        p_loss, v_loss = finish_episode()
        if i_episode % args.log_interval == 0:
            log.info("Episode %d\tLast reward: %.2f\tAverage reward: %.2f\tpolicy %.3f value %.3f",
                     i_episode, ep_reward, running_reward, p_loss, v_loss)
        if running_reward > env.reward_threshold:
            log.info("Solved! Running reward is now %.2f", running_reward)
            break
    torch.save({"model": model.state_dict(), "actor_opt": actor_optimizer.state_dict(),
                "critic_opt": critic_optimizer.state_dict()},
               os.path.join(args.save_dir, "actor_critic.pt"))
    print("done: %d episodes, running reward %.2f" % (i_episode, running_reward))


if __name__ == "__main__":
    main()
