"""A Sokoban solver: A* over push positions, push-optimal; it measures how many pushes levels need.

It reads a level in Jumanji's encoding (channel 0: 3 agent, 4 box; channel 1: 1 wall, 2 target) and
answers with a move sequence in Jumanji's actions (constants.MOVES = [[-1,0],[0,1],[1,0],[0,-1]]:
0 up, 1 right, 2 down, 3 left), or with the number of pushes of a push-optimal solution (`optimal_pushes`).
It shares no code with parallel_experts.sokoban.levels or .generator (its codes are its own), so a test that
checks generated levels with it does not check the generator against itself.

A search state is the set of box cells plus the region the player can walk to (named by its smallest
cell); a step is one push. The heuristic, each box's push distance to the nearest target ignoring the
other boxes, never overestimates, and boxes pushed onto cells from which no target can be reached are
pruned; both are sound, so "no solution" means unsolvable. A push changes the heuristic by at most one, so
it is consistent and the first solved state taken from the queue has the fewest pushes.
"""

from __future__ import annotations

from collections import deque
from heapq import heappop, heappush

import numpy as np

from parallel_experts.config.errors import PipelineError

WALL, TARGET, AGENT, BOX = 1, 2, 3, 4
MOVES = ((-1, 0), (0, 1), (1, 0), (0, -1))  # action → (row, col) change, as Jumanji's constants.MOVES


class SearchLimit(PipelineError):
    """The node limit was reached before the search decided."""


class UnsolvableLevel(PipelineError):
    """A level that should be solvable is not."""


class _Board:
    """Cells numbered row-major on the level grown by one ring of walls (off-grid is blocked in Jumanji)."""

    def __init__(self, level):
        level = np.asarray(level)
        rows, cols = level.shape[:2]
        self.width = cols + 2
        self.offsets = [dr * self.width + dc for dr, dc in MOVES]
        self.walls = {self.cell(r, c) for r in range(-1, rows + 1) for c in range(-1, cols + 1)
                      if not (0 <= r < rows and 0 <= c < cols) or level[r, c, 1] == WALL}
        self.targets = frozenset(self.cell(r, c) for r, c in np.argwhere(level[..., 1] == TARGET))
        self.boxes = tuple(sorted(self.cell(r, c) for r, c in np.argwhere(level[..., 0] == BOX)))
        players = [self.cell(r, c) for r, c in np.argwhere(level[..., 0] == AGENT)]
        if len(players) != 1:
            raise ValueError(f"expected one player, found {len(players)}")
        self.player = players[0]
        self.distance = self._push_distances()

    def cell(self, r: int, c: int) -> int:
        return (int(r) + 1) * self.width + int(c) + 1

    def _push_distances(self) -> dict[int, int]:
        # Breadth-first backwards from the targets: a box at c came from c - o, pushed by a player at c - 2o.
        distance = {t: 0 for t in self.targets}
        queue = deque(self.targets)
        while queue:
            c = queue.popleft()
            for o in self.offsets:
                before, pusher = c - o, c - 2 * o
                if before not in self.walls and pusher not in self.walls and before not in distance:
                    distance[before] = distance[c] + 1
                    queue.append(before)
        return distance  # cells missing here are dead: a box there never reaches a target

    def reach(self, player: int, boxes) -> set[int]:
        seen, stack = {player}, [player]
        while stack:
            c = stack.pop()
            for o in self.offsets:
                n = c + o
                if n not in seen and n not in self.walls and n not in boxes:
                    seen.add(n)
                    stack.append(n)
        return seen

    def path(self, start: int, goal: int, boxes) -> list[int]:
        """Actions that walk the player from start to goal without pushing anything."""
        came = {start: None}
        queue = deque([start])
        while queue:
            c = queue.popleft()
            if c == goal:
                break
            for action, o in enumerate(self.offsets):
                n = c + o
                if n not in came and n not in self.walls and n not in boxes:
                    came[n] = (c, action)
                    queue.append(n)
        actions = []
        while came[goal] is not None:
            goal, action = came[goal]
            actions.append(action)
        return actions[::-1]


