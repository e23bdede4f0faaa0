"""CP-SAT victim selection for job-level preemption, the greedy selection as hint and fallback.

Formulation (`preemption_problem` states the problem and the objective):

* ``x[g, n]`` integer: members of pod group g placed on candidate node n (only where g passes its
  Filters once the victims are gone and at least one member fits then). ``v[p]`` boolean: victim
  p is evicted. Per node and resource the members take at most what is free now plus what the
  evicted victims release: ``sum_g req[g] * x[g, n] <= free[n] + sum_p req[p] * v[p]``.
* Every member is placed: ``sum_n x[g, n] = count[g]``.
* Blockers: ``x[g, n] = 0`` unless every victim whose presence fails g's Filters on n (pod
  anti-affinity) is evicted.
* MustGather: one domain ``d[D]`` of the deepest MustGather layer is chosen and members outside it
  are forbidden; podCountMultiple k: members inside each domain of the layer ``= k * z[D]``.
* Eviction budgets (quota reclaim): the victims of one budget release at most its amounts.
* Costs: ``top >= rank(p) * v[p]`` (highest victim priority); per budget ``over[b] >= sum v - allowed``;
  ``job[j] >= v[p]`` for the victims of job j, a broken job costing ``size(j)`` pods.
* Counting decides what it can (`victim_bounds`): greedy's highest rank is the least possible
  when one rank less leaves some pod group without room summed over the nodes of every MustGather
  domain; then no victim of a higher rank enters the model. When greedy also breaks no
  PodDisruptionBudget, none may be exceeded. Redundant counting cuts per (group, node)
  (`_counting_cuts`: the victims without which a member cannot fit, and at least the fewest
  victims and jobs that free its lack) make the linear relaxation nearly tight; a job with one
  victim in the model is that victim's variable.
* Lexicographic minimisation by stages, for the terms counting left open: minimise a term, then
  fix it (``==`` its optimum, or ``<=`` the value found when the stage ran out of time) and go on
  to the next, every stage hinted with the best selection so far; jobs, their pods and the
  evictions are one weighted last stage, which stops at the first solution proven within
  ``SolveOptions.relative_gap`` (`gap.GapStop`). One worker with the full linear relaxation, a
  fixed seed: the same input gives the same victims. The time limit covers all stages. If no
  stage finds a solution in time, the greedy selection is returned as GREEDY_FALLBACK; a proven
  infeasibility means that no set of victims lets the job fit, so nothing is evicted.
* Never worse than greedy: a stage stopped by the time limit fixes its term at the value it found,
  which may be worse than the hint's, and no later stage can undo that; the staged answer is
  therefore compared with the greedy one by the full objective and the greedy one (status GREEDY)
  is returned when it is cheaper.
* MustGather domains whose floor by counting (`victim_bounds.domain_floors`) is above the greedy
  answer hold nothing better: they are neither weighed by the greedy pass nor modelled, which
  costs no optimality (at 5,000 nodes in 20 spines, one spine is left to model).
* Big clusters: only the nodes where a member is cheapest to fit (``PRUNE_NODES_PER_MEMBER`` per
  member and class, at least ``PRUNE_MIN_NODES``, per MustGather domain) and the nodes of the
  greedy answer enter the model; the answer is then FEASIBLE (optimal among those nodes).
"""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping

from ortools.sat.python import cp_model

from scheduler.solver.gap import GapStop, relative_gap, within
from scheduler.solver.greedy import members_in_rank_order
from scheduler.solver.preemption_problem import (
    PreemptionProblem,
    SelectionStatus,
    VictimSelection,
    VictimSpec,
    objective,
)
from scheduler.solver.problem import SolveOptions, domain_key
from scheduler.solver.victim_bounds import domain_floors, fewest
from scheduler.solver.victim_greedy import greedy_pass

__all__ = ["select_cpsat"]

Domain = tuple[str, ...]


