"""Small graph algorithms over agent ids: topological order, cycles, ancestors (pure, iterative)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence


def topological_order(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> list[str] | None:
    """Nodes in an order where every edge goes forward, ties broken by ``nodes`` order; None on a cycle.

    >>> topological_order(["c", "a", "b"], [("a", "b"), ("b", "c")])
    ['a', 'b', 'c']
    """
    rank = {n: i for i, n in enumerate(nodes)}
    indegree = dict.fromkeys(nodes, 0)
    children: dict[str, list[str]] = {n: [] for n in nodes}
    for src, dst in edges:
        children[src].append(dst)
        indegree[dst] += 1
    ready = [(rank[n], n) for n in nodes if indegree[n] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, node = heapq.heappop(ready)
        order.append(node)
        for child in children[node]:
            indegree[child] -= 1
            if indegree[child] == 0:
                heapq.heappush(ready, (rank[child], child))
    return order if len(order) == len(nodes) else None


def strongly_connected(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative), in ``nodes`` order."""
    children: dict[str, list[str]] = {n: [] for n in nodes}
    for src, dst in edges:
        children[src].append(dst)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            recurse = False
            for j in range(i, len(children[node])):
                child = children[node][j]
                if child not in index:
                    work.append((node, j + 1))
                    work.append((child, 0))
                    recurse = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if recurse:
                continue
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    rank = {n: i for i, n in enumerate(nodes)}
    return sorted((sorted(c, key=rank.__getitem__) for c in found), key=lambda c: rank[c[0]])


def cycle_through(start: str, members: set[str], children: Mapping[str, Sequence[str]]) -> list[str]:
    """A shortest cycle from ``start`` back to itself inside ``members``, as a closed path.

    >>> cycle_through("a", {"a", "b", "c"}, {"a": ["b"], "b": ["c"], "c": ["a"]})
    ['a', 'b', 'c', 'a']
    """
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for child in children.get(node, ()):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in previous:
                    previous[child] = node
                    nxt.append(child)
        frontier = nxt
    return [start]


def ancestors(target: str, edges: Sequence[tuple[str, str]]) -> set[str]:
    """Every node with a path to ``target`` (not including it)."""
    parents: dict[str, list[str]] = {}
    for src, dst in edges:
        parents.setdefault(dst, []).append(src)
    seen: set[str] = set()
    todo = [target]
    while todo:
        for parent in parents.get(todo.pop(), ()):
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    seen.discard(target)
    return seen
