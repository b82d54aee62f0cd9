"""Real ViT inference split by position over torch.distributed (GLOO).

- ``model``: the ViT (timm parameter names), built from a ``ModelSpec``.
- ``edgetwin.models.layout`` (not here: the twin reads it too): which rows each rank
  holds and sends (pure, no torch).
- ``phases``: per-block, per-phase wall-clock timing (compute, staging, comm).
- ``exchange``: host-staged GLOO transfers of one rank.
- ``forward``: one rank's forward for single, voltage and prism.
- ``records``: what a rank measured, as JSON.
- ``worker``: one rank as a process (``python -m edgetwin.emu.vit.worker``).
- ``launcher``: P local ranks on loopback, with a timeout and clean-up.
"""
