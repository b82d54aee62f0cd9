"""The pipeline graph: stages as nodes, data dependencies as edges.

A job's graph must be acyclic; the foreman runs linear pipelines, so it must also
be one chain through every stage in order. Roles: a ``source`` stage takes the
job's inputs, a ``sink`` produces its logits, an ``intermediate`` does neither
(a one-stage pipeline's only node is ``source_sink``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Role = Literal["source", "intermediate", "sink", "source_sink"]


class GraphError(ValueError):
    """A pipeline graph that is cyclic, dangling or not the chain of its stages."""


@dataclass(frozen=True)
class Dag:
    """Nodes (stage names) and directed edges between them."""

    nodes: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]

    def roles(self) -> dict[str, Role]:
        """Each node's role, from its in- and out-edges."""
        has_in = {dst for _, dst in self.edges}
        has_out = {src for src, _ in self.edges}
        roles: dict[str, Role] = {}
        for node in self.nodes:
            if node in has_in:
                roles[node] = "intermediate" if node in has_out else "sink"
            else:
                roles[node] = "source" if node in has_out else "source_sink"
        return roles


def linear_dag(stage_names: Sequence[str]) -> Dag:
    """The chain stage 0 -> stage 1 -> ... -> stage S-1."""
    names = tuple(stage_names)
    return Dag(names, tuple(itertools.pairwise(names)))


def topological_order(dag: Dag) -> list[str]:
    """Nodes in dependency order (Kahn); GraphError when the graph has a cycle."""
    known = set(dag.nodes)
    if len(known) != len(dag.nodes):
        raise GraphError("stage names repeat in the graph")
    for src, dst in dag.edges:
        if src not in known or dst not in known:
            raise GraphError(f"edge {src} -> {dst} names a stage that is not in the graph")
    indegree = {node: 0 for node in dag.nodes}
    for _, dst in dag.edges:
        indegree[dst] += 1
    frontier = [node for node in dag.nodes if indegree[node] == 0]
    order: list[str] = []
    while frontier:
        node = frontier.pop(0)
        order.append(node)
        for src, dst in dag.edges:
            if src == node:
                indegree[dst] -= 1
                if indegree[dst] == 0:
                    frontier.append(dst)
    if len(order) != len(dag.nodes):
        stuck = sorted(node for node in dag.nodes if node not in order)
        raise GraphError(f"the graph has a cycle through {', '.join(stuck)}")
    return order


def check_linear(dag: Dag, stage_names: Sequence[str]) -> None:
    """GraphError unless ``dag`` is acyclic and exactly the chain of ``stage_names``."""
    topological_order(dag)
    if set(dag.nodes) != set(stage_names) or len(dag.nodes) != len(stage_names):
        raise GraphError("the graph's nodes are not the job's stages")
    if sorted(dag.edges) != sorted(linear_dag(stage_names).edges):
        chain = " -> ".join(stage_names)
        raise GraphError(f"the graph is not the linear pipeline {chain}")
