"""Science task recipes: triangle and circle areas, hypotenuses, factorials, quadratic roots,
kinetic energy, greatest common divisors, and a hypotenuse-then-circle chain.

Every argument is a number said in the request, written as the request says it (`10`, `2.5`).
"""

from __future__ import annotations

from slca.data.spec import ChainRecipe, Ctx, Draw, Reject, ToolRecipe, num

D = "science"


def _length(ctx: Ctx) -> int | float:
    """A length as people say it: mostly whole numbers, sometimes a half."""
    whole = ctx.rng.randint(2, 40)
    return whole + 0.5 if ctx.chance(0.2) else whole


def _triangle(ctx: Ctx) -> Draw:
    base, height = _length(ctx), _length(ctx)
    slots = {"base": num(base), "height": num(height)}
    return Draw(slots, {"base": base, "height": height}, f"base {num(base)} and height {num(height)}")


TRIANGLE = ToolRecipe(
    tool="triangle_area",
    domain=D,
    sample=_triangle,
    gist="work out a triangle's area",
    facts=lambda r, d: {"area": num(r["area"])},
    asks=(
        "What is the area of a triangle with a base of {base} and a height of {height}?",
        "Find the area of a triangle whose base is {base} units and height is {height} units.",
        "A triangle has base {base} and height {height}. How big is its area?",
        "Calculate the area of a triangle: base {base}, height {height}.",
        "I drew a triangle {base} cm wide at the base and {height} cm tall. What's its area?",
        "Area of a triangle with base {base} and height {height}, please.",
    ),
    parallel=(
        "Find the areas of triangles with {items}.",
        "What are the areas of these triangles: {items}?",
        "Calculate the triangle areas for {items}.",
        "I have triangles with {items}; give me each area.",
        "Work out the area of a triangle with {items}.",
        "Areas please, for triangles of {items}.",
    ),
    answers=(
        "The triangle's area is {area}.",
        "With base {base} and height {height}, the area is {area}.",
        "That triangle has an area of {area}.",
    ),
)


def _circle(ctx: Ctx) -> Draw:
    radius = _length(ctx)
    return Draw({"radius": num(radius)}, {"radius": radius}, f"radius {num(radius)}")


CIRCLE = ToolRecipe(
    tool="circle_area",
    domain=D,
    sample=_circle,
    gist="work out a circle's area",
    facts=lambda r, d: {"area": num(r["area"]), "circumference": num(r["circumference"])},
    asks=(
        "What is the area of a circle with a radius of {radius}?",
        "Find the area of a circle whose radius is {radius} meters.",
        "A circular table has a radius of {radius} inches. What is its area?",
        "Calculate the area and circumference of a circle of radius {radius}.",
        "How much area does a circle with radius {radius} cover?",
        "Circle, radius {radius}: area?",
    ),
    parallel=(
        "Find the areas of circles with {items}.",
        "What are the areas of circles of {items}?",
        "Calculate the circle areas for {items}.",
        "I have circles with {items}. How big is each?",
        "Give me the area of a circle with {items}.",
        "Circle areas for {items}, please.",
    ),
    answers=(
        "The circle's area is {area} and its circumference is {circumference}.",
        "A radius of {radius} gives an area of {area} and a circumference of {circumference}.",
        "Area: {area} (circumference {circumference}).",
    ),
)


def _legs(ctx: Ctx) -> Draw:
    a, b = ctx.rng.randint(2, 30), ctx.rng.randint(2, 30)
    return Draw({"a": str(a), "b": str(b)}, {"a": a, "b": b}, f"legs {a} and {b}")


HYPOT = ToolRecipe(
    tool="hypotenuse",
    domain=D,
    sample=_legs,
    gist="find a hypotenuse",
    facts=lambda r, d: {"hyp": num(r["hypotenuse"])},
    asks=(
        "A right triangle has legs of {a} and {b}. How long is the hypotenuse?",
        "Find the hypotenuse of a right triangle with sides {a} and {b}.",
        "What is the length of the hypotenuse when the two legs are {a} and {b}?",
        "Calculate the hypotenuse for legs {a} and {b}.",
        "My ladder's base is {a} feet from the wall and it reaches {b} feet up. How long is the ladder?",
        "Hypotenuse of a {a} by {b} right triangle?",
    ),
    parallel=(
        "Find the hypotenuses of right triangles with {items}.",
        "What are the hypotenuses for {items}?",
        "Calculate the hypotenuse of right triangles with {items}.",
        "I have right triangles with {items}; how long is each hypotenuse?",
        "Hypotenuses please, for {items}.",
        "Work out the hypotenuse for {items}.",
    ),
    answers=(
        "The hypotenuse is {hyp}.",
        "With legs {a} and {b}, the hypotenuse is {hyp}.",
        "It comes to {hyp}.",
    ),
)


