"""Weather task recipes: current conditions, forecasts, past weather, air quality, comparisons."""

from __future__ import annotations

from slca.data.spec import (
    ChainRecipe,
    Ctx,
    Draw,
    ToolRecipe,
    date_phrase,
    human_date,
    join_items,
    num,
    shift,
    words,
)

D = "weather"


def _units(ctx: Ctx) -> tuple[dict, str, str]:
    """Optional fahrenheit request: (extra arguments, phrase for the ask, degree symbol)."""
    if not ctx.plain and ctx.chance(0.3):
        return {"units": "fahrenheit"}, ctx.rng.choice((" in Fahrenheit", " (Fahrenheit please)", " in °F")), "°F"
    return {}, "", "°C"


def _current(ctx: Ctx) -> Draw:
    city = ctx.pick("city")
    extra, phrase, deg = _units(ctx)
    return Draw({"city": city, "units": phrase, "_deg": deg}, {"city": city, **extra}, city)


CURRENT = ToolRecipe(
    tool="get_current_weather",
    domain=D,
    sample=_current,
    gist="check the current weather",
    asks=(
        "What's the weather like in {city} right now{units}?",
        "Can you tell me the current conditions in {city}{units}?",
        "How's the weather in {city} today{units}?",
        "I'm about to head out in {city}. What is it like outside{units}?",
        "Please check today's weather for {city}{units}.",
        "Could you look up the temperature and sky conditions in {city} today{units}?",
        "{city} weather right now{units}?",
        "Is it nice out in {city} at the moment? Give me the temperature{units}.",
    ),
    parallel=(
        "What's the weather right now in {items}?",
        "Compare today's conditions in {items} for me.",
        "Give me the current weather for {items}.",
        "How's the weather today in {items}?",
        "I need today's temperature and conditions in {items}.",
        "Check the current weather in each of these cities: {items}.",
    ),
    facts=lambda r, d: {"temperature": num(r["temperature"]), "condition": words(r["condition"])},
    answers=(
        "It's currently {temperature}{_deg} and {condition} in {city}.",
        "Right now {city} is {condition} with a temperature of {temperature}{_deg}.",
        "In {city} it is {temperature}{_deg} at the moment, and the sky is {condition}.",
        "{city}: {temperature}{_deg}, {condition}.",
    ),
)


def _forecast(ctx: Ctx) -> Draw:
    city = ctx.pick("city")
    days = 1 if ctx.plain else ctx.rng.choice((1, 2, 3))
    extra, phrase, deg = _units(ctx)
    span = {1: "tomorrow", 2: "the next two days", 3: "the next three days"}[days]
    return Draw({"city": city, "span": span, "units": phrase, "_deg": deg}, {"city": city, "days": days, **extra}, city)


def _forecast_facts(response: dict, draw: Draw) -> dict:
    days = response["forecast"]
    facts: dict[str, str] = {}
    parts = []
    for i, day in enumerate(days):
        facts[f"high{i}"], facts[f"cond{i}"] = num(day["high"]), words(day["condition"])
        parts.append(f"{human_date(day['date'])}: high {facts[f'high{i}']}{draw.slots['_deg']}, {facts[f'cond{i}']}")
    facts["_days"] = "; ".join(parts)
    return facts


FORECAST = ToolRecipe(
    tool="get_forecast",
    domain=D,
    sample=_forecast,
    gist="get a weather forecast",
    asks=(
        "What's the forecast for {city} for {span}{units}?",
        "Will it rain in {city}? Give me the forecast for {span}{units}.",
        "I'm planning a trip to {city}. What does the weather look like for {span}{units}?",
        "Could you pull up the {city} forecast for {span}{units}, please?",
        "Forecast for {span} in {city}{units}?",
        "Please tell me the expected highs and conditions in {city} for {span}{units}.",
    ),
    parallel=(
        "What's tomorrow's forecast for {items}?",
        "Give me tomorrow's weather forecast in {items}.",
        "How will the weather be tomorrow in {items}?",
        "Please check the forecast for tomorrow in each of {items}.",
        "I'm choosing between {items} for tomorrow. What's the forecast in each?",
        "Tomorrow's forecast for {items}, please.",
    ),
    facts=_forecast_facts,
    answers=("Forecast for {city} — {_days}.", "Here's the outlook for {city}: {_days}.", "{city} forecast: {_days}."),
)


def _history(ctx: Ctx) -> Draw:
    city = ctx.pick("city")
    offset = -ctx.rng.randint(1, 20)
    extra, phrase, deg = _units(ctx)
    when = date_phrase(ctx.rng, ctx.world.today, offset)
    return Draw(
        {"city": city, "when": when, "units": phrase, "_deg": deg},
        {"city": city, "date": shift(ctx.world.today, offset), **extra},
        f"{city} {when}",
    )


