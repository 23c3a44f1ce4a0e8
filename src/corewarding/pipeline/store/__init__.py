"""The shared artifact store of a work pool: ``transport`` (the fsspec store: run folders, data files, leases, with
manifests), ``run_files`` (which files of a run travel, in what order), ``run_sync`` (a training run pushed as it
goes), ``sharing`` (what the pipeline and the cells put in and take out), ``leases`` (who holds a cell)."""
