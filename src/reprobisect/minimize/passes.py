"""The passes one round of a minimization makes over the best text so far, each keeping only what stays
interesting: where the reduction starts (what never ran, what is unused), the rewrites (``rewrite``: flattened,
then one at a time), the failure's slice (``slicing``), the statements around the failing line unwrapped, and the
settings the reducer removes as groups.
"""

from __future__ import annotations

from collections.abc import Callable

from reprobisect.minimize.groups import Group, setting_groups
from reprobisect.minimize.reduce import prune_unused
from reprobisect.minimize.rewrite import flattened, rewrite_named, rewrites
from reprobisect.minimize.slicing import failure_slice
from reprobisect.minimize.statements import Script, parse_script, size_of
from reprobisect.util.echo import Echo
from reprobisect.util.stop import in_parallel

__all__ = [
    "first_flattened",
    "given_options",
    "rewrite_round",
    "setting_groups_of",
    "sliced_text",
    "starting_point",
    "unwrap_failure_path",
    "without_unused",
]


def starting_point(
    script: Script,
    ran: frozenset[int] | None,
    pinned: frozenset[int],
    judged: Callable[[frozenset[int]], bool],
    echo: Echo,
) -> tuple[frozenset[int], bool]:
    """Where the reduction starts, and whether it drops unused imports and definitions beside every candidate:
    first everything that never ran before the failure, with what is then unused, in one candidate; then that
    without the unused; then the original without its unused imports and definitions. Each is one run (two with a
    good cell), where the reducer would spend dozens to find the same."""
    dead = script.unexecuted(ran) - pinned if ran else frozenset()
    tries: list[tuple[str, frozenset[int], bool]] = []
    if dead:
        tries += [("never ran, and the unused", prune_unused(script, dead), True), ("never ran", dead, False)]
    tries.append(("the unused imports and definitions", prune_unused(script, frozenset()), True))
    for what, removed, prunes in tries:
        if not removed:
            continue
        size = size_of(script.text(removed))
        if judged(removed):
            echo(f"  without what {what} ({len(removed)} statements): {size}, still interesting")
            return removed, prunes
        echo(f"  without what {what} ({len(removed)} statements): {size}, not interesting")
    return frozenset(), False


def unwrap_failure_path(
    script: Script,
    removed: frozenset[int],
    pinned: frozenset[int],
    judged: Callable[[frozenset[int]], bool],
    echo: Echo,
) -> frozenset[int]:
    """``removed`` with the loops, ``if``s and ``with``s around the failing line unwrapped, innermost first, each
    while that stays interesting (one run each). What they held up (a loader, a flag, a dataset) can then go at the
    first level instead of waiting for the reducer to reach them."""
    around = sorted((script.units[u] for u in pinned if script.units[u].body), key=lambda unit: -unit.depth)
    kept = 0
    for unit in around:
        if unit.id in script.removed_with_descendants(removed):
            continue
        trial = removed | {script.unwrap_id(unit.id)}
        if judged(trial):
            removed, kept = trial, kept + 1
    if around:
        echo(f"  the failure's path: {kept} of {len(around)} statements around the failing line unwrapped")
    return removed


def setting_groups_of(
    script: Script, expand: Callable[[frozenset[int]], frozenset[int]], pinned: frozenset[int], removed: frozenset[int]
) -> list[Group]:
    """The settings the reducer tries removing as groups, with what uses them, beside ``removed``."""
    return setting_groups(script, expand(removed), pinned)


_FLATTEN_SKIPS = (("keyword",), ("keyword", "unread"))  # the unread go second: a value can matter for its effect


def first_flattened(text: str, given: frozenset[str]) -> str | None:
    """The first candidate ``rewrite_round`` judges for ``text`` (the script flattened), or None when nothing
    flattens: what the search asks next after ``text``, known before ``text``'s verdict is."""
    flat, done = flattened(text, given, skip=_FLATTEN_SKIPS[0])
    return without_unused(flat) if done else None


