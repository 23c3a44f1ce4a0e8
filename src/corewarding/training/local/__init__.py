"""The local backend: GRPO on one device (CPU or one GPU), the embedded default that runs everywhere.

``trainer`` (rollouts, old/ref log-probs, rewards, advantages, the update, a step's metrics), ``losses`` (PPO-clip
and k3 KL, their metrics), ``teacher`` (the Co-rewarding-II EMA update), ``checkpoint`` (atomic, verified steps) with
``safe_state`` and ``restored_state`` (what a checkpoint may hold, checked on resume), ``run_lock`` (one trainer per
run folder). Importing this package is cheap; ``trainer`` loads torch and transformers.
"""
