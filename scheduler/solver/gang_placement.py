"""CP-SAT gang placement over topology layers: MustGather, PreferGather, podCountMultiple, scores.

Problem: give every member of a gang a node so that no node is overcommitted, every member sits
on a node that passed Filter for it, MustGather layers hold the gang in one domain and every
domain of a layer with podCountMultiple k holds a multiple of k members; among those placements,
minimise lexicographically the number of domains used at each PreferGather layer (nearest layer
to the nodes first), then maximise the sum of node scores over the members.

Formulation (design.md, "Gangs are placed as a whole"):

* Counting first. `aggregate` folds identical pods into pod classes g and identical nodes (same
  free vector, path, feasibility and score) into node classes c of multiplicity m_c.
  `explain.diagnose` refutes by counting what counting can refute (capacity, multiples,
  MustGather). Candidate domains are decided by counting too: if some domain of the nearest
  PreferGather layer can hold the whole gang, the optimum uses exactly one such domain, so each
  of those domains is a candidate; otherwise the candidates are the MustGather domains that can
  hold the gang, or the whole cluster. One small model is solved per candidate, candidates in
  order of a counting lower bound on their objective, and a candidate whose bound cannot beat
  the best answer so far is pruned without a solve.
* Variables: ``x[c, g]`` integer, members of pod class g on the nodes of class c. No variable
  per member or per node: a 1,024-member gang on 5,000 nodes is a few hundred integers.
* Capacity is per node. A class with one pod class fitting is bounded by ``m_c * cap(c, g)``.
  A class where several pod classes fit counts its nodes per maximal packing pattern p,
  ``y[c, p]`` with ``sum_p y[c, p] <= m_c`` and ``x[c, g] <= sum_p k[p, g] * y[c, p]``, which is
  exact; a node with too many patterns is a class of its own and gets one linear constraint per
  resource instead.
* Topology: per domain d below the candidate, ``n_d`` = members inside. PreferGather layers get
  ``used[d]`` with ``n_d <= bound_d * used[d]``; layers with podCountMultiple k get
  ``n_d = k * z[d]``.
* Objective: one weighted sum whose weights provably dominate: each term's weight exceeds the
  whole range of every later term, so minimising the sum is minimising the tuple
  (domains used per PreferGather layer nearest first, minus the weighted score).
* Apart: members under a required pod anti-affinity rule among themselves (``Apart``) number at
  most one per domain of the rule's label: node classes are folded per domain, and one linear
  constraint per domain bounds the sum of their ``x``.
* Ranks: members of a class are laid onto the chosen nodes in rank order along the topology
  (path, then node name), so consecutive ranks share the lowest domain except at the fewest
  boundaries that the chosen domain counts allow; minimising domains at the nearest layer is
  what keeps pipeline neighbours close.
* Score by counting (`_ScoreTerm`, `score_bound`): once the domain counts are decided, the score
  is bounded by counting (Lagrangian over the k best domains, and per member class), and where the
  counts are the whole answer (one member class, no podCountMultiple, apart or spread rule) a
  counting plan reaches the domain bound; an exact programme over the domains closes a remaining
  gap. Within ``SolveOptions.relative_gap`` of the bound the plan is the answer and no model is
  built; otherwise the bound is a redundant constraint and the solve stops within the gap.
* Search: Koordinator's greedy plan (`greedy.plan`) on the candidate is the complete hint; the
  time limit covers all candidates together; seed and worker count are fixed and the search is
  interleaved, so the same input gives the same plan. FEASIBLE is accepted. If no CP-SAT solve
  returns a solution in time, the greedy placement is returned as GREEDY_FALLBACK (the caller
  counts it; ``on_fallback`` is called too). A proven infeasibility is explained with
  assumptions (one literal per pod class demand and per podCountMultiple layer) and
  ``sufficient_assumptions_for_infeasibility``.
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable, Mapping

from ortools.sat.python import cp_model
from ortools.sat.python.cp_model import CpSolverStatus

from scheduler.solver import explain, greedy
from scheduler.solver.aggregate import Aggregate, DomainCapacity, NodeClass, aggregate
from scheduler.solver.gap import relative_gap
from scheduler.solver.problem import (
    Infeasible,
    ModelSize,
    PlacementProblem,
    Plan,
    PlanStatus,
    TopologyLayer,
    domain_key,
    domains_used,
    objective,
    spread_violations,
    violations,
)
from scheduler.solver.score_bound import DomainSlots, best_choice, exact_choice, score_upper_bound

__all__ = ["solve_cpsat"]

Domain = tuple[str, ...]
Objective = tuple[int, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Outcome:
    status: str  # OPTIMAL | FEASIBLE | INFEASIBLE | UNKNOWN
    assignment: dict[str, str] | None
    variables: int
    constraints: int
    core: tuple[str, ...] = ()
    gap: float | None = 0.0


class _Context:
    """Problem-wide data shared by the candidate models."""

    def __init__(self, problem: PlacementProblem) -> None:
        self.problem = problem
        self.agg: Aggregate = aggregate(problem)
        self.cap = DomainCapacity.build(problem, self.agg)
        self.counts = tuple(pc.count for pc in self.agg.pod_classes)
        self.total = problem.member_count
        self.class_of_group = {gi: pc.index for pc in self.agg.pod_classes for gi in pc.groups}
        members = greedy.members_in_rank_order(problem)
        self.members_by_class: dict[int, list[str]] = defaultdict(list)
        for member, gi in members:
            self.members_by_class[self.class_of_group[gi]].append(member)
        self.class_of_member = {m: self.class_of_group[gi] for m, gi in members}
        self.path_of = {n.name: n.path for n in problem.nodes}

        self._classes_in: dict[Domain, list[NodeClass]] = defaultdict(list)
        for c in self.agg.node_classes:
            for depth in range(len(c.path) + 1):
                self._classes_in[c.path[:depth]].append(c)

    def classes_in(self, cand: Domain) -> list[NodeClass]:
        return self._classes_in.get(cand, [])

    def lower_bound(self, cand: Domain) -> Objective:
        """Componentwise lower bound of the objective of any placement inside ``cand``."""
        bounds: list[int] = []
        for i in self.problem.prefer_gather_order:
            if i < len(cand):
                bounds.append(1)
                continue
            keys = [k for k in self.cap.holds if len(k) == i + 1 and k[: len(cand)] == cand]
            need = 0
            for which in range(-1, len(self.counts)):
                if which < 0:
                    sizes, want = [self.cap.holds[k] for k in keys], self.total
                else:
                    sizes, want = [self.cap.per_class[k][which] for k in keys], self.counts[which]
                sizes.sort(reverse=True)
                got, used = 0, 0
                while got < want and used < len(sizes):
                    got += sizes[used]
                    used += 1
                need = max(need, used)
            bounds.append(need)
        best = 0
        classes = sorted(self.classes_in(cand), key=lambda c: -c.score)
        for pc in self.agg.pod_classes:
            left = pc.count
            for c in classes:
                take = min(left, c.caps[pc.index] * c.multiplicity)
                best += take * c.score
                left -= take
                if left == 0:
                    break
        bounds.append(-self.problem.options.score_weight * best)
        return tuple(bounds)


@dataclasses.dataclass(frozen=True)
class _ScoreTerm:
    """The score term of one candidate, by counting (`score_bound`)."""

    ctx: _Context
    positions: tuple[int, ...]
    """Positions in the objective of the PreferGather layers modelled inside the candidate."""
    bound: Objective
    domains: tuple[DomainSlots, ...]
    k: int | None
    one_parent: bool
    plan: dict[str, str] | None
    per_class: tuple[tuple[tuple[DomainSlots, ...], int], ...] = ()
    """Each pod class's own slots (per-node capacity for it alone) and member count, when there
    are several: the sum of their bounds is a second relaxation, tighter when the classes pack
    differently (a class that fits eight to a node inflates the shared slots)."""

    @staticmethod
    def of(ctx: _Context, cand: Domain, bound: Objective, classes: list[NodeClass]) -> _ScoreTerm:
        problem = ctx.problem
        order = problem.prefer_gather_order
        positions = tuple(pos for pos, i in enumerate(order) if i >= len(cand))
        slots = {c.index: c.multiplicity * min(c.max_pods_per_node, ctx.total) for c in classes}
        k: int | None = None
        one_parent = False
        depth = len(problem.layers)
        parent = -1
        if positions:
            nearest = order[positions[0]]
            depth, k = nearest + 1, bound[positions[0]]
            parent = nearest - 1
            one_parent = parent < len(cand) or (parent in order and bound[order.index(parent)] == 1)
        domains = tuple(DomainSlots.of(classes, depth, slots))
        per_class: tuple[tuple[tuple[DomainSlots, ...], int], ...] = ()
        if len(ctx.agg.pod_classes) > 1:
            per_class = tuple(
                (
                    tuple(
                        DomainSlots.of(
                            classes, depth, {c.index: c.multiplicity * c.caps[pc.index] for c in classes}
                        )
                    ),
                    pc.count,
                )
                for pc in ctx.agg.pod_classes
            )
        term = _ScoreTerm(ctx, positions, bound, domains, k, one_parent, None, per_class)
        if k is not None and one_parent and parent >= len(cand) and not term._one_parent_holds():
            # No parent's k roomiest domains hold the gang (slots overstate what fits, so this
            # is proven): with k domains (the nearest layer ranks first) the layer above uses at
            # least two.
            raised = list(bound)
            raised[order.index(parent)] = 2
            term = dataclasses.replace(term, bound=tuple(raised), one_parent=False)
        return dataclasses.replace(term, plan=term._counting_plan(classes))

    def _one_parent_holds(self) -> bool:
        """Whether the k roomiest domains under some one parent have slots for every member."""
        assert self.k is not None
        by_parent: dict[Domain, list[int]] = defaultdict(list)
        for d in self.domains:
            by_parent[d.domain[:-1]].append(d.capacity)
        return any(sum(sorted(caps, reverse=True)[: self.k]) >= self.ctx.total for caps in by_parent.values())

    def decided(self, reference: Objective | None) -> bool:
        """Whether ``reference`` reaches the counting bound of every modelled domain count."""
        return reference is not None and all(reference[p] == self.bound[p] for p in self.positions)

    def upper_bound(self, reference: Objective | None) -> int | None:
        """The most a plan can score once the domain counts are decided (None: not decided)."""
        if not self.decided(reference):
            return None
        shared = score_upper_bound(self.domains, self.ctx.total, self.k, one_parent=self.one_parent)
        if not self.per_class:
            return shared
        apart = sum(score_upper_bound(d, n, self.k, one_parent=self.one_parent) for d, n in self.per_class)
        return min(shared, apart)

    def score(self, assignment: Mapping[str, str]) -> int:
        return sum(self.ctx.problem.score(node) for node in assignment.values())

    def exact(self, classes: list[NodeClass]) -> tuple[dict[str, str] | None, int] | None:
        """The best choice of k domains by `exact_choice`: its plan where the counts are the
        whole answer, and its score, the most any plan with the decided counts can score (None:
        the programme would be too big)."""
        if self.k is None:
            return None
        found = exact_choice(self.domains, self.ctx.total, self.k, one_parent=self.one_parent)
        if found is None:
            return None
        plan = self._fill(classes, set(found[0])) if self._counts_are_the_answer() else None
        return plan, found[1]

    def _counts_are_the_answer(self) -> bool:
        """One pod class and no podCountMultiple, apart or spread rule: the members per node
        class say everything about a placement."""
        problem = self.ctx.problem
        if len(self.ctx.agg.pod_classes) != 1 or problem.apart or problem.spread:
            return False
        return all(layer.pod_count_multiple == 1 for layer in problem.layers)

    def _counting_plan(self, classes: list[NodeClass]) -> dict[str, str] | None:
        """Where the counts are the whole answer: k domains reaching the count bound, their best
        slots filled."""
        if not self._counts_are_the_answer():
            return None
        if self.k is None:
            return self._fill(classes, {d.domain for d in self.domains})
        found = best_choice(self.domains, self.ctx.total, self.k, one_parent=self.one_parent)
        return None if found is None else self._fill(classes, set(found[0]))

    def _fill(self, classes: list[NodeClass], chosen: set[Domain]) -> dict[str, str] | None:
        """The best-scored nodes of the ``chosen`` domains, for every member (one pod class)."""
        ctx = self.ctx
        depth = len(self.domains[0].domain) if self.domains else 0
        left = ctx.total
        counts: dict[tuple[int, int], int] = {}
        for c in sorted(classes, key=lambda c: (-c.score, c.index)):
            if left == 0:
                break
            if c.path[:depth] in chosen and c.caps[0] > 0:
                take = min(left, c.multiplicity * c.caps[0])
                counts[c.index, 0] = take
                left -= take
        if left:
            return None
        return _layout(ctx, classes, counts, {})


def _candidate_tiers(ctx: _Context) -> list[list[Domain]]:
    problem = ctx.problem
    tiers: list[list[Domain]] = []
    order = problem.prefer_gather_order
    if order:
        nearest = order[0]
        keys = sorted(k for k in ctx.cap.per_class if len(k) == nearest + 1)
        fit = [k for k in keys if ctx.cap.can_hold(k, ctx.counts)]
        if fit:
            tiers.append(fit)
    must = problem.must_gather_index
    if must is not None:
        keys = sorted(k for k in ctx.cap.per_class if len(k) == must + 1)
        tiers.append([k for k in keys if ctx.cap.can_hold(k, ctx.counts)])
    else:
        tiers.append([()])
    return tiers


@dataclasses.dataclass(slots=True)
class _Start:
    """What counting leaves a candidate's model to start from."""

    bound: Objective
    hint: Mapping[str, str] | None
    decided: Objective | None
    score_bound: int | None


