"""CROWDio: a DistilBERT pipeline cut into ONNX stages, run by a foreman over worker processes.

Modules, from the wire up: ``framing`` (length-prefixed frames), ``protocol`` (the
messages), ``codec`` and ``filestore`` (activation payloads), ``dag`` and ``sdk``
(stages, the pipeline graph, job submission), ``dispatch`` (what the foreman keeps of
stages and workers), ``crew`` (the workers and jobs in flight around the crowd
decision core of ``edgetwin.models.crowd``), ``job`` (one job's payloads, frames,
statistics and summary), ``foreman`` and ``worker`` (the processes, each
with a ``python -m`` entry point), ``sessions`` and ``telemetry`` (the worker's
ONNX Runtime session, model cache and trace), ``model`` (DistilBERT in torch and
its export to stages), ``launcher`` (a foreman and K workers on loopback) and
``rows`` (a run summary as results-table rows).

Nothing is imported here, so a worker process never pays for torch.
"""
