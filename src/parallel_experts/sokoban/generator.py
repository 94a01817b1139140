"""New Sokoban levels made offline the way Boxoban's were made, solvable by construction."""

from __future__ import annotations

import numpy as np

from parallel_experts.sokoban.levels import AGENT, BOX, EMPTY, GRID_SIZE, TARGET, WALL, LevelError, LevelSet, pad_to

# gym-sokoban's (Schrader) room topology: a random walk stamps one of these 3×3 floor masks at every step.
_MASKS = np.array([
    [[0, 0, 0], [1, 1, 1], [0, 0, 0]],
    [[0, 1, 0], [0, 1, 0], [0, 1, 0]],
    [[0, 0, 0], [1, 1, 0], [0, 1, 0]],
    [[0, 0, 0], [1, 1, 0], [1, 1, 0]],
    [[0, 0, 0], [0, 1, 1], [0, 1, 0]],
], bool)
_DIRECTIONS = ((-1, 0), (0, 1), (1, 0), (0, -1))


def generate_levels(
    n: int,
    room_size: int = GRID_SIZE,
    num_boxes: int = 4,
    seed: int = 0,
    *,
    walks: int = 16,
    walk_steps: int = 300,
    p_pull: float = 0.5,
    min_displacement: int | None = None,
    topology_steps: int | None = None,
    p_change_direction: float = 0.35,
    max_tries: int = 200,
) -> np.ndarray:
    """n solvable levels (n, room_size, room_size, 2) uint8 in Jumanji's encoding, walls on the border.

    The procedure of Boxoban's unfiltered levels (Racanière et al. 2017) as gym-sokoban implements it:
    1. room: a random walk of `topology_steps` steps (default 1.7·2·room_size) inside the border, turning
       with probability `p_change_direction`, stamps 3×3 floor masks;
    2. the player and `num_boxes` targets go on distinct random floor cells, a box on each target;
    3. reverse play: the player walks at random, `walk_steps` steps at a time, and with probability
       `p_pull` pulls along a box standing behind it. Each such move undoes a legal forward move, so
       every position reached can be played forward back to the solved one: solvable by construction.
    Positions are scored like gym-sokoban, (number of times the pulled box changes) × (sum of the boxes'
    distances from the targets they started on), counting only positions with no box on any target and
    a total distance of at least `min_displacement` (default 2·num_boxes: no box-one-step-off-its-target
    levels). gym-sokoban searches the reverse moves depth-first for the best score (slow in Python);
    here `walks` random walks climb instead, each starting from the best position found so far. A room
    where no walk scores is redrawn, up to `max_tries` times.

    Level i uses its own random stream `np.random.default_rng([seed, i])`, so it depends only on the
    seed, its position and the settings: the first k levels of a longer request are the same levels.

    Measured on one core of the 2-core CPU machine, 1,000 levels: 6×6 with 1 box about 2 s, 7×7 with
    2 boxes 2 s, 7×7 with 3 boxes 5 s, 10×10 with 4 boxes 4-5 s. The 10×10 4-box levels need 10.6 pushes on
    average (push-optimal solutions of 60 levels), Boxoban's unfiltered test levels 10.9 (first 40).
    """
    if not (isinstance(seed, (int, np.integer)) and seed >= 0):
        raise LevelError(f"seed: expected a non-negative integer, got {seed!r}")
    interior = (room_size - 2) ** 2
    if room_size < 4 or num_boxes < 1 or num_boxes + 2 > interior:
        raise LevelError(f"room_size {room_size} with num_boxes {num_boxes}: expected room_size >= 4 and "
                         f"1 <= num_boxes <= {max(interior - 2, 0)} (the inside of the border less two cells)")
    steps = int(1.7 * 2 * room_size) if topology_steps is None else topology_steps
    levels = np.empty((n, room_size, room_size, 2), np.uint8)
    for i in range(n):
        rng = np.random.default_rng([seed, i])
        for _ in range(max_tries):
            level = _try_level(rng, room_size, num_boxes, steps, p_change_direction, walks, walk_steps, p_pull,
                               2 * num_boxes if min_displacement is None else min_displacement)
            if level is not None:
                levels[i] = level
                break
        else:
            raise LevelError(f"level {i} of seed {seed}: no {room_size}×{room_size} room with {num_boxes} boxes "
                             f"in {max_tries} tries; use a larger room, fewer boxes or more walks")
    return levels


