"""Environments: names to gymnasium ids, Atari preprocessing, and vector envs behind one step interface."""
