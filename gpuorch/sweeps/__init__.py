"""Cost-capped hyperparameter sweeps: a template job, a parameter space, trials as ordinary jobs."""
