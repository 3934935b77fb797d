"""The search: which configurations to measure next.

* ``grid``: every valid configuration in id order (the baseline a search must beat);
* ``random``: valid configurations in a random order;
* ``anneal``: simulated annealing on *measured* cycles, no model — one chain per slot of a
  batch, each proposing a neighbour (one knob changed) that is accepted by the Metropolis
  rule at a temperature falling to zero over the trials;
* ``xgb``: a cost model (:mod:`.model`) refitted on every measured configuration (and on
  the records of other shapes given as ``transfer``) after each batch; simulated
  annealing over its predictions — parallel chains that persist from batch to batch —
  ranks the configurations it saw by predicted cycles (equal predictions in a random
  order), and the batch is picked from the ``pool`` times as many ranked first, one by
  one, trading rank against knob values the batch does not hold yet (as AutoTVM's
  submodular pick), so that a batch does not spend itself on one region the model
  cannot yet tell apart.  An epsilon of each batch, and the whole first batch (before
  the model has data), is picked *spread*: of 32 random unmeasured configurations, the
  one whose knob values the trials so far hold least, so that the model sees every
  knob's values early and where it is wrong later.  A configuration that ran past the
  cycle budget is learnt as no more efficient than the least efficient one measured.
  With ``model="numpy"`` (or without XGBoost) the same search runs on the numpy ridge
  model.

Every choice draws from one ``numpy.random.Generator``: the same seed picks the same
configurations.  No tuner returns an invalid or an already measured configuration.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Collection, Sequence

import numpy as np

from .features import features, roofline_cycles, target
from .cost_model import CostModel, cost_model
from .space import Space

__all__ = ["TUNERS", "Tuner", "make_tuner"]

#: The tuners :func:`make_tuner` knows.
TUNERS = ("xgb", "anneal", "random", "grid")


class Tuner(ABC):
    """Proposes batches of valid, unmeasured configuration ids; learns from their cycles."""

    def __init__(self, space: Space, rng: np.random.Generator) -> None:
        self.space = space
        self.rng = rng
        self.valid = space.valid_indices()
        self.valid_set = frozenset(self.valid)
        self.measured: set[int] = set()

    @abstractmethod
    def next_batch(self, size: int) -> list[int]:
        """Up to ``size`` valid configuration ids not measured yet (fewer: the space is done)."""

    def update(self, indices: Sequence[int], cycles: Sequence[float | None],
               timeouts: Collection[int] = ()) -> None:
        """``cycles`` of each id of the batch (None: it could not be measured; the ids in
        ``timeouts`` ran past the cycle budget, which their ``cycles`` give)."""
        self.measured.update(indices)

    def _random_unmeasured(self, count: int, taken: set[int]) -> list[int]:
        left = [i for i in self.valid if i not in self.measured and i not in taken]
        if not left:
            return []
        picks = self.rng.choice(len(left), size=min(count, len(left)), replace=False)
        return [left[int(p)] for p in picks]

    def _digits(self, index: int) -> list[int]:
        """The value position of each knob in configuration ``index`` (the first knob varies fastest)."""
        digits = []
        for knob in self.space.knobs:
            index, digit = divmod(index, len(knob.values))
            digits.append(digit)
        return digits

    def _spread_unmeasured(self, count: int, taken: set[int], candidates: int = 32) -> list[int]:
        """``count`` valid unmeasured configurations spread over the knobs' values: each pick is,
        of ``candidates`` drawn at random, the one whose values the configurations measured and
        picked so far hold the least (each knob's count scaled by its number of values)."""
        left = [i for i in self.valid if i not in self.measured and i not in taken]
        sizes = np.array([len(k.values) for k in self.space.knobs], dtype=np.float64)
        counts = [np.zeros(len(k.values)) for k in self.space.knobs]
        for index in [*self.measured, *taken]:
            for knob, digit in enumerate(self._digits(index)):
                counts[knob][digit] += 1
        picks: list[int] = []
        while left and len(picks) < count:
            drawn = self.rng.choice(len(left), size=min(candidates, len(left)), replace=False)
            scores = [sum(counts[k][d] * sizes[k] for k, d in enumerate(self._digits(left[int(j)])))
                      for j in drawn]
            pick = left.pop(int(drawn[int(np.argmin(scores))]))
            for knob, digit in enumerate(self._digits(pick)):
                counts[knob][digit] += 1
            picks.append(pick)
        return picks

    def _neighbour(self, index: int) -> int:
        """``index`` with one knob moved to another of its values (a valid one if 16 tries find it)."""
        knobs = self.space.knobs
        for _ in range(16):
            which = int(self.rng.integers(len(knobs)))
            radix = math.prod(len(k.values) for k in knobs[:which])
            digit = (index // radix) % len(knobs[which].values)
            if len(knobs[which].values) < 2:
                continue
            other = int(self.rng.integers(len(knobs[which].values) - 1))
            other += other >= digit
            candidate = index + (other - digit) * radix
            if candidate in self.valid_set:
                return candidate
        return index


class GridTuner(Tuner):
    def next_batch(self, size: int) -> list[int]:
        return [i for i in self.valid if i not in self.measured][:size]


class RandomTuner(Tuner):
    def __init__(self, space: Space, rng: np.random.Generator) -> None:
        super().__init__(space, rng)
        self.order = [self.valid[int(i)] for i in rng.permutation(len(self.valid))]

    def next_batch(self, size: int) -> list[int]:
        return [i for i in self.order if i not in self.measured][:size]


class AnnealTuner(Tuner):
    """Simulated annealing on measured log-cycles (see the module docstring)."""

    def __init__(self, space: Space, rng: np.random.Generator, trials: int, temperature: float = 0.1) -> None:
        super().__init__(space, rng)
        self.trials, self.temperature = trials, temperature
        self.chains: list[tuple[int, float] | None] = []
        self.proposed: list[int] = []

    def next_batch(self, size: int) -> list[int]:
        self.chains += [None] * (size - len(self.chains))
        batch: list[int] = []
        for state in self.chains[:size]:
            pick = None
            if state is not None:
                for _ in range(8):
                    candidate = self._neighbour(state[0])
                    if candidate not in self.measured and candidate not in batch:
                        pick = candidate
                        break
            if pick is None:
                found = self._random_unmeasured(1, set(batch))
                if not found:
                    break
                pick = found[0]
            batch.append(pick)
        self.proposed = batch
        return batch

    def update(self, indices: Sequence[int], cycles: Sequence[float | None],
               timeouts: Collection[int] = ()) -> None:
        super().update(indices, cycles, timeouts)
        heat = self.temperature * max(0.0, 1.0 - len(self.measured) / self.trials)
        for slot, (index, value) in enumerate(zip(indices, cycles)):
            if slot >= len(self.chains) or value is None:
                continue
            state, cost = self.chains[slot], math.log(value)
            if state is None or cost <= state[1] or (
                    heat > 0 and self.rng.random() < math.exp((state[1] - cost) / heat)):
                self.chains[slot] = (index, cost)


class ModelTuner(Tuner):
    """A cost model and simulated annealing over its predictions (see the module docstring)."""

    def __init__(self, space: Space, rng: np.random.Generator, model: CostModel, *, chains: int = 16,
                 steps: int = 32, epsilon: float = 0.1, transfer: tuple[np.ndarray, np.ndarray] | None = None,
                 min_samples: int = 8, pool: int = 2, knob_weight: float = 1.0) -> None:
        super().__init__(space, rng)
        self.model, self.steps, self.epsilon, self.min_samples = model, steps, epsilon, min_samples
        self.pool, self.knob_weight = pool, knob_weight
        self.x: list[np.ndarray] = []
        self.y: list[float] = []
        self.timed_out: list[bool] = []
        self.transfer = transfer
        self.chains = self._random_unmeasured(chains, set()) if self.valid else []
        self.batches = 0
        self._features: dict[int, np.ndarray] = {}
        self._roofline: dict[int, float] = {}

    def _feature(self, index: int) -> np.ndarray:
        if index not in self._features:
            s, knobs = self.space, self.space.get(index)
            self._features[index] = features(s.operator, s.cfg, s.params, knobs)
            self._roofline[index] = roofline_cycles(s.operator, s.cfg, s.params, knobs)
        return self._features[index]

    def _predict(self, indices: Sequence[int]) -> np.ndarray:
        x = np.stack([self._feature(i) for i in indices])
        return self.model.predict(x) + np.log([self._roofline[i] for i in indices])

    def update(self, indices: Sequence[int], cycles: Sequence[float | None],
               timeouts: Collection[int] = ()) -> None:
        super().update(indices, cycles, timeouts)
        for index, value in zip(indices, cycles):
            if value is not None:
                self.x.append(self._feature(index))
                self.y.append(target(value, self._roofline[index]))
                self.timed_out.append(index in timeouts)

    def _targets(self) -> list[float]:
        """The targets, a timeout's (its cycles are the budget, a lower bound) raised to the
        largest target of the configurations measured within the budget: the budget of a small
        tile can lie below its roofline bound, and as ``log(budget / roofline) < 0`` the model
        would learn that region as faster than its bound, faster than any other."""
        worst = max((y for y, out in zip(self.y, self.timed_out) if not out), default=None)
        if worst is None:
            return list(self.y)
        return [max(y, worst) if out else y for y, out in zip(self.y, self.timed_out)]

    def _fit(self) -> bool:
        x, y = list(self.x), self._targets()
        if self.transfer is not None:
            x += list(self.transfer[0])
            y += list(self.transfer[1])
        if len(y) < self.min_samples:
            return False
        self.model.fit(np.stack(x), np.asarray(y))
        return True

    def _anneal(self) -> dict[int, float]:
        """Walk the chains ``steps`` steps over the predictions; every point seen, scored."""
        seen = dict(zip(self.chains, self._predict(self.chains)))
        heat = max(0.02, 0.5 * 0.8 ** self.batches)
        for _ in range(self.steps):
            proposals = [self._neighbour(i) for i in self.chains]
            scores = self._predict(proposals)
            for slot, (index, score) in enumerate(zip(proposals, scores)):
                seen[index] = float(score)
                old = seen[self.chains[slot]]
                if score <= old or self.rng.random() < math.exp((old - score) / heat):
                    self.chains[slot] = index
        return seen

    def _diverse(self, ranked: list[int], count: int) -> list[int]:
        """``count`` of ``ranked`` (the predicted fastest first), picked one by one as the best
        trade of rank against knob values the picks so far lack (as AutoTVM's submodular pick):
        ``knob_weight`` times the share of knobs whose value is new to the batch against the
        share of ``ranked`` the candidate lies behind the first."""
        picks: list[int] = []
        held: list[set[int]] = [set() for _ in self.space.knobs]
        left = [(rank / len(ranked), i, self._digits(i)) for rank, i in enumerate(ranked)]
        while left and len(picks) < count:
            gains = [self.knob_weight * sum(d not in held[k] for k, d in enumerate(digits)) / len(held) - behind
                     for behind, _, digits in left]
            _, pick, digits = left.pop(int(np.argmax(gains)))  # ties: the higher ranked
            picks.append(pick)
            for k, d in enumerate(digits):
                held[k].add(d)
        return picks

    def next_batch(self, size: int) -> list[int]:
        self.batches += 1
        if not self.chains or not self._fit():
            return self._spread_unmeasured(size, set())
        seen = self._anneal()
        explore = min(size, int(round(self.epsilon * size)))
        left = [(score, i) for i, score in seen.items() if i not in self.measured]
        ties = self.rng.permutation(len(left))  # equal predictions: in a random order, not by id
        ranked = sorted(zip(left, ties), key=lambda item: (item[0][0], item[1]))
        batch = self._diverse([i for (_, i), _ in ranked[:(size - explore) * self.pool]], size - explore)
        return batch + self._spread_unmeasured(size - len(batch), set(batch))


def make_tuner(name: str, space: Space, *, seed: int, trials: int, model: str = "auto",
               transfer: tuple[np.ndarray, np.ndarray] | None = None) -> Tuner:
    """The tuner ``name`` (one of :data:`TUNERS`) over ``space``, drawing from ``seed``.

    Raises
    ------
    ValueError
        ``"tuner must be one of xgb, anneal, random, grid, not 'bayes'"``.
    """
    rng = np.random.default_rng(seed)
    if name == "grid":
        return GridTuner(space, rng)
    if name == "random":
        return RandomTuner(space, rng)
    if name == "anneal":
        return AnnealTuner(space, rng, trials)
    if name == "xgb":
        return ModelTuner(space, rng, cost_model(model, seed), transfer=transfer)
    raise ValueError(f"tuner must be one of {', '.join(TUNERS)}, not {name!r}")