def rewrite_round(
    text: str,
    judged: Callable[..., bool],
    jobs: int,
    spent: Callable[[], str | None],
    echo: Echo,
    given: frozenset[str],
    *,
    one_at_a_time: bool = True,
) -> str:
    """``text`` with the rewrites (``rewrite``) that keep it interesting: first all of them at once, the script
    flattened (one candidate; if that is not interesting, once more without removing unread assignments); then
    (unless not ``one_at_a_time``) one at a time, ``jobs`` tried at once, the smallest interesting one kept and
    the other interesting ones of its batch tried together on top of it; a rewrite that was not interesting is not
    tried again this round. Each candidate goes without what it left unused."""
    for skip in _FLATTEN_SKIPS:
        flat, done = flattened(text, given, skip=skip)
        if not done:
            break
        flat = without_unused(flat)
        ok = judged(flat, True)
        echo(
            f"  flattened ({len(done)} rewrites: {_kinds(done)}): {size_of(flat)}, "
            + ("still interesting" if ok else "not interesting")
        )
        if ok:
            text = flat
            break
    failed: set[str] = set()
    kept = 0
    options, of = [], ""  # the rewrites of ``of``: listed again only when the text changed
    while one_at_a_time and spent() is None:
        if of != text:
            options, of = rewrites(text, given), text
        batch = [r for r in options if r.what not in failed][: max(1, jobs)]
        if not batch:
            break
        texts = [without_unused(r.text) for r in batch]
        answers = _judge_all(judged, texts, jobs)
        failed.update(r.what for r, ok in zip(batch, answers, strict=True) if not ok)
        good = sorted((size_of(t).tokens, r.what, t) for r, t, ok in zip(batch, texts, answers, strict=True) if ok)
        if not good:
            continue
        text, kept = good[0][2], kept + 1
        failed.add(good[0][1])
        together = _composed(text, [what for _, what, _ in good[1:]], given)
        if together is not None and judged(together, True):
            text, kept = together, kept + len(good) - 1
            failed.update(what for _, what, _ in good[1:])
    if kept:
        echo(f"  rewrites one at a time: {kept} kept, {size_of(text)}")
    return text


def sliced_text(text: str, judged: Callable[..., bool], lines: tuple[int, ...], jobs: int, echo: Echo) -> str:
    """``text`` cut to the failure's slice (``slicing``) when that stays interesting: first the slice with the
    statements around the failing line unwrapped, with and without calls on modules counting as effects (tried at
    once, the smaller interesting one wins); then the plain slice."""
    if not lines:
        return text
    waves = (
        [failure_slice(text, lines, unwrap=True, module_calls=False), failure_slice(text, lines, unwrap=True)],
        [failure_slice(text, lines)],
    )
    tried: set[str] = {text}
    per_wave = []
    for wave in waves:
        texts = sorted({without_unused(t) for t in wave if t is not None} - tried, key=lambda t: size_of(t).tokens)
        tried.update(texts)
        per_wave.append(texts)
    every = [t for texts in per_wave for t in texts]
    # the plain slice is judged beside the first wave when every text can run in both cells at once: its verdict
    # is then in should the first wave not be interesting, a run time sooner
    early = dict(zip(every, _judge_all(judged, every, jobs), strict=True)) if 1 < len(every) <= jobs // 2 else {}
    for texts in per_wave:
        if not texts:
            continue
        answers = [early[t] for t in texts] if early else _judge_all(judged, texts, jobs)
        good = [t for t, ok in zip(texts, answers, strict=True) if ok]
        if good:
            echo(f"  the failure's slice: {size_of(good[0])}, still interesting")
            return good[0]
        echo(f"  the failure's slice: {size_of(texts[0])}, not interesting")
    return text


def _judge_all(judged: Callable[..., bool], texts: list[str], jobs: int) -> list[bool]:
    """``judged`` on each of ``texts``, ``jobs`` at a time; one text alone is judged in both cells at once."""
    if len(texts) == 1:
        return [judged(texts[0], True)]
    return in_parallel(judged, texts, max(1, min(jobs, len(texts))))


def _composed(text: str, whats: list[str], given: frozenset[str]) -> str | None:
    """``text`` with the rewrites named ``whats`` made one after another (those that still apply), or None."""
    applied = 0
    for what in whats:
        step = rewrite_named(text, what, given)
        if step is not None:
            text, applied = step.text, applied + 1
    return without_unused(text) if applied else None


def without_unused(text: str) -> str:
    """``text`` without the imports and top-level definitions nothing uses any more."""
    try:
        script = parse_script(text)
    except SyntaxError:
        return text
    return script.text(prune_unused(script, frozenset()))


def _kinds(done: list[str]) -> str:
    counts: dict[str, int] = {}
    for what in done:
        kind = what.split(" ", 1)[0]
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{n} {kind}" for kind, n in counts.items())


def given_options(script_args: tuple[str, ...]) -> frozenset[str]:
    """The options the run passes the script (``--lr``, ``--lr=0.5``): their defaults are not what runs."""
    return frozenset(arg.split("=", 1)[0] for arg in script_args if arg.startswith("-"))