def _fact(ctx: Ctx) -> Draw:
    n = ctx.rng.randint(3, 20)
    return Draw({"n": str(n)}, {"n": n}, str(n))


FACTORIAL = ToolRecipe(
    tool="factorial",
    domain=D,
    sample=_fact,
    gist="compute a factorial",
    facts=lambda r, d: {"value": str(r["factorial"])},
    asks=(
        "What is the factorial of {n}?",
        "Calculate {n}!.",
        "Compute the factorial of the number {n}.",
        "How much is {n} factorial?",
        "I need {n}! for a probability problem.",
        "Factorial of {n}, please.",
    ),
    parallel=(
        "What are the factorials of {items}?",
        "Calculate the factorials of {items}.",
        "Compute the factorial of each of {items}.",
        "I need the factorials of {items}.",
        "Give me {items} factorial.",
        "Factorials of {items}, please.",
    ),
    answers=("{n}! comes out as {value}.", "The factorial of {n} is {value}.", "{n} factorial comes to {value}."),
)


def _coefficient(ctx: Ctx, low: int, high: int) -> int:
    value = ctx.rng.randint(low, high)
    return value if value != 0 else 1


def _quadratic(ctx: Ctx) -> Draw:
    a, b, c = _coefficient(ctx, 1, 5), _coefficient(ctx, -12, 12), _coefficient(ctx, -20, 20)
    slots = {"a": str(a), "b": str(b), "c": str(c)}
    return Draw(slots, {"a": a, "b": b, "c": c}, f"a={a}, b={b}, c={c}")


def _roots(response: dict, draw: Draw) -> dict:
    """Each root its own fact (a value the response holds, so a reward finds it in what was observed)."""
    roots = response["roots"]
    if not roots:
        raise Reject("no real roots to state")
    return {"low": num(roots[0]), "high": num(roots[1])}


QUADRATIC = ToolRecipe(
    tool="quadratic_roots",
    domain=D,
    sample=_quadratic,
    gist="solve a quadratic equation",
    facts=_roots,
    asks=(
        "Find the roots of the quadratic equation with a={a}, b={b} and c={c}.",
        "Solve the quadratic equation where a is {a}, b is {b} and c is {c}.",
        "What are the roots of a quadratic with coefficients {a}, {b} and {c}?",
        "Solve {a}x^2 + ({b})x + ({c}) = 0.",
        "I need the real solutions of a quadratic with a = {a}, b = {b}, c = {c}.",
        "Quadratic roots for a={a}, b={b}, c={c}?",
    ),
    parallel=(
        "Solve these quadratic equations: {items}.",
        "Find the roots of the quadratics with {items}.",
        "What are the roots for {items}?",
        "I have quadratics with {items}; solve each.",
        "Give me the roots of the equations with {items}.",
        "Quadratic roots for {items}, please.",
    ),
    answers=(
        "The roots are {low} and {high}.",
        "It solves to x = {low} and {high}.",
        "The real roots: {low} and {high}.",
    ),
)


def _motion(ctx: Ctx) -> Draw:
    mass, speed = ctx.rng.randint(1, 90), ctx.rng.randint(2, 40)
    slots = {"mass": str(mass), "speed": str(speed)}
    return Draw(slots, {"mass_kg": mass, "velocity_ms": speed}, f"{mass} kg at {speed} m/s")