def _try_level(rng, size, num_boxes, topology_steps, p_change, walks, walk_steps, p_pull,
               min_displacement) -> np.ndarray | None:
    floor = _room(rng, size, topology_steps, p_change)
    cells = np.flatnonzero(floor)
    if len(cells) <= num_boxes + 1:  # gym-sokoban's rule: room for the player, the boxes and one more
        return None
    chosen = rng.choice(cells, num_boxes + 1, replace=False).tolist()
    best = _reverse_play(floor, chosen[0], chosen[1:], rng, walks, walk_steps, p_pull, min_displacement)
    if best is None:
        return None
    player, boxes = best
    fixed = np.where(floor.reshape(-1), EMPTY, WALL).astype(np.uint8)
    fixed[chosen[1:]] = TARGET
    variable = np.full(size * size, EMPTY, np.uint8)
    variable[boxes] = BOX
    variable[player] = AGENT
    return np.stack([variable, fixed], axis=-1).reshape(size, size, 2)


def _room(rng, size: int, steps: int, p_change: float) -> np.ndarray:
    floor = np.zeros((size, size), bool)
    direction = _DIRECTIONS[rng.integers(4)]
    row, col = rng.integers(1, size - 1, size=2).tolist()
    turns = rng.random(steps) < p_change
    new_directions, masks = rng.integers(4, size=steps), rng.integers(5, size=steps)
    for step in range(steps):
        if turns[step]:
            direction = _DIRECTIONS[new_directions[step]]
        row = min(max(row + direction[0], 1), size - 2)
        col = min(max(col + direction[1], 1), size - 2)
        floor[row - 1:row + 2, col - 1:col + 2] |= _MASKS[masks[step]]
    # Every mask covers its centre and the centres form a path, so the floor is one connected room.
    floor[[0, -1], :] = floor[:, [0, -1]] = False
    return floor


def _reverse_play(floor, player: int, targets: list[int], rng, walks: int, steps: int, p_pull: float,
                  min_displacement: int):
    """The best-scoring (player, box cells) reached by reverse play from the solved position, or None."""
    width = floor.shape[1]
    free = floor.reshape(-1).tolist()
    is_target = [False] * len(free)
    for t in targets:
        is_target[t] = True
    rows, cols = [c // width for c in range(len(free))], [c % width for c in range(len(free))]
    offsets = (-width, 1, width, -1)  # up, right, down, left in row-major cell numbers
    best_score, best = 0, None
    # (player, box cells, boxes on targets, displacement, box changes, last pulled box) where a walk starts
    start = (player, list(targets), len(targets), 0, 0, -1)
    for _ in range(walks):
        position, box_cell, covered, displacement, swaps, last = start
        box_cell = list(box_cell)
        box_at = [-1] * len(free)  # which box stands on each cell
        for b, cell in enumerate(box_cell):
            box_at[cell] = b
        moves, pulls = rng.integers(4, size=steps).tolist(), (rng.random(steps) < p_pull).tolist()
        for move, pull in zip(moves, pulls):
            offset = offsets[move]
            ahead = position + offset  # floor never touches the border, so neighbours stay in the grid
            if not free[ahead] or box_at[ahead] >= 0:
                continue
            behind = position - offset
            b = box_at[behind]
            if pull and b >= 0:  # the box follows the player: the reverse of pushing it from `ahead`
                box_at[behind], box_at[position], box_cell[b] = -1, b, position
                covered += is_target[position] - is_target[behind]
                t = targets[b]
                displacement += (abs(rows[position] - rows[t]) + abs(cols[position] - cols[t])
                                 - abs(rows[behind] - rows[t]) - abs(cols[behind] - cols[t]))
                if b != last:
                    swaps, last = swaps + 1, b
            position = ahead
            if covered == 0 and displacement >= min_displacement and swaps * displacement > best_score:
                best_score, best = swaps * displacement, (position, list(box_cell))
                start = (position, box_cell.copy(), covered, displacement, swaps, last)
    return best


def generated_set(n: int, room_size: int = GRID_SIZE, num_boxes: int = 4, seed: int = 0, size: int = GRID_SIZE,
                  **settings) -> LevelSet:
    """`generate_levels` padded to size×size, as a `LevelSet` whose provenance is the generator call."""
    levels = pad_to(generate_levels(n, room_size, num_boxes, seed, **settings), size)
    call = f"generated(room_size={room_size}, num_boxes={num_boxes}, seed={seed}" + \
        "".join(f", {k}={v!r}" for k, v in sorted(settings.items())) + ")"
    return LevelSet(levels, f"{n} levels {call}", (call,), np.zeros(n, np.int32), np.arange(n, dtype=np.int32))