def _solve_candidate(
    ctx: _Context,
    cand: Domain,
    bound: Objective,
    hint: Mapping[str, str] | None,
    seconds: float,
    *,
    decided: Objective | None = None,
    explain_mode: bool = False,
) -> _Outcome:
    classes = ctx.classes_in(cand)
    start = _count_first(ctx, cand, classes, _Start(bound, hint, decided, None), explain_mode)
    if isinstance(start, _Outcome):
        return start
    built = _CandidateModel(ctx, cand, classes, explain_mode)
    built.add_variables()
    built.add_capacity()
    built.add_apart()
    built.add_demand()
    built.add_topology()
    # Topology spread (DoNotSchedule): a domain receiving a constrained member stays within
    # maxSkew of the least loaded domain after placement.
    built.assumptions.update(_add_spread(built.model, ctx, built.x, explain_mode))
    built.add_redundant(start)
    built.set_objective()
    # Hint: the greedy placement restricted to this candidate, every variable set.
    if start.hint is not None and not explain_mode:
        _add_hint(ctx, built.model, classes, built.x, built.y, built.used, built.z, start.hint)
    return built.solve(seconds)


def _count_first(
    ctx: _Context, cand: Domain, classes: list[NodeClass], start: _Start, explain_mode: bool
) -> _Start | _Outcome:
    """Counting: the score bound once the domain counts are decided, and where the counts are the
    whole answer, the plan that reaches the domain bound with the best score found. Within the
    relative gap of the bound, that plan is the answer (an outcome) and CP-SAT is not needed."""
    problem = ctx.problem
    counted = _ScoreTerm.of(ctx, cand, start.bound, classes)
    if not explain_mode and counted.plan is not None:
        plan_obj = objective(problem, counted.plan)
        if start.decided is None or plan_obj < start.decided:
            start.decided, start.hint = plan_obj, counted.plan
        nearest = len(problem.prefer_gather_order)
        if plan_obj[:nearest] == counted.bound[:nearest]:
            start.bound = counted.bound  # the raised bound holds: the plan reaches the nearest layer's
    start.score_bound = counted.upper_bound(start.decided)
    decided, hint, score_bound = start.decided, start.hint, start.score_bound
    if explain_mode or decided is None or hint is None or score_bound is None:
        return start
    gap = relative_gap(-counted.score(hint), -score_bound)
    exact = counted.exact(classes) if gap > problem.options.relative_gap else None
    if exact is not None:
        exact_plan, score_bound = exact[0], min(score_bound, exact[1])
        if exact_plan is not None and objective(problem, exact_plan) < decided:
            decided, hint = objective(problem, exact_plan), exact_plan
        gap = relative_gap(-counted.score(hint), -score_bound)
    if (
        counted.decided(decided)
        and gap <= problem.options.relative_gap
        and objective(problem, hint) == decided
    ):
        return _Outcome("OPTIMAL", dict(hint), 0, 0, gap=gap)
    start.decided, start.hint, start.score_bound = decided, hint, score_bound
    return start


