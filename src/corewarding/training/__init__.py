"""Training backends: the one-device GRPO loop (local.py) and, later, verl."""
