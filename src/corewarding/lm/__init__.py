"""Language-model plumbing shared by data, training and evaluation: loading, rollout, text generation."""