class _Model:
    """The CP-SAT model of one preemption problem and how to read a selection back."""

    def __init__(
        self, problem: PreemptionProblem, max_rank: int | None = None, pdb_hard: bool = False
    ) -> None:
        """``max_rank``: victims of a higher priority rank stay (the first term decided by
        counting); ``pdb_hard``: no budget may be exceeded (the second term decided at 0).
        The sections are added in a fixed order (what a seeded solve repeats)."""
        self.problem = problem
        self.model = cp_model.CpModel()
        ranks = problem.priority_ranks
        stays = frozenset(
            v.uid for v in problem.victims if max_rank is not None and ranks[v.priority] > max_rank
        )
        by_node = {node: [v for v in vs if v.uid not in stays] for node, vs in problem.victims_on().items()}
        self.x: dict[tuple[int, str], cp_model.IntVar] = {}
        self.x_ub: dict[tuple[int, str], int] = {}
        self.v: dict[str, cp_model.IntVar] = {}
        self.placeable = True
        self.domain: dict[Domain, cp_model.IntVar] = {}
        self.multiple: dict[Domain, cp_model.IntVar] = {}
        self.top: cp_model.IntVar
        self.over: dict[str, cp_model.IntVar] = {}
        self.job: dict[str, cp_model.IntVar] = {}
        self.one_victim_jobs: set[str] = set()
        self._add_placements(stays, by_node)
        self._add_victims(stays)
        self._add_capacity(by_node)
        self._add_demand()
        self._add_topology()
        self._add_budgets()
        self._add_costs(pdb_hard)
        self._counting_cuts(by_node)
        self.terms: list[cp_model.LinearExprT] = [
            self.top,
            _sum(list(self.over.values())),
            _sum(list(self.job.values())),
            _sum(list(self.job.values()), [problem.job_size(j) for j in self.job]),
            _sum(list(self.v.values())),
        ]

    def _add_placements(self, stays: frozenset[str], by_node: Mapping[str, list[VictimSpec]]) -> None:
        """``x[g, n]`` where g passes its Filters on n once the victims that may go are gone and at
        least one member fits then, bounded by how many fit."""
        problem, placement = self.problem, self.problem.placement
        for gi, group in enumerate(placement.pod_groups):
            for node in placement.nodes:
                if not placement.feasible(group, node):
                    continue
                if problem.blockers.get((group.name, node.name), frozenset()) & stays:
                    continue
                room = list(node.free.values)
                for v in by_node.get(node.name, ()):
                    room = [a + b for a, b in zip(room, v.request.values, strict=True)]
                cap = group.count
                for need, have in zip(group.request.values, room, strict=True):
                    if need > 0:
                        cap = min(cap, max(have, 0) // need)
                if cap > 0:
                    self.x[gi, node.name] = self.model.new_int_var(0, cap, f"x[{gi},{node.name}]")
                    self.x_ub[gi, node.name] = cap

    def _add_victims(self, stays: frozenset[str]) -> None:
        """``v[p]`` for the victims whose eviction can help, and the blockers: a member goes where a
        victim fails its Filters only if that victim is evicted."""
        problem, placement, model = self.problem, self.problem.placement, self.model
        hosting = {n for _, n in self.x}
        blocking = {
            uid for (gi, n) in self.x for uid in problem.blockers.get((placement.pod_groups[gi].name, n), ())
        }
        for victim in problem.victims:
            if victim.uid in stays:
                continue
            # elsewhere only a release helps, or making way for a member (pod anti-affinity)
            if victim.node in hosting or victim.release is not None or victim.uid in blocking:
                self.v[victim.uid] = model.new_bool_var(f"v[{victim.name}]")
        for (gi, n), var in self.x.items():
            for uid in sorted(problem.blockers.get((placement.pod_groups[gi].name, n), ())):
                model.add(var == 0).only_enforce_if(self.v[uid].Not())

    def _add_capacity(self, by_node: Mapping[str, list[VictimSpec]]) -> None:
        """Per node and resource: the members take at most what is free plus what evictions release."""
        placement = self.problem.placement
        on_node: dict[str, list[tuple[int, cp_model.IntVar]]] = defaultdict(list)
        for (gi, n), var in self.x.items():
            on_node[n].append((gi, var))
        for node in placement.nodes:
            placed = on_node.get(node.name, [])
            if not placed:
                continue
            for r in range(len(placement.resources)):
                demand = [(placement.pod_groups[gi].request.values[r], var) for gi, var in placed]
                demand = [(a, var) for a, var in demand if a]
                if not demand:
                    continue
                released = [
                    (v.request.values[r], self.v[v.uid])
                    for v in by_node.get(node.name, ())
                    if v.request.values[r] and v.uid in self.v
                ]
                terms = demand + [(-a, var) for a, var in released]
                self.model.add(
                    cp_model.LinearExpr.weighted_sum([var for _, var in terms], [a for a, _ in terms])
                    <= node.free.values[r]
                )

    def _add_demand(self) -> None:
        """Every member is placed."""
        for gi, group in enumerate(self.problem.placement.pod_groups):
            options = [var for (g, _), var in self.x.items() if g == gi]
            if not options:
                self.placeable = False  # no node takes this group even with every victim gone
                continue
            self.model.add(cp_model.LinearExpr.sum(options) == group.count)

    def _add_topology(self) -> None:
        """MustGather: one domain of its layer holds every member; podCountMultiple k: each domain
        of the layer holds a multiple of k."""
        placement, model = self.problem.placement, self.model
        path = {n.name: n.path for n in placement.nodes}
        must = placement.must_gather_index
        if must is not None:
            for key in sorted({domain_key(path[n], must) for _, n in self.x}):
                self.domain[key] = model.new_bool_var(f"d[{'/'.join(key)}]")
            model.add_exactly_one(self.domain.values())
            for (gi, n), var in self.x.items():
                model.add(var <= placement.pod_groups[gi].count * self.domain[domain_key(path[n], must)])
        total = placement.member_count
        for i, layer in enumerate(placement.layers):
            k = layer.pod_count_multiple
            if k <= 1:
                continue
            inside: dict[Domain, list[cp_model.IntVar]] = defaultdict(list)
            for (_, n), var in self.x.items():
                inside[domain_key(path[n], i)].append(var)
            for key, vars_ in sorted(inside.items()):
                z = model.new_int_var(0, total // k, f"z[{'/'.join(key)}]")
                self.multiple[key] = z
                model.add(cp_model.LinearExpr.sum(vars_) == k * z)

    def _add_budgets(self) -> None:
        """Eviction budgets (quota reclaim) cap what their victims release together; quota releases
        need at least their amounts from theirs."""
        problem, model = self.problem, self.model
        for budget, limit in sorted(problem.budgets.items()):
            members = [v for v in problem.victims if v.budget == budget and v.uid in self.v]
            for r, cap in enumerate(limit.values):
                spend = [(v.request.values[r], self.v[v.uid]) for v in members if v.request.values[r]]
                if spend:
                    model.add(sum(a * var for a, var in spend) <= cap)
        for release, wanted in sorted(problem.releases.items()):
            members = [v for v in problem.victims if v.release == release and v.uid in self.v]
            for r, floor in enumerate(wanted.values):
                if floor <= 0:
                    continue
                give = [(v.request.values[r], self.v[v.uid]) for v in members if v.request.values[r]]
                if sum(a for a, _ in give) < floor:
                    self.placeable = False  # even every such victim would not free enough
                    continue
                model.add(sum(a * var for a, var in give) >= floor)

    def _add_costs(self, pdb_hard: bool) -> None:
        """The cost variables: the highest victim rank, each PDB's overrun, each broken job."""
        problem, model = self.problem, self.model
        ranks = problem.priority_ranks
        chosen = [v for v in problem.victims if v.uid in self.v]
        self.top = model.new_int_var(0, max(ranks.values(), default=0), "top")
        for victim in chosen:
            model.add(self.top >= ranks[victim.priority] * self.v[victim.uid])
        members_of: dict[str, list[str]] = defaultdict(list)
        for victim in chosen:
            for pdb in victim.pdbs:
                members_of[pdb].append(victim.uid)
        for pdb, uids in sorted(members_of.items()):
            if pdb_hard:
                model.add(sum(self.v[u] for u in uids) <= problem.pdb_allowed.get(pdb, 0))
                continue
            over = model.new_int_var(0, len(uids), f"over[{pdb}]")
            model.add(over >= sum(self.v[u] for u in uids) - problem.pdb_allowed.get(pdb, 0))
            self.over[pdb] = over
        of_job: dict[str, list[str]] = defaultdict(list)
        for victim in chosen:
            of_job[victim.job].append(victim.uid)
        for job, uids in of_job.items():
            if len(uids) == 1:  # a job of one victim in the model is broken exactly when it goes
                self.job[job] = self.v[uids[0]]
                self.one_victim_jobs.add(job)
                continue
            self.job[job] = model.new_bool_var(f"job[{job}]")
            for uid in uids:
                model.add_implication(self.v[uid], self.job[job])

    def _counting_cuts(self, by_node: Mapping[str, list[VictimSpec]]) -> None:
        """Redundant, by counting what one member needs on a node: the victims without which it
        cannot fit are evicted, and so are at least as many victims and victim jobs as the fewest
        that free its lack. Without these the relaxation spreads members thinly over every node
        and proves nothing about the jobs term."""
        placement, model = self.problem.placement, self.model
        free = {n.name: n.free.values for n in placement.nodes}
        dims = range(len(placement.resources))
        for (gi, name), var in sorted(self.x.items()):
            request = placement.pod_groups[gi].request.values
            lack = [max(0, r - f) for r, f in zip(request, free[name], strict=True)]
            if not any(lack):
                continue
            here = [v for v in by_node.get(name, ()) if v.uid in self.v]
            used: cp_model.LinearExprT = var
            if self.x_ub[gi, name] > 1:
                flag = model.new_bool_var(f"u[{gi},{name}]")
                model.add(var <= self.x_ub[gi, name] * flag)
                used = flag
            total = [sum(v.request.values[r] for v in here) for r in dims]
            for v in here:
                if any(total[r] - v.request.values[r] < lack[r] for r in dims):
                    model.add(self.v[v.uid] >= used)
            model.add(
                _sum([self.v[v.uid] for v in here]) >= fewest([v.request.values for v in here], lack) * used
            )
            per_job: dict[str, list[int]] = {}
            for v in here:
                amounts = per_job.setdefault(v.job, [0] * len(lack))
                for r in dims:
                    amounts[r] += v.request.values[r]
            model.add(_sum([self.job[j] for j in per_job]) >= fewest(list(per_job.values()), lack) * used)

    def hint(self, victims: set[str], assignment: Mapping[str, str]) -> None:
        problem, placement = self.problem, self.problem.placement
        model = self.model
        model.clear_hints()  # type: ignore[no-untyped-call]
        group_of = {m: gi for gi, g in enumerate(placement.pod_groups) for m in g.member_ids}
        counts: dict[tuple[int, str], int] = defaultdict(int)
        for member, node in assignment.items():
            counts[group_of[member], node] += 1
        if any(key not in self.x for key in counts):
            return  # not expressible in this model (should not happen: same feasibility)
        for key, var in self.x.items():
            model.add_hint(var, counts.get(key, 0))
        for uid, var in self.v.items():
            model.add_hint(var, 1 if uid in victims else 0)
        jobs = {v.job for v in problem.victims if v.uid in victims}
        for job, var in self.job.items():
            if job not in self.one_victim_jobs:  # hinted as its victim (a variable is hinted once)
                model.add_hint(var, 1 if job in jobs else 0)
        ranks = problem.priority_ranks
        top = max((ranks[v.priority] for v in problem.victims if v.uid in victims), default=0)
        model.add_hint(self.top, top)
        path = {n.name: n.path for n in placement.nodes}
        must = placement.must_gather_index
        if must is not None and assignment:
            used = {domain_key(path[n], must) for n in assignment.values()}
            for domain, flag in self.domain.items():
                model.add_hint(flag, 1 if domain in used else 0)
        inside: dict[Domain, int] = defaultdict(int)
        for node in assignment.values():
            for depth in range(1, len(path[node]) + 1):
                inside[path[node][:depth]] += 1
        for domain, z in self.multiple.items():
            model.add_hint(z, inside[domain] // placement.layers[len(domain) - 1].pod_count_multiple)
        per_pdb: dict[str, int] = defaultdict(int)
        for v in problem.victims:
            if v.uid in victims:
                for pdb in v.pdbs:
                    per_pdb[pdb] += 1
        for pdb, var in self.over.items():
            model.add_hint(var, max(0, per_pdb[pdb] - problem.pdb_allowed.get(pdb, 0)))

    def read(self, solver: cp_model.CpSolver) -> tuple[set[str], dict[str, str]]:
        placement = self.problem.placement
        victims = {uid for uid, var in self.v.items() if solver.value(var)}
        order = sorted(placement.nodes, key=lambda n: (n.path, n.name))
        slots: dict[int, list[str]] = defaultdict(list)
        for node in order:
            for gi in range(len(placement.pod_groups)):
                var = self.x.get((gi, node.name))
                if var is not None:
                    slots[gi].extend([node.name] * solver.value(var))
        assignment: dict[str, str] = {}
        group_of = {m: gi for gi, g in enumerate(placement.pod_groups) for m in g.member_ids}
        taken: dict[int, int] = defaultdict(int)
        for member, gi in members_in_rank_order(placement):
            assignment[member] = slots[gi][taken[gi]]
            taken[gi] += 1
        assert len(assignment) == len(group_of)
        return victims, assignment


def _sum(variables: list[cp_model.IntVar], weights: list[int] | None = None) -> cp_model.LinearExprT:
    """A (weighted) sum built in one call (``sum()`` chains one expression per term); 0 when
    empty, so that a term with nothing to choose stays a plain int."""
    if not variables:
        return 0
    if weights is None:
        return cp_model.LinearExpr.sum(variables)
    return cp_model.LinearExpr.weighted_sum(variables, weights)


PRUNE_MIN_NODES = 64
PRUNE_NODES_PER_MEMBER = 3


def _prune_per_class(problem: PreemptionProblem) -> int:
    """How many of the cheapest nodes per class and MustGather domain the model keeps (0: all)."""
    per_class = max(PRUNE_MIN_NODES, PRUNE_NODES_PER_MEMBER * problem.placement.member_count)
    if len(problem.placement.nodes) <= per_class or problem.releases:
        return 0  # a release may need victims on any node
    return per_class


def _prune(
    problem: PreemptionProblem, greedy: VictimSelection | None, cheapest: Collection[str]
) -> PreemptionProblem:
    """Keep the candidate nodes (``cheapest``: of the MustGather domains that may hold a selection
    as cheap as greedy's, those where the members are cheapest to fit, per class and domain
    ``PRUNE_NODES_PER_MEMBER`` per member) and every node the greedy answer uses, so that the
    model stays small on big clusters and the greedy answer stays a complete hint."""
    placement = problem.placement
    keep = set(cheapest)
    if greedy is not None:
        keep.update(greedy.assignment.values())
        chosen = set(greedy.victims)
        keep.update(v.node for v in problem.victims if v.uid in chosen)
    # a member's node whose blockers live elsewhere (pod anti-affinity over a wider domain) is
    # usable only with their nodes kept too
    by_uid = problem.victim_by_uid
    keep.update(by_uid[uid].node for (_, n), uids in problem.blockers.items() if n in keep for uid in uids)
    if len(keep) >= len(placement.nodes):
        return problem
    victims = tuple(v for v in problem.victims if v.node in keep)
    kept = {v.uid for v in victims}
    # a (group, node) whose blockers were pruned away cannot be used; a group that every node
    # passed (no feasible_nodes entry) gets an entry then, or the pair would be usable unblocked
    unusable = {key for key, uids in problem.blockers.items() if not uids <= kept}
    every = frozenset(n.name for n in placement.nodes)
    feasible = dict(placement.feasible_nodes)
    for group, _ in unusable:
        feasible.setdefault(group, every)
    smaller = dataclasses.replace(
        placement,
        nodes=tuple(n for n in placement.nodes if n.name in keep),
        feasible_nodes={
            g: frozenset(n for n in ns & keep if (g, n) not in unusable) for g, ns in feasible.items()
        },
        node_scores={n: s for n, s in placement.node_scores.items() if n in keep},
    )
    blockers = {key: uids for key, uids in problem.blockers.items() if key not in unusable}
    return dataclasses.replace(problem, placement=smaller, victims=victims, blockers=blockers)


def _fallback(
    problem: PreemptionProblem,
    greedy: VictimSelection,
    start: float,
    on_fallback: Callable[[PreemptionProblem], None] | None,
    size: tuple[int, int] = (0, 0),
) -> VictimSelection:
    if on_fallback is not None:
        on_fallback(problem)
    return VictimSelection(
        greedy.victims,
        greedy.assignment,
        greedy.objective,
        "GREEDY_FALLBACK",
        time.perf_counter() - start,
        *size,
    )


def _weights(built: _Model) -> tuple[int, int, int]:
    """The weights of jobs, pods and evictions in the last stage's one weighted term."""
    w_pods = len(built.v) + 1
    w_jobs = (sum(built.problem.job_size(j) for j in built.job) + 1) * w_pods
    return w_jobs, w_pods, 1


def _weighted_last(built: _Model, objective: tuple[int, ...]) -> int:
    """The last stage's term for a selection of this ``objective`` (top, over, jobs, pods, evicted)."""
    w_jobs, w_pods, w_evicted = _weights(built)
    _, _, jobs, pods, evicted = objective
    return w_jobs * jobs + w_pods * pods + w_evicted * evicted


def _stages(built: _Model, decided_rank: bool, pdb_hard: bool) -> list[cp_model.LinearExprT]:
    """The terms still to minimise, in order: the top rank and the budget violations unless
    counting decided them, then jobs, their pods and the evictions as one weighted term (each
    weight above the whole range of the terms after it), so the last solve can stop within the
    tolerated gap instead of proving three terms one after the other."""
    top, over, jobs, pods, evicted = built.terms
    stages: list[cp_model.LinearExprT] = []
    if not decided_rank:
        stages.append(top)
    if not pdb_hard:
        stages.append(over)
    stages.append(cp_model.LinearExpr.weighted_sum([jobs, pods, evicted], list(_weights(built))))
    return stages


def select_cpsat(
    problem: PreemptionProblem, *, on_fallback: Callable[[PreemptionProblem], None] | None = None
) -> VictimSelection | None:
    """The cheapest victims by the lexicographic objective, or None when no victims let the job fit.

    Counting decides the first terms where it can: when the greedy selection's highest rank is
    `rank_lower_bound`, no victim above it can be part of a better selection and none enters the
    model; when it also breaks no PodDisruptionBudget, no budget may be exceeded. The greedy
    selection is the hint, and the answer whenever it is at least as cheap."""
    start = time.perf_counter()
    options = problem.placement.options
    deadline = start + options.time_limit_seconds
    per_class = _prune_per_class(problem)
    floors = domain_floors(problem)
    weighed = greedy_pass(problem, per_class, floors)
    greedy = weighed.selection
    # Greedy's top rank is the least possible when no domain fits by counting with one rank less.
    decided_rank = greedy is not None and all(
        floor is None or floor[0] >= greedy.objective[0] for floor in floors.values()
    )
    pdb_hard = decided_rank and greedy is not None and greedy.objective[1] == 0
    pruned = _prune(problem, greedy, weighed.candidates)
    built = _Model(pruned, greedy.objective[0] if greedy and decided_rank else None, pdb_hard)
    if not built.placeable:
        return None if pruned is problem or greedy is None else _fallback(problem, greedy, start, on_fallback)
    staged = _Staged((set(greedy.victims), dict(greedy.assignment)) if greedy is not None else None)
    stages = _stages(built, decided_rank, pdb_hard)
    if not _run_stages(built, stages, staged, deadline, pruned=not weighed.complete):
        return None
    return _answer(problem, built, greedy, staged, start, on_fallback)


@dataclasses.dataclass(slots=True)
class _Staged:
    """What the stages have found so far."""

    best: tuple[set[str], dict[str, str]] | None
    """The best selection in hand (victims, assignment): greedy's until a stage finds one."""
    found_by_cpsat: bool = False
    all_optimal: bool = True
    gap: float | None = None
    last_bound: float | None = None


def _run_stages(
    built: _Model, stages: list[cp_model.LinearExprT], staged: _Staged, deadline: float, *, pruned: bool
) -> bool:
    """Minimise each term in turn, then fix it; False when the first stage proves that no victims
    let the job fit."""
    options = built.problem.placement.options
    for stage, term in enumerate(stages):
        last = stage == len(stages) - 1
        if isinstance(term, int) and not (last and not staged.found_by_cpsat):
            continue  # nothing to choose for this term (no budgets, no victims)
        left = deadline - time.perf_counter()
        if left <= 0:
            staged.all_optimal = False
            break
        if isinstance(term, int):
            built.model.clear_objective()  # type: ignore[no-untyped-call]  # counting decided every term: any placement will do
        else:
            built.model.minimize(term)
        if staged.best is not None:
            built.hint(*staged.best)
        solver = _stage_solver(options, left, stage, last)
        status = solver.solve(built.model, GapStop(options.relative_gap) if last else None)
        if last and within(solver, status, options.relative_gap):
            status = cp_model.OPTIMAL  # proven within the tolerated gap
        if status == cp_model.MODEL_INVALID:  # a bug here, not a hard problem: never hide it
            raise AssertionError(f"invalid victim model: {built.model.validate()}")
        if status == cp_model.INFEASIBLE and stage == 0:
            return False
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            staged.all_optimal = False
            break
        value = term if isinstance(term, int) else round(solver.objective_value)
        staged.best = built.read(solver)
        if pruned:
            staged.all_optimal = False  # optimal among the candidate nodes kept, not proven overall
        staged.found_by_cpsat = True
        if last:
            staged.gap = 0.0 if isinstance(term, int) else relative_gap(value, solver.best_objective_bound)
            staged.last_bound = None if isinstance(term, int) else solver.best_objective_bound
        if status != cp_model.OPTIMAL:
            staged.all_optimal = False
        if not last:
            built.model.add(term == value if status == cp_model.OPTIMAL else term <= value)
    return True


def _stage_solver(options: SolveOptions, left: float, stage: int, last: bool) -> cp_model.CpSolver:
    solver = cp_model.CpSolver()
    share = 1.0 if last else 0.6 if stage == 0 else 0.5
    solver.parameters.max_time_in_seconds = max(left * share, 0.001)
    # One worker with the full linear relaxation: the relaxation of this model is nearly
    # integral (the counting cuts), so one LP-guided search proves in tens of milliseconds
    # what the two-worker interleaved portfolio did not prove in a second; and one worker is
    # deterministic with the gap callback.
    solver.parameters.num_workers = 1
    solver.parameters.linearization_level = 2
    # Presolve's probing and symmetry detection find nothing in this model and were a third
    # of the solve at 1,000 nodes x 64 members.
    solver.parameters.cp_model_probing_level = 0
    solver.parameters.symmetry_level = 0
    solver.parameters.random_seed = options.seed
    if last:
        solver.parameters.relative_gap_limit = options.relative_gap
    return solver


def _answer(
    problem: PreemptionProblem,
    built: _Model,
    greedy: VictimSelection | None,
    staged: _Staged,
    start: float,
    on_fallback: Callable[[PreemptionProblem], None] | None,
) -> VictimSelection | None:
    """The staged selection, or the greedy one where it is cheaper or the stages found nothing."""
    seconds = time.perf_counter() - start
    size = (len(built.model.proto.variables), len(built.model.proto.constraints))
    if not staged.found_by_cpsat:
        if greedy is None:
            return None
        return _fallback(problem, greedy, start, on_fallback, size)
    assert staged.best is not None
    victims = tuple(sorted(staged.best[0]))
    cost = objective(problem, victims)
    if greedy is not None and greedy.objective < cost:
        # A stage stopped by the time limit (or within the gap) fixed its term at a value worse
        # than the hint's: the greedy answer is better overall. When every stage was proven (the
        # last within the tolerated gap), the greedy answer lies between that stage's bound and a
        # value within the gap of it, so it is proven within the gap as well.
        if staged.all_optimal and staged.last_bound is not None:
            greedy_gap = relative_gap(_weighted_last(built, greedy.objective), staged.last_bound)
            return VictimSelection(
                greedy.victims, greedy.assignment, greedy.objective, "OPTIMAL", seconds, *size, gap=greedy_gap
            )
        return VictimSelection(
            greedy.victims, greedy.assignment, greedy.objective, "GREEDY", seconds, *size, gap=None
        )
    status_out: SelectionStatus = "OPTIMAL" if staged.all_optimal else "FEASIBLE"
    return VictimSelection(victims, staged.best[1], cost, status_out, seconds, *size, gap=staged.gap)