HISTORY = ToolRecipe(
    tool="get_historical_weather",
    domain=D,
    sample=_history,
    gist="look up past weather",
    asks=(
        "What was the weather in {city} {when}{units}?",
        "How hot did it get in {city} {when}{units}?",
        "Can you check what the weather was like {when} in {city}{units}?",
        "I missed the news: what were the conditions in {city} {when}{units}?",
        "Please look up the recorded high and low for {city} {when}{units}.",
        "Did it rain in {city} {when}? Tell me the weather{units}.",
    ),
    facts=lambda r, d: {"high": num(r["high"]), "low": num(r["low"]), "condition": words(r["condition"])},
    answers=(
        "{city} {when}: high {high}{_deg}, low {low}{_deg}, {condition}.",
        "The weather in {city} {when} was {condition}, with a high of {high}{_deg} and a low of {low}{_deg}.",
        "It was {condition} in {city} {when}; temperatures ranged from {low}{_deg} to {high}{_deg}.",
    ),
)


def _air(ctx: Ctx) -> Draw:
    city = ctx.pick("city")
    return Draw({"city": city}, {"city": city}, city)


AIR = ToolRecipe(
    tool="get_air_quality",
    domain=D,
    sample=_air,
    gist="check air quality",
    asks=(
        "How's the air quality in {city} today?",
        "What's the AQI in {city} right now?",
        "Is the air clean enough for a run in {city}? Check the air quality index.",
        "Please get me the current air quality for {city}.",
        "Could you tell me how polluted the air is in {city}?",
        "Air quality in {city}, please.",
    ),
    parallel=(
        "Compare the air quality in {items}.",
        "What's the AQI today in {items}?",
        "Check the air quality index for {items}, please.",
        "How clean is the air right now in {items}?",
        "Give me today's air quality for {items}.",
        "Is the air good in {items} today?",
    ),
    facts=lambda r, d: {"aqi": str(r["aqi"]), "category": words(r["category"])},
    answers=(
        "The AQI in {city} is {aqi}, which counts as {category}.",
        "Air quality in {city}: {aqi} ({category}).",
        "{city} currently has an air quality index of {aqi}, rated {category}.",
    ),
)


def _compare(ctx: Ctx) -> dict:
    cities = ctx.pick_many("city", ctx.rng.choice((2, 3)))
    metric, word = ctx.rng.choice(
        (("temperature", "warmest"), ("precipitation_chance", "rainiest"), ("wind_kph", "windiest"))
    )
    days = ctx.rng.choice((1, 2))
    return {
        "cities": ", ".join(cities[:-1]) + " or " + cities[-1],
        "all": join_items(cities),
        "word": word,
        "span": {1: "tomorrow", 2: "the next two days"}[days],
        "_cities": cities,
        "_metric": metric,
        "_days": days,
    }


def _compare_steps(slots: dict, done: list[list[dict]]) -> list[dict] | None:
    if not done:
        return [{"name": "compare_weather", "arguments": {"cities": slots["_cities"], "metric": slots["_metric"]}}]
    if len(done) == 1:
        return [{"name": "get_forecast", "arguments": {"city": done[0][0]["highest"], "days": slots["_days"]}}]
    return None


def _compare_facts(slots: dict, done: list[list[dict]]) -> dict:
    facts = {"best": done[0][0]["highest"]}
    parts = []
    for i, day in enumerate(done[1][0]["forecast"]):
        facts[f"high{i}"], facts[f"cond{i}"] = num(day["high"]), words(day["condition"])
        parts.append(f"{human_date(day['date'])} {facts[f'cond{i}']} with a high of {facts[f'high{i}']}°C")
    facts["_outlook"] = "; ".join(parts)
    return facts


COMPARE_THEN_FORECAST = ChainRecipe(
    name="compare_then_forecast",
    domain=D,
    tools=("compare_weather", "get_forecast"),
    sample=_compare,
    steps=_compare_steps,
    facts=_compare_facts,
    asks=(
        "Which is {word} today: {cities}? Then get me the forecast there for {span}.",
        "Of {all}, find the {word} city today and show me its forecast for {span}.",
        "I want to know which of {all} is {word} right now, and then what the weather will be there for {span}.",
        "Compare {all} to see which is {word} today, then pull the forecast for that city for {span}.",
        "Please figure out the {word} place today among {all} and give me its outlook for {span}.",
        "Between {all}, which one is {word} today? Follow up with that city's forecast for {span}.",
    ),
    answers=(
        "{best} is the {word} today. Forecast there: {_outlook}.",
        "Today the {word} of them is {best}; the outlook is {_outlook}.",
        "{best} comes out {word}. Coming up: {_outlook}.",
    ),
)

RECIPES = (CURRENT, FORECAST, HISTORY, AIR)
CHAINS = (COMPARE_THEN_FORECAST,)