KINETIC = ToolRecipe(
    tool="kinetic_energy",
    domain=D,
    sample=_motion,
    gist="work out kinetic energy",
    facts=lambda r, d: {"energy": num(r["energy_joules"])},
    asks=(
        "What is the kinetic energy of a {mass} kg object moving at {speed} m/s?",
        "Calculate the kinetic energy of a mass of {mass} kg travelling at {speed} meters per second.",
        "A {mass} kg ball rolls at {speed} m/s. How much kinetic energy does it have?",
        "Kinetic energy for mass {mass} kg and velocity {speed} m/s?",
        "Find the energy of motion of a {mass}-kilogram cart going {speed} m/s.",
        "How many joules of kinetic energy does {mass} kg at {speed} m/s carry?",
    ),
    parallel=(
        "What are the kinetic energies of {items}?",
        "Calculate the kinetic energy of {items}.",
        "Find the kinetic energy for {items}.",
        "I need kinetic energies for {items}.",
        "Work out the energy of {items}.",
        "Kinetic energy of {items}, please.",
    ),
    answers=(
        "The kinetic energy is {energy} joules.",
        "{mass} kg at {speed} m/s carries {energy} J.",
        "That is {energy} joules of kinetic energy.",
    ),
)


def _pair(ctx: Ctx) -> Draw:
    k = ctx.rng.randint(2, 12)
    a, b = k * ctx.rng.randint(2, 30), k * ctx.rng.randint(2, 30)
    if a == b:
        raise Reject("equal numbers")
    return Draw({"a": str(a), "b": str(b)}, {"a": a, "b": b}, f"{a} and {b}")


GCD = ToolRecipe(
    tool="greatest_common_divisor",
    domain=D,
    sample=_pair,
    gist="find a greatest common divisor",
    facts=lambda r, d: {"gcd": str(r["gcd"])},
    asks=(
        "What is the greatest common divisor of {a} and {b}?",
        "Find the GCD of {a} and {b}.",
        "Calculate the highest common factor of the numbers {a} and {b}.",
        "What's the largest number that divides both {a} and {b}?",
        "I need gcd({a}, {b}).",
        "Greatest common divisor of {a} and {b}, please.",
    ),
    parallel=(
        "Find the greatest common divisor of {items}.",
        "What are the GCDs of {items}?",
        "Calculate the GCD for each pair: {items}.",
        "I need the greatest common divisors of {items}.",
        "Work out the highest common factor of {items}.",
        "GCDs of {items}, please.",
    ),
    answers=(
        "The greatest common divisor is {gcd}.",
        "The GCD of {a} and {b} is {gcd}.",
        "{a} and {b} share {gcd} as their GCD.",
    ),
)


def _ladder(ctx: Ctx) -> dict:
    a, b = ctx.rng.randint(2, 20), ctx.rng.randint(2, 20)
    return {"a": str(a), "b": str(b), "_a": a, "_b": b}


def _ladder_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [{"name": "hypotenuse", "arguments": {"a": slots["_a"], "b": slots["_b"]}}]
    if len(done) == 1:
        return [{"name": "circle_area", "arguments": {"radius": done[0][0]["hypotenuse"]}}]
    return None


SWEEP = ChainRecipe(
    name="hypotenuse_then_circle",
    domain=D,
    tools=("hypotenuse", "circle_area"),
    sample=_ladder,
    steps=_ladder_steps,
    facts=lambda s, d: {"hyp": num(d[0][0]["hypotenuse"]), "area": num(d[1][0]["area"])},
    asks=(
        "A right triangle has legs {a} and {b}. Find its hypotenuse, then the area of a circle with that radius.",
        "Take the hypotenuse of legs {a} and {b} as a radius: how big is that circle's area?",
        "A sprinkler at one corner of a {a} by {b} lawn just reaches the far corner. What area does its circle cover?",
        "First the hypotenuse for legs {a} and {b}, then the area of the circle it is the radius of.",
        "Compute the hypotenuse of a {a}-{b} right triangle and use it as the radius of a circle. Area?",
        "Legs {a} and {b}: hypotenuse, then the circle area with that radius, please.",
    ),
    answers=(
        "The hypotenuse is {hyp}, so the circle's area is {area}.",
        "With a radius of {hyp}, the circle covers {area}.",
        "Hypotenuse {hyp}; circle area {area}.",
    ),
)

RECIPES = (TRIANGLE, CIRCLE, HYPOT, FACTORIAL, QUADRATIC, KINETIC, GCD)
CHAINS = (SWEEP,)
