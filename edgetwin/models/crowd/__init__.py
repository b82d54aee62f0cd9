"""The crowd decision core (layer 2): task table, dependencies, release and JIT loading,
assignment through indexes, requeue, aggregation and the decision records.

``core.CrowdCore`` is the entry point; the twin's foreman wraps it in SimPy and the real
foreman in sockets (docs/crowd.md, "The decision core").
"""
