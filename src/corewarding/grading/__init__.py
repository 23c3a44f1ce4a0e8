"""Grading a math answer: ``answers`` (\\boxed extraction, the strict checker's normalisation), ``equivalence``
(math-verify in killable worker processes, with a timeout per comparison), ``math_verify_worker`` (the worker's side)
and ``math_verify_preload`` (what the forkserver imports once)."""
