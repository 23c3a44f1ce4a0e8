"""The Prefect runtime under the flows: the checkout's private Prefect server (``prefect_session``), the work pool's
worker that vets each run before taking it (``cell_worker``, ``worker``), the process a cell run starts in
(``cell_engine``), and the checks of a pool and its server (``pool_checks``). ``pipeline/`` below it is plain
functions; nothing there imports Prefect."""
