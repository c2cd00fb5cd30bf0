"""Math task recipes: unit and currency conversion, arithmetic, bill splitting, loans, and a chain."""

from __future__ import annotations

from slca.data.spec import ChainRecipe, Ctx, Draw, Reject, ToolRecipe, num, words
from slca.tools.entities import UNITS

D = "math"


def _plural(unit: str, value: float) -> str:
    text = words(unit)
    return (
        text
        if value == 1
        else {"foot": "feet", "inch": "inches", "square foot": "square feet", "knot": "knots"}.get(text, text + "s")
    )


def _convert(ctx: Ctx) -> Draw:
    src = ctx.pick("unit")
    dim = UNITS[src][0]
    targets = [u for u in UNITS if UNITS[u][0] == dim and u != src]
    dst = ctx.rng.choice(targets)
    value = float(ctx.rng.choice((1, 2, 3, 5, 7.5, 10, 12, 20, 42, 100, 250)))
    what = f"{num(value)} {_plural(src, value)}"
    return Draw(
        {"what": what, "to": _plural(dst, 2)},
        {"value": value, "from_unit": src, "to_unit": dst},
        f"{what} to {_plural(dst, 2)}",
    )


CONVERT = ToolRecipe(
    tool="convert_units",
    domain=D,
    sample=_convert,
    gist="convert units",
    refusable=False,
    facts=lambda r, d: {"result": num(r["result"])},
    asks=(
        "How many {to} is {what}?",
        "Convert {what} to {to}.",
        "What's {what} in {to}?",
        "Please change {what} into {to}.",
        "I have {what}; how much is that in {to}?",
        "Could you express {what} in {to}?",
    ),
    parallel=(
        "Convert these: {items}.",
        "Please do these conversions: {items}.",
        "How much is {items}?",
        "I need {items}.",
        "Work out {items} for me.",
        "Quick conversions: {items}.",
    ),
    answers=("{what} is {result} {to}.", "That comes to {result} {to}.", "{what} equals {result} {to}."),
)


def _money(ctx: Ctx) -> Draw:
    src = ctx.pick("currency")
    dst = ctx.pick("currency", exclude=(src,))
    amount = float(ctx.rng.choice((10, 25, 50, 100, 120, 250, 500, 1000, 2500)))
    return Draw(
        {"amount": num(amount), "src": src, "dst": dst},
        {"amount": amount, "from_currency": src, "to_currency": dst},
        f"{num(amount)} {src} to {dst}",
    )


CURRENCY = ToolRecipe(
    tool="convert_currency",
    domain=D,
    sample=_money,
    gist="convert currencies",
    facts=lambda r, d: {"converted": num(r["converted_amount"]), "rate": num(r["rate"])},
    asks=(
        "How much is {amount} {src} in {dst}?",
        "Convert {amount} {src} to {dst}.",
        "What do {amount} {src} come to in {dst} today?",
        "Please exchange {amount} {src} into {dst}.",
        "I'm paying {amount} {src}; what's that in {dst}?",
        "{amount} {src} to {dst} at today's rate?",
    ),
    parallel=(
        "Convert {items}.",
        "At today's rates, what are {items}?",
        "Please convert: {items}.",
        "I need these exchanges: {items}.",
        "How much is {items}?",
        "Exchange {items} for me.",
    ),
    answers=(
        "{amount} {src} is {converted} {dst} (rate {rate}).",
        "At today's rate of {rate}, {amount} {src} comes to {converted} {dst}.",
        "You'd get {converted} {dst} for {amount} {src}; the rate is {rate}.",
    ),
)


def _expression(ctx: Ctx) -> Draw:
    a, b, c = (ctx.rng.randint(2, 99) for _ in range(3))
    expr = ctx.rng.choice(
        (
            f"({a} + {b}) * {c}",
            f"{a} * {b} - {c}",
            f"({a} - {b}) / {c}",
            f"{a} ** 2 + {b}",
            f"sqrt({a * a}) + {b}",
            f"{a * c} / {c} + {b}",
        )
    )
    return Draw({"expr": expr}, {"expression": expr}, expr)


