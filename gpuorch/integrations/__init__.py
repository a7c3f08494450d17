"""Drop-in checkpointing for training code under gpuorch (docs/workloads.md, "Integrations").

- ``gpuorch.integrations.pytorch``: ``TorchCheckpointer`` for a plain PyTorch loop (model,
  optimizer, scheduler, every RNG and the data position, into ``$GPUORCH_CHECKPOINT_DIR`` with
  the completeness protocol; a checkpoint at the next step on the notice signal; restore from
  the newest complete one).
- ``gpuorch.integrations.hf``: ``GpuorchCallback`` for ``transformers.Trainer`` and
  ``resume_checkpoint()`` for its ``resume_from_checkpoint``.
- ``gpuorch.integrations.lightning``: ``GpuorchCheckpoint`` for a PyTorch Lightning ``Trainer``
  and ``resume_checkpoint()`` for ``trainer.fit(ckpt_path=...)``.
- ``gpuorch.integrations.protocol``: the stdlib parts both use (the environment, the notice
  flag, COMPLETE markers).

Import-light: nothing here imports a framework until you import that framework's module, and
the whole package needs only the standard library besides, so a job image may carry it
without the rest of gpuorch (copy the directory, or ``pip install gpuorch`` without extras).
Multi-rank aware: every rank saves its own part, and only rank 0 writes ``COMPLETE``, after
all ranks have saved.
"""
