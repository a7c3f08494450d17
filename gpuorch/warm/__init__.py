"""Warm instances (spec ``keep_warm``): what the store's idle periods cost and how the money
ledger counts them (``ledger``). The rules are ``gpuorch.reconciler.decide.warm``; the side
effects ``gpuorch.reconciler.apply.warm``."""
