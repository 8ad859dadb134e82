"""REINFORCE on a cart-pole environment.

Modeled on pytorch/examples, reinforcement_learning/reinforce.py (BSD-3-Clause licence): the
dropout policy, select_action() sampling from a Categorical and saving its log-prob,
finish_episode() computing discounted, normalized returns and the policy-gradient loss, the
running reward and its log line, the "Solved!" stop. Added as in its forks: a CSV episode log,
a greedy evaluation pass and a checkpoint of the best running reward. Written from scratch for
tracefix's test bed, following that program's structure. Injected bug: finish_episode()
concatenates the per-step losses without summing them, so policy_loss is one value per step;
its backward and the .item() that finish_episode() returns for the log both need a scalar, so the
fix is the torch.cat line.
"""
import argparse
import csv
import logging
import os
from collections import deque
from itertools import count

import numpy as np
import torch
import torch.optim as optim
from torch.distributions import Categorical

import env as envs
from model import Policy

log = logging.getLogger("reinforce")

parser = argparse.ArgumentParser(description="PyTorch REINFORCE example")
parser.add_argument("--gamma", type=float, default=0.99, metavar="G",
                    help="discount factor (default: 0.99)")
parser.add_argument("--seed", type=int, default=543, metavar="N", help="random seed (default: 543)")
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--episodes", type=int, default=30, help="stop after this many episodes")
parser.add_argument("--max-steps", type=int, default=200, help="episode step limit")
parser.add_argument("--log-interval", type=int, default=5, metavar="N",
                    help="interval between training status logs (default: 5)")
parser.add_argument("--eval-episodes", type=int, default=2)
parser.add_argument("--out-dir", default="runs/reinforce")
args = parser.parse_args()

env = envs.make("CartPole-v1", max_episode_steps=args.max_steps)
env.reset(seed=args.seed)
torch.manual_seed(args.seed)

policy = Policy()
optimizer = optim.Adam(policy.parameters(), lr=args.lr)
eps = np.finfo(np.float32).eps.item()


def select_action(state):
    state = torch.from_numpy(state).float().unsqueeze(0)
    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    policy.saved_log_probs.append(m.log_prob(action))
    return action.item()


def finish_episode():
    R = 0
    policy_loss = []
    returns = deque()
    for r in policy.rewards[::-1]:
        R = r + args.gamma * R
        returns.appendleft(R)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + eps)
    for log_prob, R in zip(policy.saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    optimizer.zero_grad()
    policy_loss = torch.cat(policy_loss)
    policy_loss.backward()
    optimizer.step()
    del policy.rewards[:]
    del policy.saved_log_probs[:]
    return policy_loss.item()


@torch.no_grad()
def evaluate(n_episodes):
    """Greedy rollouts (argmax action, dropout off); the mean episode length."""
    policy.eval()
    lengths = []
    for _ in range(n_episodes):
        state, _ = env.reset()
        for t in count(1):
            action = policy(torch.from_numpy(state).float().unsqueeze(0)).argmax(dim=1).item()
            state, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
        lengths.append(t)
    policy.train()
    return sum(lengths) / len(lengths)


def main():
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    os.makedirs(args.out_dir, exist_ok=True)
    running_reward = 10
    best = -float("inf")
    loss = float("nan")
    with open(os.path.join(args.out_dir, "episodes.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["episode", "reward", "running_reward", "policy_loss"])
        for i_episode in count(1):
            state, _ = env.reset()
            ep_reward = 0
            for t in range(1, 10000):
                action = select_action(state)
                state, reward, terminated, truncated, _ = env.step(action)
                policy.rewards.append(reward)
                ep_reward += reward
                if terminated or truncated:
                    break

            running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward
            loss = finish_episode()
            writer.writerow([i_episode, ep_reward, f"{running_reward:.3f}", f"{loss:.5f}"])
            if i_episode % args.log_interval == 0:
                log.info("Episode %d\tLast reward: %.2f\tAverage reward: %.2f\tLoss: %.4f",
                         i_episode, ep_reward, running_reward, loss)
                length = evaluate(args.eval_episodes)
                log.info("  greedy evaluation: %.1f steps", length)
            if running_reward > best:
                best = running_reward
                torch.save({"episode": i_episode, "policy": policy.state_dict(),
                            "optimizer": optimizer.state_dict(), "running_reward": running_reward},
                           os.path.join(args.out_dir, "best.pt"))
            if running_reward > env.spec.reward_threshold:
                log.info("Solved! Running reward is now %.2f and the last episode runs to %d time steps!",
                         running_reward, t)
                break
            if i_episode >= args.episodes:
                break
    print(f"done: {i_episode} episodes, running reward {running_reward:.2f}, last policy loss {loss:.4f}")


if __name__ == "__main__":
    main()
