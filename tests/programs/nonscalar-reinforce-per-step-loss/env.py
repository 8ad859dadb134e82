"""A cart-pole environment with gym's CartPole-v1 dynamics and its reset/step interface.

The physics follow gym's classic_control/cartpole.py (MIT licence): a pole hinged on a cart, the
action pushes the cart left or right, reward 1 per step until the pole falls past 12 degrees, the
cart leaves the track, or the episode reaches its step limit. No rendering.
"""
import math
from types import SimpleNamespace

import numpy as np


class CartPoleEnv:
    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    length = 0.5  # half the pole's length
    force_mag = 10.0
    tau = 0.02  # seconds between state updates
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def __init__(self, max_episode_steps=500):
        self.total_mass = self.masspole + self.masscart
        self.polemass_length = self.masspole * self.length
        self.spec = SimpleNamespace(id="CartPole-v1", reward_threshold=475.0,
                                    max_episode_steps=max_episode_steps)
        self.observation_space = SimpleNamespace(shape=(4,))
        self.action_space = SimpleNamespace(n=2)
        self.np_random = np.random.default_rng()
        self.state = None
        self._steps = 0

    def reset(self, seed=None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        self.state = self.np_random.uniform(low=-0.05, high=0.05, size=(4,))
        self._steps = 0
        return np.array(self.state, dtype=np.float32), {}

    def step(self, action):
        assert action in (0, 1), f"{action!r} invalid"
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        costheta, sintheta = math.cos(theta), math.sin(theta)
        temp = (force + self.polemass_length * theta_dot ** 2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta ** 2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = (x, x_dot, theta, theta_dot)
        self._steps += 1
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold_radians or theta > self.theta_threshold_radians)
        truncated = self._steps >= self.spec.max_episode_steps
        return np.array(self.state, dtype=np.float32), 1.0, terminated, truncated, {}


def make(env_id, max_episode_steps=500):
    if env_id != "CartPole-v1":
        raise ValueError(f"unknown environment {env_id}")
    return CartPoleEnv(max_episode_steps=max_episode_steps)
