"""Graph rewriting: bottom-up substitution to a fixed point, the one mechanism every lowering pass uses."""

from __future__ import annotations

from collections.abc import Callable

from .uop import UOp

RewriteFn = Callable[[UOp], UOp | None]


def graph_rewrite(root: UOp, fn: RewriteFn, max_passes: int = 16) -> UOp:
    """Rebuild `root` bottom-up, replacing each node by fn(node) when fn returns one; repeat until nothing changes.
    A node that a pass left as it was (fn gave None, its sources unchanged) is not visited again: fn is a function of
    the node, so it would give None again, and so would every node below it. The passes after the first cost what
    the previous one made, not the whole graph (the confirming pass was half of every rewrite)."""
    stable: set[UOp] = set()
    for _ in range(max_passes):
        new = _rewrite(root, fn, stable)
        if new is root:
            return root
        root = new
    return root


def rewrite_once(root: UOp, fn: RewriteFn) -> UOp:
    """One bottom-up pass: each node rebuilt over its rewritten sources, then replaced by fn(node) when fn returns
    one (fn sees the rebuilt node)."""
    return _rewrite(root, fn, set())


def _rewrite(root: UOp, fn: RewriteFn, stable: set[UOp]) -> UOp:
    memo: dict[UOp, UOp] = {}
    for u in root.toposort(stable.__contains__) if stable else root.toposort():
        src = tuple(memo.get(s, s) for s in u.src)  # a stable source is itself
        nu = u if src == u.src else u.replace(src=src)
        r = fn(nu)
        if r is None and nu is u:
            stable.add(u)
        memo[u] = nu if r is None else r
    return memo.get(root, root)


def substitute(root: UOp, mapping: dict[UOp, UOp]) -> UOp:
    """Replace nodes by identity (one pass; the replacements are not rewritten again). A key is matched as it is
    in `root`, before its sources are rewritten: a triangular range keyed with the loop its bound reads is replaced
    even when that loop is replaced too."""
    if not mapping:
        return root
    memo: dict[UOp, UOp] = {}
    for u in root.toposort():
        if (m := mapping.get(u)) is not None:
            memo[u] = m
            continue
        src = tuple(memo[s] for s in u.src)
        memo[u] = u if src == u.src else u.replace(src=src)
    return memo[root]