CALC = ToolRecipe(
    tool="calculate",
    domain=D,
    sample=_expression,
    gist="do the calculation",
    refusable=False,
    facts=lambda r, d: {"result": num(r["result"])},
    asks=(
        "What is {expr}?",
        "Calculate {expr}.",
        "Can you work out {expr} for me?",
        "Please evaluate {expr}.",
        "I need the value of {expr}.",
        "Quick math: {expr} = ?",
    ),
    parallel=(
        "Calculate {items}.",
        "What are {items}?",
        "Evaluate {items}.",
        "Work out {items}, please.",
        "I need the results of {items}.",
        "Compute {items}.",
    ),
    answers=("{expr} = {result}.", "The result of {expr} is {result}.", "That works out to {result}."),
)


def _bill(ctx: Ctx) -> Draw:
    total = float(ctx.rng.choice((48, 85.5, 120, 164.2, 230, 312.75)))
    people = ctx.rng.randint(2, 8)
    tip = ctx.rng.choice((10, 15, 18, 20))
    return Draw(
        {"total": num(total), "people": str(people), "tip": str(tip)},
        {"total": total, "people": people, "tip_percent": float(tip)},
        f"{num(total)}",
    )


SPLIT = ToolRecipe(
    tool="split_bill",
    domain=D,
    sample=_bill,
    gist="split the bill",
    refusable=False,
    facts=lambda r, d: {"each": num(r["per_person"]), "with_tip": num(r["total_with_tip"])},
    asks=(
        "Our bill is {total}. Split it between {people} people with a {tip}% tip.",
        "How much does each of {people} people pay on a {total} bill plus {tip}% tip?",
        "Add a {tip}% tip to {total} and divide by {people}.",
        "We're {people} people and dinner was {total}; tip {tip}%. What's each share?",
        "Please split {total} among {people} of us, tipping {tip} percent.",
        "Bill {total}, {people} people, {tip}% tip: per person?",
    ),
    answers=(
        "With the tip the bill is {with_tip}, so each person pays {each}.",
        "Each of the {people} pays {each} (total with tip {with_tip}).",
        "Per person: {each}. The total including a {tip}% tip is {with_tip}.",
    ),
)


def _trip(ctx: Ctx) -> dict:
    src = ctx.pick("currency")
    dst = ctx.pick("currency", exclude=(src,))
    amount = float(ctx.rng.choice((120, 240, 360, 600, 900)))
    if src == dst:
        raise Reject("same currency")
    return {"amount": num(amount), "src": src, "dst": dst, "people": str(ctx.rng.randint(2, 6)), "_amount": amount}


def _trip_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [
            {
                "name": "convert_currency",
                "arguments": {"amount": slots["_amount"], "from_currency": slots["src"], "to_currency": slots["dst"]},
            }
        ]
    if len(done) == 1:
        return [
            {
                "name": "split_bill",
                "arguments": {"total": done[0][0]["converted_amount"], "people": int(slots["people"])},
            }
        ]
    return None


TRIP = ChainRecipe(
    name="convert_then_split",
    domain=D,
    tools=("convert_currency", "split_bill"),
    sample=_trip,
    steps=_trip_steps,
    facts=lambda s, d: {"converted": num(d[0][0]["converted_amount"]), "each": num(d[1][0]["per_person"])},
    asks=(
        "We spent {amount} {src} on a shared rental. Convert it to {dst} and split it between {people} people.",
        "Convert {amount} {src} into {dst}, then tell me each person's share if {people} of us split it.",
        "The hotel cost {amount} {src}. How much is that in {dst}, and what does each of {people} pay?",
        "Please change {amount} {src} to {dst} and divide it evenly among {people}.",
        "{people} friends share a {amount} {src} bill. What does each owe in {dst}?",
        "I paid {amount} {src}; split it {people} ways in {dst}, please.",
    ),
    answers=(
        "{amount} {src} is {converted} {dst}, so each of the {people} pays {each} {dst}.",
        "That converts to {converted} {dst}; split {people} ways it's {each} {dst} each.",
        "Each person owes {each} {dst} (the total is {converted} {dst}).",
    ),
)

RECIPES = (CONVERT, CURRENCY, CALC, SPLIT)
CHAINS = (TRIP,)
