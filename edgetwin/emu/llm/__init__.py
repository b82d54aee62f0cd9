"""Real decoder LLM generation over torch.distributed (GLOO), one process per rank.

- ``runs``: one run (model, strategy, ranks, workload), checked; the worker's flags.
- ``model``: the decoder in torch (GPT-2, Llama, Qwen2 kinds), from a ``DecoderSpec``.
- ``attention``: masks, grouped-query attention, the log-sum-exp combine of partials.
- ``cache``: a rank's KV cache.
- ``timing``, ``exchange``: per-part, per-phase times; host-staged GLOO transfers.
- ``generation``: what a rank does; single (and the reference every strategy meets).
- ``pipeline``, ``tensor_parallel``, ``position_wise``: the distributed strategies;
  ``strategies``: name -> the class a rank runs.
- ``records``: what a rank measured, as JSON.
- ``worker``: one rank as a process (``python -m edgetwin.emu.llm.worker``).
- ``launcher``: P local ranks on loopback (``run_decoder``).
- ``local_rows``: a decoder scenario's configurations as launches, one row per repetition
  (mode ``local``; the emulator's hosts too).
"""
