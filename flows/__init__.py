"""Prefect wiring of the corewarding pipeline: tasks wrap library functions, the flow chains them, deployments
schedule it. Nothing here decides anything: ``corewarding.pipeline`` does."""
