"""Science domain: geometry, physics and number formulas whose arguments are bare numbers.

Every argument is a number the request states (a side, a radius, a mass), so a call is a run of
numeric values, often ending on one: `{"base": 10, "height": 5}`. The other domains mostly end a
call on a string (an id, a city, a date); these tools give the policy that other shape.
"""

from __future__ import annotations

import math

from slca.tools.registry import array, conflict, integer, number, obj, params, tool
from slca.tools.world import World

D = "science"


def _side(description: str) -> dict:
    return number(description, maximum=1e6, exclusiveMinimum=0)


@tool(
    D,
    "triangle_area",
    "Area of a triangle from its base and height.",
    params({"base": _side("Length of the base."), "height": _side("Height on that base.")}, ["base", "height"]),
    obj({"base": number(), "height": number(), "area": number(minimum=0)}),
)
def triangle_area(world: World, args: dict) -> dict:
    base, height = float(args["base"]), float(args["height"])
    return {"base": base, "height": height, "area": round(base * height / 2, 6)}


@tool(
    D,
    "circle_area",
    "Area and circumference of a circle from its radius.",
    params(
        {
            "radius": _side("Radius of the circle."),
            "precision": integer("Decimal places to round to; defaults to 4.", 0, 10),
        },
        ["radius"],
    ),
    obj({"radius": number(), "area": number(minimum=0), "circumference": number(minimum=0)}),
)
def circle_area(world: World, args: dict) -> dict:
    radius, places = float(args["radius"]), args.get("precision", 4)
    return {
        "radius": radius,
        "area": round(math.pi * radius**2, places),
        "circumference": round(2 * math.pi * radius, places),
    }


@tool(
    D,
    "hypotenuse",
    "Hypotenuse of a right triangle from its two legs.",
    params({"a": _side("First leg."), "b": _side("Second leg.")}, ["a", "b"]),
    obj({"a": number(), "b": number(), "hypotenuse": number(minimum=0)}),
)
def hypotenuse(world: World, args: dict) -> dict:
    a, b = float(args["a"]), float(args["b"])
    return {"a": a, "b": b, "hypotenuse": round(math.hypot(a, b), 6)}


@tool(
    D,
    "factorial",
    "Factorial n! of a whole number.",
    params({"n": integer("Whole number to take the factorial of.", 0, 20)}, ["n"]),
    obj({"n": integer(minimum=0), "factorial": integer(minimum=1)}),
)
def factorial(world: World, args: dict) -> dict:
    n = int(args["n"])
    return {"n": n, "factorial": math.factorial(n)}


@tool(
    D,
    "quadratic_roots",
    "Real roots of the quadratic equation a*x^2 + b*x + c = 0.",
    params(
        {
            "a": number("Coefficient of x^2 (not zero).", -1e6, 1e6),
            "b": number("Coefficient of x.", -1e6, 1e6),
            "c": number("Constant term.", -1e6, 1e6),
        },
        ["a", "b", "c"],
    ),
    obj({"discriminant": number(), "roots": array(number(), max_items=2)}),
)
def quadratic_roots(world: World, args: dict) -> dict:
    a, b, c = float(args["a"]), float(args["b"]), float(args["c"])
    if a == 0:
        raise conflict("Coefficient 'a' must not be zero: the equation is not quadratic.")
    disc = b * b - 4 * a * c
    if disc < 0:
        roots: list[float] = []
    elif disc == 0:
        roots = [round(-b / (2 * a), 6)] * 2  # a double root, counted with its multiplicity
    else:
        root = math.sqrt(disc)
        roots = sorted(round((-b + sign * root) / (2 * a), 6) for sign in (1, -1))
    return {"discriminant": round(disc, 6), "roots": roots}


@tool(
    D,
    "kinetic_energy",
    "Kinetic energy in joules of a mass moving at a speed.",
    params(
        {"mass_kg": _side("Mass in kilograms."), "velocity_ms": number("Speed in metres per second.", 0, 3e8)},
        ["mass_kg", "velocity_ms"],
    ),
    obj({"mass_kg": number(), "velocity_ms": number(), "energy_joules": number(minimum=0)}),
)
def kinetic_energy(world: World, args: dict) -> dict:
    mass, speed = float(args["mass_kg"]), float(args["velocity_ms"])
    return {"mass_kg": mass, "velocity_ms": speed, "energy_joules": round(0.5 * mass * speed**2, 6)}


@tool(
    D,
    "greatest_common_divisor",
    "Greatest common divisor of two whole numbers.",
    params(
        {"a": integer("First whole number.", 1, 10**9), "b": integer("Second whole number.", 1, 10**9)},
        ["a", "b"],
    ),
    obj({"a": integer(minimum=1), "b": integer(minimum=1), "gcd": integer(minimum=1)}),
)
def greatest_common_divisor(world: World, args: dict) -> dict:
    a, b = int(args["a"]), int(args["b"])
    return {"a": a, "b": b, "gcd": math.gcd(a, b)}
