"""Task synthesis: templated user requests whose gold calls come from the real tool executors.

For each split the kind counts follow `params.kind_mix`, domains rotate so every domain appears,
and each row is drawn from a recipe: sample entities the split may use, phrase the request with
a template the split may use, run the gold calls with `slca.tools.execute` on the seeded world
(a private copy when the calls write), and turn the real outputs into reference facts and a
templated reference answer. Test rows use only held-out templates and entities.

    rows = synthesize(params.data, seed=0)  # {"train": [...], "val": [...], "test": [...]}
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from tqdm import tqdm

from slca.config import DataParams
from slca.data import holdout
from slca.data.recipes import CHAINS, RECIPES
from slca.data.spec import ChainRecipe, Ctx, Reject, ToolRecipe, join_items
from slca.tools import DOMAINS, World, as_openai_tool, execute, tool_map

KINDS = ("single", "parallel", "multiple", "multi_step", "no_call")
SPLITS = ("train", "val", "test")
MAX_TRIES = 40

SYSTEM_PROMPT = (
    "You are a helpful assistant that can call tools. Today is {today}. Call the provided "
    "tools when they help with the request, and answer only from what the tool results "
    "say. If none of the available tools can answer the request, do not call any; say so "
    "plainly instead."
)
OPENERS = ("", "", "", "Hi! ", "Hello. ", "Hey there! ", "Quick question: ", "Good morning! ")
CLOSERS = ("", "", "", " Thanks!", " Thank you.", " Thanks in advance.", " I'd appreciate it.")
REFUSALS = (
    "Sorry, I can't {gist} with the tools I have here; they only cover {areas}.",
    "I'm not able to {gist}: none of my available tools can do that (I only have {areas} tools).",
    "Unfortunately the tools available to me ({areas}) can't {gist}, so I can't answer that.",
    "I don't have a tool to {gist}. The tools I can use only handle {areas}.",
)


class SynthesisError(RuntimeError):
    """A recipe kept producing invalid draws; the message names the recipe and split."""


def kind_counts(n: int, mix: dict[str, float]) -> dict[str, int]:
    """Rows per kind: largest-remainder rounding of the shares; every positive kind gets one."""
    total = sum(mix.values())
    if total <= 0:
        raise SynthesisError("data.kind_mix: at least one kind needs a positive share")
    active = [k for k in KINDS if mix[k] > 0]
    exact = {k: n * mix[k] / total for k in KINDS}
    counts = {k: int(exact[k]) for k in KINDS}
    by_remainder = sorted(KINDS, key=lambda k: (-(exact[k] - counts[k]), KINDS.index(k)))
    for k in by_remainder[: n - sum(counts.values())]:
        counts[k] += 1
    for k in active:  # a tiny split still shows every kind the mix asks for
        while counts[k] == 0 and n >= len(active):
            donor = max(KINDS, key=lambda d: counts[d])
            counts[donor] -= 1
            counts[k] += 1
    return counts


def required_kinds(mix: dict[str, float]) -> list[str]:
    return [k for k in KINDS if mix[k] > 0]


def recipes_for(kind: str) -> list[ToolRecipe | ChainRecipe]:
    if kind == "multi_step":
        return list(CHAINS)
    if kind == "parallel":
        return [r for r in RECIPES if r.parallel]
    if kind == "no_call":
        return [r for r in RECIPES if r.refusable]
    return list(RECIPES)


def template_groups() -> dict[str, int]:
    """Every phrasing group and its size (held-out fractions are cut per group)."""
    groups = {f"{r.key}.ask": len(r.asks) for r in RECIPES}
    groups.update({f"{r.key}.par": len(r.parallel) for r in RECIPES if r.parallel})
    groups.update({f"{c.key}.ask": len(c.asks) for c in CHAINS})
    return groups


class SplitBuilder:
    """Builds the rows of one split from its allowed templates and entity pools."""

    def __init__(
        self,
        split: str,
        params: DataParams,
        seed: int,
        world: World,
        pools: dict[str, list[str]],
        templates: dict[str, list[int]],
    ) -> None:
        self.split, self.params, self.seed, self.world = split, params, seed, world
        self.scratch = world.copy()  # read-only calls run here; its caches grow, the pristine world's do not
        self.pools, self.templates = pools, templates
        self.schemas = tool_map()
        self.openai = {name: as_openai_tool(schema) for name, schema in self.schemas.items()}
        self.system = SYSTEM_PROMPT.format(today=world.today)
        self.unsatisfiable: set[tuple[str, str]] = set()  # (kind, recipe) this split's entities cannot fill

    # ---- planning ----
    def plan(self, n: int) -> list[tuple[str, ToolRecipe | ChainRecipe]]:
        """(kind, recipe) per row; domains rotate per kind so a split covers every domain."""
        rng = random.Random(f"{self.seed}|{self.split}|plan")
        mix = self.params.kind_mix.model_dump()
        order = list(DOMAINS)
        rng.shuffle(order)
        slots, turn = [], 0
        for kind, count in kind_counts(n, mix).items():
            by_domain = {d: [r for r in recipes_for(kind) if r.domain == d] for d in order}
            for _ in range(count):
                for _skip in range(len(order)):
                    domain, turn = order[turn % len(order)], turn + 1
                    if by_domain[domain]:
                        break
                slots.append((kind, rng.choice(by_domain[domain])))
        rng.shuffle(slots)
        return slots

    def build(self, n: int) -> list[dict]:
        rngs = {k: random.Random(f"{self.seed}|{self.split}|{k}") for k in KINDS}
        rows = []
        plan = self.plan(n)
        for i, (kind, recipe) in enumerate(tqdm(plan, desc=f"synthesize {self.split}", disable=None)):
            row = self.row_for(kind, recipe, rngs[kind])
            row["id"] = f"{self.split}-{i:05d}"
            rows.append(json.loads(json.dumps(row)))  # plain JSON types, no shared objects
        return rows

    def row_for(self, kind: str, recipe: ToolRecipe | ChainRecipe, rng: random.Random) -> dict:
        """A row of the planned recipe or, where this split's entities cannot satisfy it (a held-out pool
        without a fitting record), of the next recipe of the same kind and domain that they can."""
        same = sorted(
            (r for r in recipes_for(kind) if r.domain == recipe.domain and r is not recipe), key=lambda r: r.key
        )
        failures = []
        for candidate in (recipe, *same):
            if (kind, candidate.key) in self.unsatisfiable:
                continue
            try:
                return self.row_with_retries(kind, candidate, rng)
            except SynthesisError as exc:
                self.unsatisfiable.add((kind, candidate.key))
                failures.append(str(exc))
        if not failures:
            failures.append(f"{self.split}: no recipe for {kind} tasks in domain {recipe.domain!r} fits this split")
        raise SynthesisError(
            failures[0] + (f" (and {len(failures) - 1} more of that kind and domain)" if len(failures) > 1 else "")
        )

    def row_with_retries(self, kind: str, recipe: ToolRecipe | ChainRecipe, rng: random.Random) -> dict:
        last = ""
        for _ in range(MAX_TRIES):
            ctx = Ctx(rng=rng, world=self.scratch, pools=self.pools)
            try:
                return self.make(kind, recipe, ctx)
            except Reject as why:
                last = str(why)
        raise SynthesisError(
            f"{self.split}: recipe {recipe.key!r} ({kind}) produced no valid task in {MAX_TRIES} tries (last: {last})"
        )

    def make(self, kind: str, recipe: ToolRecipe | ChainRecipe, ctx: Ctx) -> dict:
        if kind == "multi_step":
            return self.multi_step(recipe, ctx)
        if kind == "parallel":
            return self.parallel(recipe, ctx)
        if kind == "no_call":
            return self.no_call(recipe, ctx)
        return self.single(recipe, ctx, kind)

    # ---- kinds ----
    def single(self, recipe: ToolRecipe, ctx: Ctx, kind: str) -> dict:
        draw = recipe.sample(ctx)
        content = self.run(recipe.writes, [[{"name": recipe.tool, "arguments": draw.arguments}]])[0][0]
        facts = recipe.facts(content, draw)
        template_id, text = self.phrase(ctx.rng, f"{recipe.key}.ask", recipe.asks, draw.slots)
        extra = self.params.n_distractors if kind == "multiple" else 0
        summary = ctx.rng.choice(recipe.answers).format(**draw.slots, **facts)
        return self.row(
            kind,
            recipe.domain,
            ctx,
            text,
            template_id,
            [recipe.tool],
            extra,
            [[{"name": recipe.tool, "arguments": draw.arguments}]],
            [[content]],
            references(facts),
            summary,
        )

    def parallel(self, recipe: ToolRecipe, ctx: Ctx) -> dict:
        ctx.plain = True
        draws = []
        for _ in range(ctx.rng.choice((2, 3))):
            draw = recipe.sample(ctx)
            if any(d.arguments == draw.arguments for d in draws):
                raise Reject("repeated parallel item")
            draws.append(draw)
        step = [{"name": recipe.tool, "arguments": d.arguments} for d in draws]
        contents = self.run(recipe.writes, [step])[0]
        facts = [recipe.facts(c, d) for c, d in zip(contents, draws)]
        template_id, text = self.phrase(
            ctx.rng, f"{recipe.key}.par", recipe.parallel, {"items": join_items([d.item for d in draws])}
        )
        summary = " ".join(ctx.rng.choice(recipe.answers).format(**d.slots, **f) for d, f in zip(draws, facts))
        refs = references({f"{i}.{k}": v for i, f in enumerate(facts) for k, v in f.items()})
        return self.row(
            "parallel", recipe.domain, ctx, text, template_id, [recipe.tool], 0, [step], [contents], refs, summary
        )

    def no_call(self, recipe: ToolRecipe, ctx: Ctx) -> dict:
        draw = recipe.sample(ctx)
        template_id, text = self.phrase(ctx.rng, f"{recipe.key}.ask", recipe.asks, draw.slots)
        others = sorted(name for name, s in self.schemas.items() if s["domain"] != recipe.domain)
        offered = ctx.rng.sample(others, min(len(others), max(1, self.params.n_distractors)))
        areas = join_items(sorted({self.schemas[name]["domain"] for name in offered}))
        summary = ctx.rng.choice(REFUSALS).format(gist=recipe.gist, areas=areas)
        return self.row("no_call", recipe.domain, ctx, text, template_id, offered, 0, [], [], [], summary)

    def multi_step(self, chain: ChainRecipe, ctx: Ctx) -> dict:
        slots = chain.sample(ctx)
        world = self.world.copy() if chain.writes else self.scratch
        steps, done = [], []
        while (calls := chain.steps(slots, done)) is not None:
            steps.append(calls)
            done.append(self.execute_step(world, calls))
        facts = chain.facts(slots, done)
        template_id, text = self.phrase(ctx.rng, f"{chain.key}.ask", chain.asks, slots)
        summary = ctx.rng.choice(chain.answers).format(**slots, **facts)
        extra = min(1, self.params.n_distractors)
        return self.row(
            "multi_step",
            chain.domain,
            ctx,
            text,
            template_id,
            list(chain.tools),
            extra,
            steps,
            done,
            references(facts),
            summary,
        )

    # ---- helpers ----
    def run(self, writes: bool, steps: list[list[dict]]) -> list[list[dict]]:
        world = self.world.copy() if writes else self.scratch
        return [self.execute_step(world, calls) for calls in steps]

    @staticmethod
    def execute_step(world: World, calls: list[dict]) -> list[dict]:
        contents = []
        for call in calls:
            result = execute(world, call["name"], call["arguments"])
            if not result.ok:
                raise Reject(f"{call['name']}: {result.error}")
            contents.append(result.content)
        return contents

    def phrase(self, rng: random.Random, group: str, templates: Sequence[str], slots: dict) -> tuple[str, str]:
        """(template id, user text) from a template this split may use, with a greeting/closer."""
        index = rng.choice(self.templates[group])
        text = templates[index].format(**slots)
        text = text[0].upper() + text[1:]
        return f"{group}{index}", f"{rng.choice(OPENERS)}{text}{rng.choice(CLOSERS)}"

    def offered(self, rng: random.Random, needed: list[str], domain: str, extra: int) -> list[dict]:
        """Needed tools plus `extra` distractors (same domain first), in shuffled order."""
        same = sorted(n for n, s in self.schemas.items() if s["domain"] == domain and n not in needed)
        other = sorted(n for n, s in self.schemas.items() if s["domain"] != domain)
        rng.shuffle(same)
        rng.shuffle(other)
        names = list(dict.fromkeys(needed)) + (same + other)[:extra]
        rng.shuffle(names)
        return [self.openai[name] for name in names]

    def row(
        self,
        kind: str,
        domain: str,
        ctx: Ctx,
        text: str,
        template_id: str,
        needed: list[str],
        extra: int,
        steps: list,
        responses: list,
        reference: list[str],
        summary: str,
    ) -> dict:
        return {
            "id": "",
            "domain": domain,
            "kind": kind,
            "split": self.split,
            "messages": [{"role": "system", "content": self.system}, {"role": "user", "content": text}],
            "tools": self.offered(ctx.rng, needed, domain, extra),
            "gold_steps": steps,
            "gold_responses": responses,
            "reference": reference,
            "gold_summary": summary[0].upper() + summary[1:],
            "template_id": template_id,
            "entities": sorted(set(ctx.used)),
        }


def references(facts: dict[str, str]) -> list[str]:
    """Public facts (keys without a leading '_'), first occurrence order, no duplicates."""
    return list(dict.fromkeys(v for k, v in facts.items() if not k.split(".")[-1].startswith("_")))


def split_sizes(params: DataParams) -> dict[str, int]:
    return {"train": params.n_train, "val": params.n_val, "test": params.n_test}


def synthesize(params: DataParams, seed: int) -> dict[str, list[dict]]:
    """Rows of every split; same params and seed give identical rows."""
    world = World(params.world_seed)
    pools = holdout.split_pools(holdout.entity_pools(world), params.heldout_entity_fraction, seed)
    templates = holdout.split_templates(template_groups(), params.heldout_template_fraction, seed)
    out = {}
    for split, n in split_sizes(params).items():
        side = "heldout" if split == "test" else "seen"
        builder = SplitBuilder(split, params, seed, world, pools[side], templates[side])
        out[split] = builder.build(n)
    return out
