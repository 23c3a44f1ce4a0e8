"""The embedded default: a tiny random-weight model and tokenizer, and a tiny generated data set."""

# What a run of the tiny model is, said once: the demo table's note and the report's warning both print it.
PLUMBING_CHECK = (
    "A plumbing check, not a result: the tiny cells train a random-weight model on a small synthetic set and evaluate "
    "on\n16 problems (one right is 0.062), so the methods score alike by chance."
)
