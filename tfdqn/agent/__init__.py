"""The agent: Q-networks, the in-graph epsilon-greedy actor and the compiled learner."""
