"""The embedded default: a tiny random-weight model and tokenizer, and a tiny generated data set."""
