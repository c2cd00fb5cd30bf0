"""Math and units domain: safe arithmetic, unit and currency conversion, statistics, loans, bills."""

from __future__ import annotations

import ast
import math
import operator
import statistics

from slca.tools.entities import CURRENCY_RATES, UNITS
from slca.tools.registry import (
    ToolError,
    array,
    boolean,
    conflict,
    date,
    enum,
    integer,
    number,
    obj,
    params,
    string,
    tool,
)
from slca.tools.world import World

D = "math"
UNIT_NAMES = tuple(UNITS)
DIMENSIONS = tuple(dict.fromkeys(d for d, _ in UNITS.values()))
CURRENCIES = tuple(CURRENCY_RATES)
MEASURES = ("mean", "median", "min", "max", "sum", "stdev", "range")
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCS = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
_CONSTS = {"pi": math.pi, "e": math.e}


def evaluate(node: ast.AST) -> float:
    """Evaluate an arithmetic AST with numbers, + - * / // % **, parentheses and a few functions."""
    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTS:
        return _CONSTS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = evaluate(node.left), evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise conflict("Exponent too large; keep exponents within ±1000.")
        if isinstance(node.op, ast.Pow):
            left = float(left)  # float powers overflow fast instead of building huge integers
            if left < 0 and not float(right).is_integer():
                raise ValueError("negative base with a fractional exponent")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*[evaluate(a) for a in node.args])
    raise SyntaxError(f"unsupported element {type(node).__name__}")


@tool(
    D,
    "calculate",
    (
        "Evaluate an arithmetic expression (+ - * / // % **, parentheses, sqrt, log, "
        "sin, cos, abs, round, min, max, pi, e)."
    ),
    params(
        {
            "expression": string(
                "Expression such as '(12.5 + 7) * 3 / 2'.",
                minLength=1,
                maxLength=200,
                pattern=r"^[0-9A-Za-z_\s+\-*/%^().,]+$",
            ),
            "precision": integer("Decimal places to round the result to; defaults to 6.", 0, 12),
        },
        ["expression"],
    ),
    obj({"expression": string(), "result": number()}),
)
def calculate(world: World, args: dict) -> dict:
    text = args["expression"]
    if "\x00" in text:
        raise ToolError("format", "Tool calculate parameter expression must not contain null bytes")
    try:
        tree = ast.parse(text.replace("^", "**"), mode="eval")
        value = float(evaluate(tree))
    except (SyntaxError, TypeError, RecursionError) as exc:
        raise ToolError(
            "format",
            (f"Tool calculate parameter expression must be an arithmetic expression like (2 + 3) * 4, got {text}"),
        ) from exc
    except ZeroDivisionError as exc:
        raise conflict(f"Division by zero in {text}.") from exc
    except OverflowError as exc:
        raise conflict(f"The result of {text} is too large.") from exc
    except ValueError as exc:  # math domain errors such as sqrt(-1) or log(0)
        raise conflict(f"{text} is undefined: {exc}.") from exc
    if not math.isfinite(value):
        raise conflict(f"The result of {text} is not a finite real number.")
    return {"expression": text, "result": round(value, args.get("precision", 6))}


def to_celsius(value: float, unit: str) -> float:
    return {"celsius": value, "fahrenheit": (value - 32) * 5 / 9, "kelvin": value - 273.15}[unit]


def from_celsius(value: float, unit: str) -> float:
    return {"celsius": value, "fahrenheit": value * 9 / 5 + 32, "kelvin": value + 273.15}[unit]


@tool(
    D,
    "convert_units",
    ("Convert a value between units of the same dimension (length, mass, volume, time, speed, area, temperature)."),
    params(
        {
            "value": number("Quantity to convert.", -1e12, 1e12),
            "from_unit": enum(UNIT_NAMES, "Unit of the value."),
            "to_unit": enum(UNIT_NAMES, "Unit to convert to."),
            "precision": integer("Decimal places; defaults to 4.", 0, 10),
        },
        ["value", "from_unit", "to_unit"],
    ),
    obj(
        {
            "value": number(),
            "from_unit": enum(UNIT_NAMES),
            "to_unit": enum(UNIT_NAMES),
            "result": number(),
            "dimension": enum(DIMENSIONS),
        }
    ),
)
def convert_units(world: World, args: dict) -> dict:
    src, dst, value = args["from_unit"], args["to_unit"], float(args["value"])
    dim_src, dim_dst = UNITS[src][0], UNITS[dst][0]
    if dim_src != dim_dst:
        raise conflict(f"Cannot convert {src} ({dim_src}) to {dst} ({dim_dst}); units must share a dimension.")
    if dim_src == "temperature":
        result = from_celsius(to_celsius(value, src), dst)
    else:
        result = value * UNITS[src][1] / UNITS[dst][1]
    return {
        "value": value,
        "from_unit": src,
        "to_unit": dst,
        "result": round(result, args.get("precision", 4)),
        "dimension": dim_src,
    }


