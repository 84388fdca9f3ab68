"""Graph rewriting: bottom-up substitution to a fixed point, the one mechanism every lowering pass uses."""

from __future__ import annotations

from collections.abc import Callable

from .uop import UOp

RewriteFn = Callable[[UOp], UOp | None]


def graph_rewrite(root: UOp, fn: RewriteFn, max_passes: int = 16, stable: set[UOp] | None = None) -> UOp:
    """Rebuild `root` bottom-up, replacing each node by fn(node) when fn returns one; repeat until nothing changes.
    A node that a pass left as it was (fn gave None, its sources unchanged) is not visited again: fn is a function of
    the node, so it would give None again, and so would every node below it. The passes after the first cost what
    the previous one made, not the whole graph (the confirming pass was half of every rewrite). `stable`: a set
    that calls with the same `fn` share (what one call found stable, the next one does not walk again)."""
    if stable is None:
        stable = set()
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
    changed: dict[UOp, UOp] = {}  # only the nodes that became another (a source not in it is itself)
    get, add = changed.get, stable.add
    for u in root.toposort(stable.__contains__) if stable else root.toposort():
        us = u.src
        if changed and us:
            src = tuple([get(s, s) for s in us])
            nu = u if src == us else UOp(u.op, u.dtype, src, u.arg)
        else:
            nu = u
        r = fn(nu)
        if r is None:
            if nu is u:
                add(u)
            else:
                changed[u] = nu
        elif r is not u:
            changed[u] = r
    return get(root, root)


def substitute(root: UOp, mapping: dict[UOp, UOp]) -> UOp:
    """Replace nodes by identity (one pass; the replacements are not rewritten again). A key is matched as it is
    in `root`, before its sources are rewritten: a triangular range keyed with the loop its bound reads is replaced
    even when that loop is replaced too."""
    if not mapping:
        return root
    memo: dict[UOp, UOp] = {}  # only the nodes that became another
    get, mget = memo.get, mapping.get
    for u in root.toposort():
        if (m := mget(u)) is not None:
            memo[u] = m
        elif memo and (us := u.src):
            src = tuple([get(s, s) for s in us])
            if src != us:
                memo[u] = UOp(u.op, u.dtype, src, u.arg)
    return get(root, root)


def substitute_memo(root: UOp, mapping: dict[UOp, UOp], memo: dict[UOp, UOp],
                    build: Callable[[UOp], UOp] | None = None) -> UOp:
    """`substitute(root, mapping)` with `memo` (node -> its result) shared by the calls that use one mapping: a
    subgraph that many roots share (the lanes of a vector, the rows of a tile) is walked once, not once per root.
    `build(node)`, when given, is what each rebuilt node becomes (the node itself, or an equivalent)."""
    if (hit := memo.get(root)) is not None:
        return hit
    mget = mapping.get
    for u in root.toposort(memo.__contains__):
        if (m := mget(u)) is not None:
            memo[u] = m
        elif us := u.src:
            src = tuple([memo[s] for s in us])
            if src == us:
                memo[u] = u
            else:
                nu = UOp(u.op, u.dtype, src, u.arg)
                memo[u] = nu if build is None else build(nu)
        else:
            memo[u] = u
    return memo[root]
