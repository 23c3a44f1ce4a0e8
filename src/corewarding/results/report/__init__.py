"""Report wing: the HTML reproduction report (``corewarding results report``): ``collect`` (SQL to plain values),
``render`` (values to HTML), the sections (``claims``, ``cost``, ``released``), ``plots`` and ``markup``."""