def solve(level, max_nodes: int = 100_000) -> list[int] | None:
    """A move sequence (Jumanji actions) with the fewest pushes that puts every box on a target; None if there
    is none.

    Raises SearchLimit after `max_nodes` expanded states without a decision.
    """
    board = _Board(level)
    found = _search(board, max_nodes)
    return None if found is None else _moves(board, *found)


def optimal_pushes(level, max_nodes: int = 100_000) -> int | None:
    """The number of pushes of a push-optimal solution; None if the level is unsolvable (SearchLimit as `solve`)."""
    board = _Board(level)
    found = _search(board, max_nodes)
    return None if found is None else len(_pushes(*found))


def push_counts(levels, max_nodes: int = 100_000) -> np.ndarray:
    """(n,) int32: `optimal_pushes` of each level; a level that is unsolvable or undecided within `max_nodes`
    states is an error that names it."""
    counts = []
    for i, level in enumerate(levels):
        try:
            pushes = optimal_pushes(level, max_nodes)
        except SearchLimit as error:
            raise SearchLimit(f"level {i}: {error}") from None
        if pushes is None:
            raise UnsolvableLevel(f"level {i}: unsolvable (no push sequence puts every box on a target)")
        counts.append(pushes)
    return np.array(counts, np.int32)


def _search(board: "_Board", max_nodes: int):
    """(parents, solved state) of the A* search, or None when no push sequence solves the level."""
    if any(b not in board.distance for b in board.boxes):
        return None

    def h(boxes) -> int:
        return sum(board.distance[b] for b in boxes)

    parents: dict = {}  # (boxes, region) → (parent state, box cell pushed, action)
    heap = [(h(board.boxes), 0, 0, board.boxes, board.player, None)]
    counter = 0
    while heap:
        _, pushes, _, boxes, player, parent = heappop(heap)
        box_set = set(boxes)
        region = board.reach(player, box_set)
        state = (boxes, min(region))
        if state in parents:
            continue
        parents[state] = parent
        if box_set <= board.targets:
            return parents, state
        if len(parents) > max_nodes:
            raise SearchLimit(f"no decision after {max_nodes} states")
        for b in boxes:
            for action, o in enumerate(board.offsets):
                to = b + o
                if b - o in region and to in board.distance and to not in box_set:
                    moved = tuple(sorted(to if x == b else x for x in boxes))
                    counter += 1
                    heappush(heap, (pushes + 1 + h(moved), pushes + 1, counter, moved, b, (state, b, action)))
    return None


def _pushes(parents: dict, state) -> list[tuple]:
    """The pushes that lead to `state`, first to last: (box cells before, box cell pushed, action)."""
    pushes = []
    while parents[state] is not None:
        state, box, action = parents[state]
        pushes.append((state[0], box, action))
    return pushes[::-1]


def _moves(board: _Board, parents: dict, state) -> list[int]:
    moves, player = [], board.player
    for boxes, box, action in _pushes(parents, state):
        moves += board.path(player, box - board.offsets[action], set(boxes)) + [action]
        player = box
    return moves


def play(level, actions) -> np.ndarray:
    """The level after the actions, by the rules of Sokoban (blocked moves and pushes change nothing)."""
    level = np.array(level, copy=True)
    rows, cols = level.shape[:2]
    (r, c), = np.argwhere(level[..., 0] == AGENT)

    def free(r, c):
        return 0 <= r < rows and 0 <= c < cols and level[r, c, 1] != WALL and level[r, c, 0] != BOX

    for action in actions:
        dr, dc = MOVES[action]
        if 0 <= r + dr < rows and 0 <= c + dc < cols and level[r + dr, c + dc, 0] == BOX:
            if not free(r + 2 * dr, c + 2 * dc):
                continue
            level[r + 2 * dr, c + 2 * dc, 0] = BOX
        elif not free(r + dr, c + dc):
            continue
        level[r, c, 0] = 0
        r, c = r + dr, c + dc
        level[r, c, 0] = AGENT
    return level


def solved(level) -> bool:
    level = np.asarray(level)
    return bool(np.all(level[..., 1][level[..., 0] == BOX] == TARGET))