class _CandidateModel:
    """One candidate's CP-SAT model, built section by section in the order ``_solve_candidate``
    calls them (the order of variables and constraints is part of what a seeded solve repeats)."""

    def __init__(self, ctx: _Context, cand: Domain, classes: list[NodeClass], explain_mode: bool) -> None:
        self.ctx, self.cand, self.classes, self.explain_mode = ctx, cand, classes, explain_mode
        self.problem, self.agg = ctx.problem, ctx.agg
        self.pods = ctx.agg.pod_classes
        self.model = cp_model.CpModel()
        self.x: dict[tuple[int, int], cp_model.IntVar] = {}
        """Members of pod class g on the nodes of class c, by (c, g)."""
        self.x_ub: dict[tuple[int, int], int] = {}
        self.y: dict[tuple[int, int], cp_model.IntVar] = {}
        """Nodes of class c packed with pattern p, by (c, p)."""
        self.used: dict[Domain, cp_model.IntVar] = {}
        self.z: dict[Domain, cp_model.IntVar] = {}
        self.domain_count: dict[int, cp_model.LinearExprT] = {}
        """PreferGather layer -> the domains used there."""
        self.assumptions: dict[str, cp_model.IntVar] = {}
        self.objective_layers: list[int] = []
        self.score_expr: cp_model.LinearExprT = 0
        self.terms: list[tuple[cp_model.LinearExprT, int]] = []

    def add_variables(self) -> None:
        for c in self.classes:
            for pc in self.pods:
                if c.caps[pc.index] > 0:
                    ub = min(pc.count, c.caps[pc.index] * c.multiplicity)
                    self.x_ub[c.index, pc.index] = ub
                    self.x[c.index, pc.index] = self.model.new_int_var(0, ub, f"x[{c.index},{pc.name}]")

    def add_capacity(self) -> None:
        """Each node class stays within its nodes' free resources, node by node."""
        model, x = self.model, self.x
        for c in self.classes:
            active = [pc for pc in self.pods if (c.index, pc.index) in x]
            if len(active) < 2:
                continue  # one pod class: the bound m_c * cap(c, g) on x is exact
            if not c.patterns:  # a single node with too many packings: one constraint per resource
                for r in range(len(self.problem.resources)):
                    if any(pc.request.values[r] for pc in active):
                        model.add(
                            sum(pc.request.values[r] * x[c.index, pc.index] for pc in active)
                            <= c.free.values[r]
                        )
                continue
            for p, _ in enumerate(c.patterns):
                self.y[c.index, p] = model.new_int_var(0, c.multiplicity, f"y[{c.index},{p}]")
            model.add(sum(self.y[c.index, p] for p in range(len(c.patterns))) <= c.multiplicity)
            for pc in active:
                model.add(
                    x[c.index, pc.index]
                    <= sum(
                        pat[pc.index] * self.y[c.index, p]
                        for p, pat in enumerate(c.patterns)
                        if pat[pc.index]
                    )
                )

    def add_apart(self) -> None:
        """Members kept apart (required pod anti-affinity among them): at most one per domain. Node
        classes never straddle a domain (``aggregate`` folds on it), so a domain is a set of classes."""
        for rule in range(len(self.problem.apart)):
            in_domain: dict[str, list[cp_model.IntVar]] = defaultdict(list)
            for (ci, g), var in self.x.items():
                domain = self.agg.node_classes[ci].domains[rule]
                if domain is not None and rule in self.pods[g].apart:
                    in_domain[domain].append(var)
            for members in in_domain.values():
                self.model.add(sum(members) <= 1)

    def add_demand(self) -> None:
        """Every member of every pod class is placed (one assumption literal per class when explaining)."""
        x = self.x
        for pc in self.pods:
            demand = self.model.add(sum(x[k] for k in x if k[1] == pc.index) == pc.count)
            if self.explain_mode:
                lit = self.model.new_bool_var(f"demand[{pc.name}]")
                demand.only_enforce_if(lit)
                self.assumptions[f"group:{pc.name}"] = lit

    def add_topology(self) -> None:
        """Members per domain below the candidate: used flags for PreferGather, multiples where asked."""
        members_in: dict[Domain, list[cp_model.IntVar]] = defaultdict(list)
        for depth in range(len(self.cand) + 1, len(self.problem.layers) + 1):
            for (ci, _g), var in self.x.items():
                members_in[self.agg.node_classes[ci].path[:depth]].append(var)
        for i in range(len(self.cand), len(self.problem.layers)):
            keys = sorted(k for k in members_in if len(k) == i + 1)
            if i in self.problem.prefer_gather_order:
                self._add_used(keys, members_in)
                self.domain_count[i] = sum(self.used[k] for k in keys)
            self._add_multiples(self.problem.layers[i], keys, members_in)

    def _add_used(self, keys: list[Domain], members_in: Mapping[Domain, list[cp_model.IntVar]]) -> None:
        ctx = self.ctx
        for key in keys:
            self.used[key] = self.model.new_bool_var(f"used[{'/'.join(key)}]")
            cap_d = min(ctx.total, ctx.cap.holds.get(key, ctx.total))
            self.model.add(sum(members_in[key]) <= cap_d * self.used[key])

    def _add_multiples(
        self, layer: TopologyLayer, keys: list[Domain], members_in: Mapping[Domain, list[cp_model.IntVar]]
    ) -> None:
        k_mult = layer.pod_count_multiple
        if k_mult <= 1:
            return
        model = self.model
        mult_lit = model.new_bool_var(f"multiple[{layer.name}]") if self.explain_mode else None
        for key in keys:
            self.z[key] = model.new_int_var(0, self.ctx.total // k_mult, f"z[{'/'.join(key)}]")
            ct = model.add(sum(members_in[key]) == k_mult * self.z[key])
            if mult_lit is not None:
                ct.only_enforce_if(mult_lit)
        if mult_lit is not None:
            self.assumptions[f"multiple:{layer.name}"] = mult_lit

    def add_redundant(self, start: _Start) -> None:
        """Redundant: a member sits in a used domain at the nearest PreferGather layer, class by class
        (a much tighter relaxation than the per-domain bound alone), and a used domain's parent is
        used; the counting lower bound on domains used at each PreferGather layer (where the answer
        in hand already reaches that bound, the term is decided by counting: fixed)."""
        model, problem, used = self.model, self.problem, self.used
        modelled = [i for i in problem.prefer_gather_order if i in self.domain_count]
        if modelled:
            nearest = modelled[0]
            for (ci, g), var in self.x.items():
                model.add(var <= self.x_ub[ci, g] * used[self.agg.node_classes[ci].path[: nearest + 1]])
            for key in used:
                parent = key[:-1]
                if parent in used:
                    model.add_implication(used[key], used[parent])
        deciding = True
        for pos, i in enumerate(problem.prefer_gather_order):
            if i not in self.domain_count:
                continue
            if deciding and start.decided is not None and start.decided[pos] == start.bound[pos]:
                model.add(self.domain_count[i] == start.bound[pos])
            else:
                deciding = False
                model.add(self.domain_count[i] >= start.bound[pos])
                self.objective_layers.append(i)
        x, classes = self.x, self.agg.node_classes
        self.score_expr = sum(c.score * x[c.index, g] for (ci, g) in x for c in (classes[ci],) if c.score)
        if deciding and start.score_bound is not None and not isinstance(self.score_expr, int):
            model.add(
                self.score_expr <= start.score_bound
            )  # redundant: the counting bound CP-SAT cannot find

    def set_objective(self) -> None:
        """Domains used per PreferGather layer (nearest first), then minus the score sum, with each
        weight larger than the whole range of the terms after it."""
        options, terms = self.problem.options, self.terms
        for i in self.objective_layers:
            terms.append((self.domain_count[i], len([k for k in self.used if len(k) == i + 1])))
        if options.score_weight and not isinstance(self.score_expr, int):
            terms.append(
                (-options.score_weight * self.score_expr, options.score_weight * 100 * self.ctx.total)
            )
        if terms and not self.explain_mode:
            weight, weights = 1, []
            for _, span in reversed(terms):
                weights.append(weight)
                weight = weight * (span + 1)
            weights.reverse()
            self.model.minimize(sum(w * expr for w, (expr, _) in zip(weights, terms, strict=True)))

    def solve(self, seconds: float) -> _Outcome:
        options, explain_mode, model = self.problem.options, self.explain_mode, self.model
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = max(seconds, 0.001)
        solver.parameters.num_workers = 1 if explain_mode else max(options.workers, 1)
        solver.parameters.random_seed = options.seed
        if options.workers > 1 and not explain_mode:
            solver.parameters.interleave_search = True
        score_only = not self.objective_layers
        if score_only and not explain_mode:
            # Only the score is left to optimise: stop within the tolerated gap of the bound.
            solver.parameters.relative_gap_limit = options.relative_gap
        if explain_mode:
            model.add_assumptions(list(self.assumptions.values()))
        # relative_gap_limit is checked between the interleaved search's batches, which keeps the
        # answer deterministic (a solution callback stopping mid-batch would not).
        status = solver.solve(model)
        if status == cp_model.MODEL_INVALID:  # a bug here, not a hard problem: never hide it
            raise AssertionError(f"invalid placement model: {model.validate()}")
        return self._outcome(solver, status, score_only)

    def _outcome(self, solver: cp_model.CpSolver, status: CpSolverStatus, score_only: bool) -> _Outcome:
        n_vars, n_cons = len(self.model.proto.variables), len(self.model.proto.constraints)
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            counts = {k: solver.value(v) for k, v in self.x.items()}
            patterns = {k: solver.value(v) for k, v in self.y.items()}
            assignment = _layout(self.ctx, self.classes, counts, patterns)
            found_gap: float | None = None
            if self.explain_mode or not self.terms:
                found_gap = 0.0
            elif score_only:
                found_gap = relative_gap(solver.objective_value, solver.best_objective_bound)
            elif status == cp_model.OPTIMAL:
                found_gap = 0.0
            found = "OPTIMAL" if status == cp_model.OPTIMAL else "FEASIBLE"
            return _Outcome(found, assignment, n_vars, n_cons, gap=found_gap)
        if status == cp_model.INFEASIBLE:
            core: tuple[str, ...] = ()
            if self.explain_mode:
                names = {v.index: name for name, v in self.assumptions.items()}
                core = tuple(sorted(names[i] for i in solver.sufficient_assumptions_for_infeasibility()))
            return _Outcome("INFEASIBLE", None, n_vars, n_cons, core)
        return _Outcome("UNKNOWN", None, n_vars, n_cons)


def _add_spread(
    model: cp_model.CpModel,
    ctx: _Context,
    x: dict[tuple[int, int], cp_model.IntVar],
    explain_mode: bool,
) -> dict[str, cp_model.IntVar]:
    """Per spread constraint: count(d) = existing(d) + matching members placed in d; ``low`` is
    an integer at most every count, and a domain holding a constrained member has
    ``count(d) - low <= maxSkew``. ``low`` need not equal the minimum: the minimum is at least
    ``low``, so a placement satisfying these satisfies the rule with the true minimum, and the
    true minimum is one such ``low``. With fewer domains than minDomains the minimum is 0.
    Returns the assumption literals (explain mode)."""
    problem, agg = ctx.problem, ctx.agg
    literals: dict[str, cp_model.IntVar] = {}
    first = {pc.index: problem.pod_groups[pc.groups[0]].member_ids[0] for pc in agg.pod_classes}
    for spread in problem.spread:
        constrained = {g for g, m in first.items() if m in spread.constrained}
        if not constrained:
            continue
        matching = {g for g, m in first.items() if m in spread.matching}
        domains = sorted(set(spread.domains.values()))
        counted: dict[str, list[cp_model.IntVar]] = defaultdict(list)
        receiving: dict[str, list[cp_model.IntVar]] = defaultdict(list)
        for (ci, g), var in x.items():
            domain = spread.domains.get(agg.node_classes[ci].nodes[0])
            if domain is None:
                continue
            if g in matching:
                counted[domain].append(var)
            if g in constrained:
                receiving[domain].append(var)
        count = {d: cp_model.LinearExpr.sum(counted[d]) + spread.existing.get(d, 0) for d in domains}
        low: cp_model.LinearExpr = cp_model.LinearExpr.constant(0)
        if domains and len(domains) >= spread.min_domains:
            top = max(spread.existing.values(), default=0) + ctx.total
            low = model.new_int_var(0, top, f"spread_low[{spread.name}]")
            for d in domains:
                model.add(low <= count[d])
        enforce = model.new_bool_var(f"spread[{spread.name}]") if explain_mode else None
        for d in domains:
            if not receiving[d]:
                continue
            holds = model.new_bool_var(f"spread_holds[{spread.name},{d}]")
            model.add(sum(receiving[d]) <= ctx.total * holds)
            model.add(count[d] - low <= spread.max_skew).only_enforce_if(
                [holds] if enforce is None else [holds, enforce]
            )
        if enforce is not None:
            literals[f"spread:{spread.name}"] = enforce
    return literals


def _add_hint(
    ctx: _Context,
    model: cp_model.CpModel,
    classes: list[NodeClass],
    x: dict[tuple[int, int], cp_model.IntVar],
    y: dict[tuple[int, int], cp_model.IntVar],
    used: dict[Domain, cp_model.IntVar],
    z: dict[Domain, cp_model.IntVar],
    hint: Mapping[str, str],
) -> None:
    class_of_node = {name: c for c in classes for name in c.nodes}
    per_node: dict[str, list[int]] = {}
    n_pods = len(ctx.agg.pod_classes)
    for member, node in hint.items():
        if node not in class_of_node:
            return  # the hint lies outside this candidate
        per_node.setdefault(node, [0] * n_pods)[ctx.class_of_member[member]] += 1
    xv: dict[tuple[int, int], int] = dict.fromkeys(x, 0)
    yv: dict[tuple[int, int], int] = dict.fromkeys(y, 0)
    for node, vec in per_node.items():
        c = class_of_node[node]
        for g, n in enumerate(vec):
            if n:
                xv[c.index, g] += n
        if c.patterns and sum(1 for g in range(n_pods) if (c.index, g) in x) > 1:
            for p, pat in enumerate(c.patterns):
                if all(a <= b for a, b in zip(vec, pat, strict=True)):
                    yv[c.index, p] += 1
                    break
    for k, var in x.items():
        model.add_hint(var, xv[k])
    for k, var in y.items():
        model.add_hint(var, yv[k])
    inside: dict[Domain, int] = defaultdict(int)
    for (ci, _g), n in xv.items():
        path = ctx.agg.node_classes[ci].path
        for depth in range(len(path) + 1):
            inside[path[:depth]] += n
    for key, var in used.items():
        model.add_hint(var, 1 if inside[key] > 0 else 0)
    for key, var in z.items():
        k_mult = ctx.problem.layers[len(key) - 1].pod_count_multiple
        model.add_hint(var, inside[key] // k_mult)


def _layout(
    ctx: _Context,
    classes: list[NodeClass],
    counts: Mapping[tuple[int, int], int],
    patterns: Mapping[tuple[int, int], int],
) -> dict[str, str]:
    """Turn class counts into one node per member: nodes of a class filled in name order, then
    each pod class's members laid in rank order along (path, node name)."""
    slots: dict[int, list[tuple[tuple[str, ...], str]]] = defaultdict(list)
    n_pods = len(ctx.agg.pod_classes)
    for c in classes:
        left = [counts.get((c.index, g), 0) for g in range(n_pods)]
        if not any(left):
            continue
        per_node: list[tuple[int, ...]]
        if any((c.index, p) in patterns for p in range(len(c.patterns))):
            per_node = [pat for p, pat in enumerate(c.patterns) for _ in range(patterns.get((c.index, p), 0))]
        elif c.multiplicity == 1:
            per_node = [tuple(left)]
        else:
            per_node = [c.caps] * c.multiplicity
        for name, pat in zip(c.nodes, per_node, strict=False):
            for g in range(n_pods):
                take = min(pat[g], left[g])
                left[g] -= take
                slots[g].extend([(c.path, name)] * take)
        if any(left):
            raise AssertionError(f"layout left members unplaced on node class {c.index}")
    assignment: dict[str, str] = {}
    for g, members in ctx.members_by_class.items():
        for member, (_, node) in zip(members, sorted(slots[g]), strict=True):
            assignment[member] = node
    return assignment


def solve_cpsat(
    problem: PlacementProblem, *, on_fallback: Callable[[PlacementProblem], None] | None = None
) -> Plan | Infeasible:
    """Place the gang with CP-SAT, the greedy plan as hint and as fallback."""
    start = time.perf_counter()
    if problem.member_count == 0:
        return _plan(problem, {}, "OPTIMAL", start, ModelSize())
    ctx = _Context(problem)
    reason = explain.diagnose(problem, ctx.agg, ctx.cap)
    if reason is not None:
        return dataclasses.replace(reason, solve_seconds=time.perf_counter() - start)
    greedy_assignment = greedy.plan(problem)
    if greedy_assignment is not None and spread_violations(problem, greedy_assignment):
        greedy_assignment = None  # Koordinator's greedy plan knows no topology spread
    search = _Search(ctx, greedy_assignment, start + problem.options.time_limit_seconds)
    for tier in _candidate_tiers(ctx):
        if search.run_tier(tier):
            break
    return search.answer(start, on_fallback)


class _Search:
    """The candidates tier by tier, in order of their lower bounds, each pruned when its bound
    cannot beat the answer in hand; the greedy plan is that answer until a solve beats it."""

    def __init__(self, ctx: _Context, greedy_assignment: dict[str, str] | None, deadline: float) -> None:
        self.ctx, self.problem, self.deadline = ctx, ctx.problem, deadline
        self.greedy = greedy_assignment
        self.best: dict[str, str] | None = greedy_assignment
        self.best_obj: Objective | None = (
            objective(self.problem, self.best) if self.best is not None else None
        )
        self.best_from_cpsat = False
        self.proved = True
        self.size = {"variables": 0, "constraints": 0, "candidates": 0, "solved": 0}
        self.infeasible_cands: list[Domain] = []
        self.gaps: list[float | None] = []

    def run_tier(self, tier: list[Domain]) -> bool:
        """Solve the tier's candidates; True when the search stops here (found, or not proven)."""
        ctx = self.ctx
        depth = len(tier[0]) if tier else 0
        home = None
        if self.greedy:
            homes = {domain_key(ctx.path_of[n], depth - 1) if depth else () for n in self.greedy.values()}
            home = next(iter(homes)) if len(homes) == 1 else None
        bounds = {cand: ctx.lower_bound(cand) for cand in tier}
        capacity = {cand: ctx.cap.holds.get(cand, 0) for cand in tier}
        ordered = sorted(tier, key=lambda d: (d != home, bounds[d], capacity[d], d))
        self.size["candidates"] += len(ordered)
        found_in_tier = self.best is not None and home is not None and home in bounds
        tier_proved = True
        for cand in ordered:
            if (
                self.best_obj is not None
                and bounds[cand] >= self.best_obj
                and (self.best_from_cpsat or cand != home)
            ):
                continue  # pruned: cannot beat the answer in hand
            remaining = self.deadline - time.perf_counter()
            if remaining <= 0.001:
                tier_proved = False
                break
            out = self._solve(cand, bounds[cand], home, remaining)
            if out.assignment is not None:
                found_in_tier = True
            if out.status != "OPTIMAL" and out.status != "INFEASIBLE":
                tier_proved = False
        self.proved = self.proved and tier_proved
        return found_in_tier or not tier_proved

    def _solve(self, cand: Domain, bound: Objective, home: Domain | None, remaining: float) -> _Outcome:
        """One candidate's solve, its answer kept when it beats the one in hand."""
        problem = self.problem
        hint: Mapping[str, str] | None = self.greedy if cand == home else None
        if hint is None:
            sub = dataclasses.replace(
                problem, nodes=tuple(n for n in problem.nodes if n.path[: len(cand)] == cand)
            )
            hint = greedy.plan(sub)
        out = _solve_candidate(self.ctx, cand, bound, hint, remaining, decided=self.best_obj)
        self.gaps.append(out.gap if out.status in ("OPTIMAL", "FEASIBLE") else None)
        self.size["variables"] += out.variables
        self.size["constraints"] += out.constraints
        self.size["solved"] += 1
        if out.assignment is not None:
            violated = violations(problem, out.assignment)
            if violated:
                raise AssertionError(f"CP-SAT plan breaks rules: {violated[:3]}")
            obj = objective(problem, out.assignment)
            if (
                self.best_obj is None
                or obj < self.best_obj
                or (obj == self.best_obj and not self.best_from_cpsat)
            ):
                self.best, self.best_obj, self.best_from_cpsat = out.assignment, obj, True
        elif out.status == "INFEASIBLE":
            self.infeasible_cands.append(cand)
        return out

    def answer(
        self, start: float, on_fallback: Callable[[PlacementProblem], None] | None
    ) -> Plan | Infeasible:
        problem, size = self.problem, self.size
        model_size = ModelSize(
            variables=size["variables"],
            constraints=size["constraints"],
            node_classes=len(self.ctx.agg.node_classes),
            candidates=size["candidates"],
            solved_candidates=size["solved"],
        )
        if self.best is not None:
            status: PlanStatus
            if self.best_from_cpsat:
                status = "OPTIMAL" if self.proved else "FEASIBLE"
            elif self.proved and size["solved"] > 0:
                status = "OPTIMAL"
            else:
                status = "GREEDY_FALLBACK"
                if on_fallback is not None:
                    on_fallback(problem)
            known = [g for g in self.gaps if g is not None]
            gap = (
                None
                if status == "GREEDY_FALLBACK" or len(known) < len(self.gaps)
                else max(known, default=0.0)
            )
            return dataclasses.replace(_plan(problem, self.best, status, start, model_size), gap=gap)
        if not self.proved or not self.infeasible_cands:
            return dataclasses.replace(
                explain.timeout(problem, problem.options.time_limit_seconds),
                solve_seconds=time.perf_counter() - start,
            )
        return dataclasses.replace(
            _explain(self.ctx, self.infeasible_cands), solve_seconds=time.perf_counter() - start
        )


def _explain(ctx: _Context, cands: list[Domain]) -> Infeasible:
    """Name the constraint families that clash in the roomiest proven-infeasible candidate."""
    problem = ctx.problem
    cand = sorted(cands, key=lambda d: (-ctx.cap.holds.get(d, 0), d))[0]
    out = _solve_candidate(ctx, cand, ctx.lower_bound(cand), None, 5.0, explain_mode=True)
    layer = problem.layers[len(cand) - 1].name if cand else None
    groups = [name.split(":", 1)[1] for name in out.core if name.startswith("group:")]
    multiples = sorted(name.split(":", 1)[1] for name in out.core if name.startswith("multiple:"))
    spreads = sorted(name.split(":", 1)[1] for name in out.core if name.startswith("spread:"))
    if spreads:
        reason = explain.packing(problem, groups, layer)
        return dataclasses.replace(
            reason,
            reason="TOPOLOGY_SPREAD",
            message=reason.message + f" within the topology spread constraints {', '.join(spreads)}",
        )
    if multiples:
        reason = explain.packing(problem, groups, layer)
        return dataclasses.replace(
            reason,
            reason="POD_COUNT_MULTIPLE",
            message=reason.message + f" with podCountMultiple at {', '.join(multiples)}",
            layer=multiples[-1],
        )
    return explain.packing(problem, groups, layer)


def _plan(
    problem: PlacementProblem, assignment: dict[str, str], status: PlanStatus, start: float, size: ModelSize
) -> Plan:
    return Plan(
        assignment=dict(sorted(assignment.items())),
        strategy="cpsat",
        status=status,
        domains_used=domains_used(problem, assignment),
        objective=objective(problem, assignment),
        solve_seconds=time.perf_counter() - start,
        model_size=size,
    )