@tool(
    D,
    "list_units",
    "List the unit names available for a dimension.",
    params({"dimension": enum(DIMENSIONS, "Physical dimension.")}, ["dimension"]),
    obj({"dimension": enum(DIMENSIONS), "units": array(enum(UNIT_NAMES), min_items=1)}),
)
def list_units(world: World, args: dict) -> dict:
    return {"dimension": args["dimension"], "units": [u for u, (d, _) in UNITS.items() if d == args["dimension"]]}


@tool(
    D,
    "convert_currency",
    "Convert an amount between currencies at today's exchange rate.",
    params(
        {
            "amount": number("Amount to convert.", 0, 1e12),
            "from_currency": enum(CURRENCIES, "ISO code of the amount's currency."),
            "to_currency": enum(CURRENCIES, "ISO code to convert to."),
        },
        ["amount", "from_currency", "to_currency"],
    ),
    obj(
        {
            "amount": number(),
            "from_currency": enum(CURRENCIES),
            "to_currency": enum(CURRENCIES),
            "rate": number(exclusiveMinimum=0),
            "converted_amount": number(),
            "as_of": date(),
        }
    ),
)
def convert_currency(world: World, args: dict) -> dict:
    src, dst = args["from_currency"], args["to_currency"]
    rate = world.rates[dst] / world.rates[src]
    return {
        "amount": float(args["amount"]),
        "from_currency": src,
        "to_currency": dst,
        "rate": round(rate, 6),
        "converted_amount": round(float(args["amount"]) * rate, 2),
        "as_of": world.today,
    }


@tool(
    D,
    "compute_statistics",
    "Compute summary statistics of a list of numbers.",
    params(
        {
            "values": array(number(minimum=-1e12, maximum=1e12), "Numbers to summarise.", 1, 200),
            "measures": array(
                enum(MEASURES), "Statistics to compute; defaults to all.", 1, len(MEASURES), uniqueItems=True
            ),
        },
        ["values"],
    ),
    obj({"count": integer(minimum=1), "results": obj({m: number() for m in MEASURES}, [], "Requested statistics.")}),
)
def compute_statistics(world: World, args: dict) -> dict:
    xs = [float(v) for v in args["values"]]
    wanted = args.get("measures", list(MEASURES))
    if "stdev" in wanted and len(xs) < 2:
        raise conflict("stdev needs at least two values.")
    table = {
        "mean": statistics.fmean,
        "median": statistics.median,
        "min": min,
        "max": max,
        "sum": math.fsum,
        "stdev": statistics.stdev,
        "range": lambda v: max(v) - min(v),
    }
    return {"count": len(xs), "results": {m: round(float(table[m](xs)), 6) for m in wanted}}


@tool(
    D,
    "loan_payment",
    "Monthly payment, total paid and total interest of a fixed-rate loan.",
    params(
        {
            "principal": number("Amount borrowed.", maximum=1e9, exclusiveMinimum=0),
            "annual_rate_percent": number("Yearly interest rate in percent.", 0, 100),
            "years": integer("Loan term in years.", 1, 50),
        },
        ["principal", "annual_rate_percent", "years"],
    ),
    obj(
        {
            "monthly_payment": number(minimum=0),
            "months": integer(minimum=1),
            "total_paid": number(minimum=0),
            "total_interest": number(minimum=0),
        }
    ),
)
def loan_payment(world: World, args: dict) -> dict:
    p, r, n = float(args["principal"]), float(args["annual_rate_percent"]) / 1200, int(args["years"]) * 12
    growth = (1 + r) ** n
    pay = p / n if growth - 1 < 1e-12 else p * r * growth / (growth - 1)  # tiny rates act as zero
    return {
        "monthly_payment": round(pay, 2),
        "months": n,
        "total_paid": round(pay * n, 2),
        "total_interest": round(max(pay * n - p, 0.0), 2),
    }


@tool(
    D,
    "split_bill",
    "Add a tip to a bill and split it evenly between people.",
    params(
        {
            "total": number("Bill amount before tip.", maximum=1e6, exclusiveMinimum=0),
            "people": integer("Number of people sharing.", 1, 50),
            "tip_percent": number("Tip in percent; defaults to 0.", 0, 100),
            "round_up": boolean("Round each share up to a whole unit."),
        },
        ["total", "people"],
    ),
    obj(
        {
            "total_with_tip": number(minimum=0),
            "tip_amount": number(minimum=0),
            "per_person": number(minimum=0),
            "people": integer(minimum=1),
        }
    ),
)
def split_bill(world: World, args: dict) -> dict:
    total, people = float(args["total"]), int(args["people"])
    tip = total * float(args.get("tip_percent", 0)) / 100
    share = (total + tip) / people
    share = float(math.ceil(share)) if args.get("round_up") else round(share, 2)
    return {"total_with_tip": round(total + tip, 2), "tip_amount": round(tip, 2), "per_person": share, "people": people}
