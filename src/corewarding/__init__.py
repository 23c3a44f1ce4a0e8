"""corewarding."""
